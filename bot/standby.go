package bot

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
)

// This file is the hot standby on PostgreSQL (database.standby): a hookroom
// that finds another one holding the database's lock opens it all the same,
// prepares everything New prepares, then waits in Run — its HTTP listener
// answering /readyz with "standby" — until the lock is free: the active one
// stopped (it releases the lock in Database.Close) or died (the server ends
// its session). Then it goes on as any start does, with the same accounts,
// devices and crypto store, and the inbox replay answers what arrived in
// between.
//
// Why wait in Run and not in New: the listener that tells the operator
// "standby" is Run's, and a standby that has loaded its plugins and
// configuration takes over sooner. What must not happen before the lock is
// held is guarded where it happens: a schema migration waits for the lock
// (gateUpgrades: the migrations of a newer hookroom never run under an
// older active one), the Matrix accounts start only in Run after the wait,
// and what New read from the database is read again after it (takeOver).

// standbyPoll is how often a standby tries for the lock.
var standbyPoll = time.Second

// lockPingInterval is how often the active process checks that the session
// holding its lock is alive, and lockPingTimeout how long one check may take.
var (
	lockPingInterval = 2 * time.Second
	lockPingTimeout  = 5 * time.Second
)

// errLockLost is the cause of the run's end when the session holding the
// lock failed: a standby may be taking over.
var errLockLost = errors.New("lost the database lock")

// lockSessionSettings make the server end the lock's session soon after its
// process's machine is gone without closing the connection (power loss, a
// network cut), so that a standby takes over within about 11 s: TCP
// keepalive probes after 4 s of silence, every 2 s, the third unanswered
// ends the session; and data the server sent that stays unacknowledged for
// 10 s ends it too (PostgreSQL 12 and later). A process that dies on a
// machine that lives on has its connection closed by the kernel: the server
// notices at once. The server ignores these settings on a Unix socket.
var lockSessionSettings = []string{
	"SET tcp_keepalives_idle = 4",
	"SET tcp_keepalives_interval = 2",
	"SET tcp_keepalives_count = 3",
	"SET tcp_user_timeout = 10000",
}

// pgLock is hookroom's advisory lock on its PostgreSQL database, tried for
// and held on a connection of its own: the server drops it when that
// session ends, so a process that dies leaves no stale lock.
type pgLock struct {
	db   *sql.DB
	mu   sync.Mutex
	conn *sql.Conn // the session that holds or tries for the lock; nil: none
	held atomic.Bool
}

// try takes the lock unless another session holds it, and reports whether
// this one holds it now. An error leaves no session behind: the next try
// connects again.
func (l *pgLock) try(ctx context.Context) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held.Load() {
		return true, nil
	}
	if l.conn == nil {
		conn, err := l.db.Conn(ctx)
		if err != nil {
			return false, fmt.Errorf("failed to connect: %w", err)
		}
		for _, q := range lockSessionSettings {
			// Best effort: an older server lacks tcp_user_timeout.
			_, _ = conn.ExecContext(ctx, q)
		}
		l.conn = conn
	}
	var ok bool
	if err := l.conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", lockKey).Scan(&ok); err != nil {
		l.discard()
		return false, fmt.Errorf("failed to take the single-process lock: %w", err)
	}
	l.held.Store(ok)
	return ok, nil
}

// ping checks that the session holding the lock is alive (it then holds
// the lock: only its end releases it besides release). Without the lock
// there is nothing to check.
func (l *pgLock) ping(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held.Load() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, lockPingTimeout)
	defer cancel()
	if _, err := l.conn.ExecContext(ctx, "SELECT 1"); err != nil {
		l.discard()
		return err
	}
	return nil
}

// release gives up the lock (a standby takes over at its next try) and the
// connection. It may be called more than once.
func (l *pgLock) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return
	}
	if l.held.Load() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var ok bool
		if err := l.conn.QueryRowContext(ctx, "SELECT pg_advisory_unlock($1)", lockKey).Scan(&ok); err != nil || !ok {
			l.discard() // ending the session drops the lock
			return
		}
	}
	_ = l.conn.Close()
	l.conn = nil
	l.held.Store(false)
}

// discard ends the lock's session: the pool closes the connection instead
// of keeping it, and the server drops the lock with the session.
func (l *pgLock) discard() {
	_ = l.conn.Raw(func(any) error { return driver.ErrBadConn })
	_ = l.conn.Close()
	l.conn = nil
	l.held.Store(false)
}

