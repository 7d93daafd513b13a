package bot

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/internal/testkit"
)

// capturedLog collects log messages for a test, and tells when one shows.
type capturedLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *capturedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(p))
	return len(p), nil
}

// count returns how many lines contain s.
func (l *capturedLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (l *capturedLog) ctx() context.Context {
	return zerolog.New(l).WithContext(context.Background())
}

// fastStandby makes the standby try for the lock, and the active check
// its session, often, and a hookroom without standby wait briefly for
// the lock (restored at the end of the test).
func fastStandby(t *testing.T) {
	poll, ping, wait := standbyPoll, lockPingInterval, postgresLockWait
	standbyPoll, lockPingInterval, postgresLockWait = 50*time.Millisecond, 50*time.Millisecond, 300*time.Millisecond
	t.Cleanup(func() { standbyPoll, lockPingInterval, postgresLockWait = poll, ping, wait })
}

func standbyConfig(t *testing.T) *config.Config {
	return &config.Config{Database: config.Database{Type: config.DatabasePostgres, URI: config.Secret(pgtest.URL(t)), Standby: true}}
}

// terminateLockSession ends the session that holds hookroom's lock from
// another connection, as the server does when the process holding it is
// killed (or its machine is gone and the keepalives ran out).
func terminateLockSession(t *testing.T, db *Database) {
	t.Helper()
	var n int
	err := db.QueryRow(context.Background(), `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid()
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("terminated %d sessions holding the lock (%v), want 1", n, err)
	}
}

// With database.standby a second hookroom on the database opens it as a
// standby, logs once that it waits, and takes the lock over when the
// active one closes its database (a clean shutdown) or its session ends
// (a killed process); the active one notices that its session is gone.
func TestStandbyTakesOver(t *testing.T) {
	fastStandby(t)
	for _, how := range []string{"closed", "killed"} {
		t.Run(how, func(t *testing.T) {
			cfg := standbyConfig(t)
			var activeLog, standbyLog capturedLog
			active, err := OpenDatabase(activeLog.ctx(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer active.Close()
			if active.Standby() {
				t.Fatal("the first hookroom on the database is a standby")
			}
			standby, err := OpenDatabase(standbyLog.ctx(), cfg)
			if err != nil {
				t.Fatalf("a second hookroom with database.standby: %v", err)
			}
			defer standby.Close()
			if !standby.Standby() {
				t.Fatal("the second hookroom on the database is not a standby")
			}
			watchCtx, stop := context.WithCancelCause(activeLog.ctx())
			defer stop(nil)
			go active.watchLock(watchCtx, stop, lockPingInterval)

			took := make(chan error, 1)
			go func() { took <- standby.waitForLock(standbyLog.ctx()) }()
			const waiting = "standby: another hookroom holds the database; waiting to take over"
			testkit.Eventually(t, 10*time.Second, "the standby says it waits", func() bool { return standbyLog.count(waiting) > 0 })
			if !standby.Standby() {
				t.Fatal("the standby took over while the active one holds the lock")
			}

			began := time.Now()
			switch how {
			case "closed":
				if err := active.Close(); err != nil {
					t.Fatal(err)
				}
			case "killed":
				terminateLockSession(t, standby)
			}
			select {
			case err := <-took:
				if err != nil {
					t.Fatalf("the standby: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the standby did not take over within 10s")
			}
			t.Logf("took over %v after the active one was %s", time.Since(began).Round(time.Millisecond), how)
			if standby.Standby() {
				t.Error("Standby() after the take-over")
			}
			if n := standbyLog.count(waiting); n != 1 {
				t.Errorf("the standby logged that it waits %d times, want once", n)
			}
			if n := standbyLog.count("standby: took over the database"); n != 1 {
				t.Errorf("the take-over was logged %d times, want once", n)
			}
			// The one that took over holds the lock: a third is refused.
			third, err := OpenDatabase(context.Background(), &config.Config{Database: config.Database{Type: cfg.Database.Type, URI: cfg.Database.URI}})
			if err == nil {
				_ = third.Close()
				t.Error("a third hookroom without standby opened the database next to the one that took over")
			} else if !errors.Is(err, ErrDatabaseInUse) {
				t.Errorf("third open: %v, want ErrDatabaseInUse", err)
			}

			if how == "killed" {
				testkit.Eventually(t, 10*time.Second, "the killed one notices it lost the lock", func() bool { return watchCtx.Err() != nil })
				if err := context.Cause(watchCtx); !errors.Is(err, errLockLost) {
					t.Errorf("the active run ended with %v, want errLockLost", err)
				}
				if lockLost(watchCtx) == nil {
					t.Error("lockLost after the lock was lost = nil")
				}
				if activeLog.count("lost the database lock") != 1 {
					t.Error("the loss of the lock was not logged once")
				}
			} else if err := context.Cause(watchCtx); err != nil {
				t.Errorf("closing the database ended the watch with %v", err)
			}
		})
	}
}

// The standby's wait ends with an error when its context does.
func TestStandbyWaitEndsWithContext(t *testing.T) {
	fastStandby(t)
	cfg := standbyConfig(t)
	active, err := OpenDatabase(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer active.Close()
	standby, err := OpenDatabase(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := standby.waitForLock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("waitForLock = %v, want the context's error", err)
	}
	if !standby.Standby() {
		t.Error("a standby whose wait ended holds the lock")
	}
}

// A standby runs the stores' Upgrade as New does: on an up-to-date schema
// it changes nothing and does not wait; a migration (a newer hookroom
// waiting next to an older one) waits until the standby holds the lock.
func TestStandbyUpgradeWaitsForTheLock(t *testing.T) {
	fastStandby(t)
	cfg := standbyConfig(t)
	table := func(n int) dbutil.UpgradeTable {
		wip := dbutil.BuildUpgradeTable()
		for i := range n {
			wip = wip.WithRaw(i, i+1, i+1, "probe", dbutil.TxnModeOn, func(ctx context.Context, db *dbutil.Database) error {
				_, err := db.Exec(ctx, "CREATE TABLE probe_v"+string(rune('1'+i))+" (x INTEGER)")
				return err
			})
		}
		return wip.Finish()
	}
	var standbyLog capturedLog
	active, err := OpenDatabase(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer active.Close()
	if err := active.Child("probe_version", table(1), nil).Upgrade(context.Background()); err != nil {
		t.Fatal(err)
	}
	standby, err := OpenDatabase(standbyLog.ctx(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer standby.Close()

	// The schema the active one made: nothing to do, no wait.
	if err := standby.Child("probe_version", table(1), nil).Upgrade(standbyLog.ctx()); err != nil {
		t.Fatal(err)
	}
	if !standby.Standby() {
		t.Fatal("an up-to-date schema made the standby take over")
	}

	// A newer schema waits.
	upgraded := make(chan error, 1)
	go func() { upgraded <- standby.Child("probe_version", table(2), nil).Upgrade(standbyLog.ctx()) }()
	testkit.Eventually(t, 10*time.Second, "the standby says the upgrade waits", func() bool {
		return standbyLog.count("standby: the database schema needs an upgrade") > 0
	})
	if exists, err := active.TableExists(context.Background(), "probe_v2"); err != nil || exists {
		t.Fatalf("the standby migrated the schema under the active one (exists %v, %v)", exists, err)
	}
	if err := active.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-upgraded:
		if err != nil {
			t.Fatalf("the upgrade after the take-over: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the upgrade did not run within 10s of the take-over")
	}
	if exists, err := standby.TableExists(context.Background(), "probe_v2"); err != nil || !exists {
		t.Errorf("after the take-over the migration did not run (exists %v, %v)", exists, err)
	}
	if standby.Standby() {
		t.Error("Standby() after the migration waited for the lock")
	}
}