// standbyState is what a Database opened as a standby keeps.
type standbyState struct {
	opened   bool        // opened as a standby (the lock was held elsewhere)
	active   atomic.Bool // holds the lock since
	announce sync.Once   // the standby line is logged once
}

// Standby reports whether d was opened as a standby and does not hold the
// lock yet: /readyz answers "standby" meanwhile.
func (d *Database) Standby() bool {
	return d.standby.opened && !d.standby.active.Load()
}

// waitForLock returns once d holds the lock, trying every standbyPoll, or
// with an error when ctx ends. For a database that holds it (every one but
// a standby's) it returns at once.
func (d *Database) waitForLock(ctx context.Context) error {
	if !d.Standby() {
		return nil
	}
	log := zerolog.Ctx(ctx)
	d.standby.announce.Do(func() {
		log.Info().Msg("standby: another hookroom holds the database; waiting to take over")
	})
	start := time.Now()
	tick := time.NewTicker(standbyPoll)
	defer tick.Stop()
	failing := false
	for {
		ok, err := d.lock.try(ctx)
		switch {
		case ctx.Err() != nil:
			return fmt.Errorf("standby: %w", ctx.Err())
		case err != nil:
			if !failing {
				log.Warn().Err(err).Msg("standby: failed to check the database lock; trying again")
			}
			failing = true
		case ok:
			d.standby.active.Store(true)
			log.Info().Dur("waited", time.Since(start)).Msg("standby: took over the database")
			return nil
		case failing:
			log.Info().Msg("standby: the database lock can be checked again")
			failing = false
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("standby: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// gateUpgrades makes a schema migration on d (a standby's) wait until d
// holds the lock: a newer hookroom waiting as a standby must not change the
// tables under the older one that is active. The stores' Upgrade calls
// PrepareUpgrade before the first change; on an up-to-date schema nothing
// waits. ctx is New's: when it ends, the wait and then the migration fail.
func (d *Database) gateUpgrades(ctx context.Context) {
	d.Log = upgradeGate{DatabaseLogger: d.Log, wait: func() {
		if !d.Standby() {
			return
		}
		zerolog.Ctx(ctx).Info().Msg("standby: the database schema needs an upgrade, which waits until the active hookroom stops")
		_ = d.waitForLock(ctx)
	}}
}

// upgradeGate is a dbutil logger that waits before a migration.
type upgradeGate struct {
	dbutil.DatabaseLogger
	wait func()
}

func (g upgradeGate) PrepareUpgrade(current, compat, latest int) {
	g.DatabaseLogger.PrepareUpgrade(current, compat, latest)
	if current < latest {
		g.wait()
	}
}

// watchLock checks every interval (lockPingInterval, read by the caller),
// until ctx ends, that the session holding d's lock is alive; when it is
// not, it logs and calls stop with errLockLost: a standby may be taking
// over, and two active processes would answer every message twice.
func (d *Database) watchLock(ctx context.Context, stop context.CancelCauseFunc, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if err := d.lock.ping(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			zerolog.Ctx(ctx).Error().Err(err).Msg("lost the database lock (its connection failed); stopping, a standby may take over")
			stop(fmt.Errorf("%w: %w", errLockLost, err))
			return
		}
	}
}

// takeOver is where Run waits while b is a standby, until it holds the
// database; then it reads again what New read from the database while
// another hookroom ran (the rooms joined on invites). It returns ctx for
// the run, which ends with cause errLockLost when the lock's session fails.
func (b *Bot) takeOver(ctx context.Context) (context.Context, error) {
	if err := b.db.waitForLock(ctx); err != nil {
		return ctx, err
	}
	if b.db.standby.opened {
		b.invited.mu.Lock()
		b.invited.rooms = nil
		b.invited.mu.Unlock()
		if err := b.loadInvitedRooms(ctx); err != nil {
			return ctx, err
		}
	}
	if b.db.lock == nil {
		return ctx, nil
	}
	ctx, stop := context.WithCancelCause(ctx)
	go b.db.watchLock(ctx, stop, lockPingInterval)
	return ctx, nil
}

// lockLost returns the error that ended a run whose ctx (takeOver's) ended
// because the database lock was lost, or nil.
func lockLost(ctx context.Context) error {
	if err := context.Cause(ctx); errors.Is(err, errLockLost) {
		return err
	}
	return nil
}
