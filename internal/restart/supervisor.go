package restart

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// State is where a supervised process stands.
type State uint8

const (
	// Down: nothing in service and no restart scheduled (not started yet,
	// a process that may not restart exited, or a dropped session).
	Down State = iota
	// Running: an instance is in service.
	Running
	// Restarting: it crashed; a restart is scheduled.
	Restarting
	// Disabled: it crashed too often and stays down.
	Disabled
	// Closed: Close was called.
	Closed
)

// Healthy reports whether st is running, or restarting after a crash: the
// process serves, or will again without anyone's help.
func (st State) Healthy() bool { return st == Running || st == Restarting }

// Instance is what a Supervisor keeps in service: one run of the process
// (or a session that cannot end by itself).
type Instance interface {
	comparable
	// Exited is closed once the instance ended; nil when it cannot end by
	// itself.
	Exited() <-chan struct{}
	// ExitDescription says how it ended, completing "restarting after it
	// …" ("exited with status 1; last stderr: …").
	ExitDescription() string
}

// Starter starts and stops a Supervisor's instances. The supervisor calls
// it without its lock held.
type Starter[T Instance] interface {
	// Restart starts a new instance after a crash, from the restart's
	// goroutine; ctx carries the supervisor's logger. On error nothing of
	// the attempt may keep running.
	Restart(ctx context.Context) (T, error)
	// Restarted is called once a restarted instance is in service; it may
	// log so.
	Restarted(inst T)
	// Stop ends inst and returns once it ended. Close calls it for the
	// instance in service, and a restart that finished after Close for its
	// new instance.
	Stop(inst T)
}

// Errors are the errors calls on a supervised kind of process fail with;
// packages export them as their sentinels (check with errors.Is).
type Errors struct {
	// Unavailable: nothing is in service right now (it crashed and waits
	// for its restart, or did not start).
	Unavailable error
	// Disabled: it crashed too often and stays down. Wraps Unavailable.
	Disabled error
	// Closed: Close was called.
	Closed error
	// Exited: the process exited during a call. The Supervisor does not
	// return it; the call's owner does.
	Exited error
}

// NewErrors returns the errors of kind ("process plugin"): "KIND
// unavailable", "KIND unavailable: disabled after crashing repeatedly",
// "KIND closed" and "KIND exited". Call it once per kind, for package
// variables.
func NewErrors(kind string) Errors {
	unavailable := errors.New(kind + " unavailable")
	return Errors{
		Unavailable: unavailable,
		Disabled:    fmt.Errorf("%w: disabled after crashing repeatedly", unavailable),
		Closed:      errors.New(kind + " closed"),
		Exited:      errors.New(kind + " exited"),
	}
}

// Config describes a supervised process.
type Config struct {
	// Kind and Name name it in messages: `process plugin "geo"`.
	Kind string
	Name string
	// Serves says what fails while it is disabled: "its hooks and tools".
	Serves string
	// Policy is the back-off and crash-loop limit (zero fields: defaults).
	Policy Policy
	// NoRestart leaves it down after a crash.
	NoRestart bool
	// Errors are what calls fail with (see NewErrors).
	Errors Errors
	// Log receives the crash, disable and stop messages.
	Log zerolog.Logger
}

// Supervisor keeps at most one instance of a process in service and starts
// a new one with back-off after it exits, until it crashed too often. All
// methods are safe for concurrent use.
type Supervisor[T Instance] struct {
	cfg     Config
	starter Starter[T]

	mu          sync.Mutex
	cur         T
	released    chan struct{} // closed when cur leaves service other than by exiting
	state       State
	unavailable error // why calls fail while nothing is in service
	crashes     Tracker
	timer       *time.Timer
	restarts    int
	wg          sync.WaitGroup // exit watchers and the restart
}

// NewSupervisor returns a supervisor, Down, of the instances starter
// starts.
func NewSupervisor[T Instance](cfg Config, starter Starter[T]) *Supervisor[T] {
	cfg.Policy = cfg.Policy.WithDefaults()
	return &Supervisor[T]{cfg: cfg, starter: starter, crashes: Tracker{Policy: cfg.Policy}}
}

func (s *Supervisor[T]) subject() string { return fmt.Sprintf("%s %q", s.cfg.Kind, s.cfg.Name) }

// Current returns the instance in service, or why there is none: the
// reason of the last crash, ErrDisabled's or ErrClosed's error.
func (s *Supervisor[T]) Current() (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	switch {
	case s.cur != zero:
		return s.cur, nil
	case s.unavailable != nil:
		return zero, s.unavailable
	}
	return zero, fmt.Errorf("%s: %w", s.subject(), s.cfg.Errors.Unavailable)
}

// State returns where the process stands.
func (s *Supervisor[T]) State() State {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state
}

// Snapshot returns where the process stands, how many restarts after a
// crash put an instance in service, and the instance in service (the zero
// T when none), all read at one moment: a status report made of separate
// reads (State, Current) could mix two.
func (s *Supervisor[T]) Snapshot() (State, int, T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state, s.restarts, s.cur
}

// Serve puts a started inst in service and watches its exit, which counts
// as a crash. After Close it stops inst instead and returns the Closed
// error. Only one instance is in service at a time: while one is, Serve
// stops inst and returns an error (a caller's mistake).
func (s *Supervisor[T]) Serve(inst T) error {
	s.mu.Lock()
	var zero T
	if s.state == Closed || s.cur != zero {
		err := s.unavailable
		if s.cur != zero {
			err = fmt.Errorf("%s: failed to serve a second instance: one is in service", s.subject())
		}
		s.mu.Unlock()
		s.starter.Stop(inst)
		return err
	}
	s.serveLocked(inst)
	s.mu.Unlock()
	return nil
}

func (s *Supervisor[T]) serveLocked(inst T) {
	s.cur = inst
	s.state = Running
	s.unavailable = nil
	if exited := inst.Exited(); exited != nil {
		released := make(chan struct{})
		s.released = released
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			select {
			case <-exited:
			case <-released:
				return
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.cur != inst || s.state == Closed {
				return
			}
			s.releaseLocked()
			s.crashedLocked(inst.ExitDescription())
		}()
	}
}

// Failed records a start that failed for why ("failed to start …") as a
// crash: a restart is scheduled, or the process disabled. After Close it
// returns the Closed error.
func (s *Supervisor[T]) Failed(why string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state == Closed {
		return s.unavailable
	}
	s.crashedLocked(why)
	return nil
}

// Drop takes inst out of service without counting a crash (a session the
// server forgot), leaving the process Down; it reports whether inst was in
// service. The caller ends inst.
func (s *Supervisor[T]) Drop(inst T) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	var zero T
	if inst == zero || s.cur != inst {
		return false
	}
	s.releaseLocked()
	s.state = Down
	s.unavailable = nil
	return true
}

// releaseLocked takes the instance out of service and ends its exit
// watcher.
func (s *Supervisor[T]) releaseLocked() {
	var zero T
	s.cur = zero
	if s.released != nil {
		close(s.released)
		s.released = nil
	}
}

// crashedLocked records a crash and schedules a restart, or disables the
// process.
func (s *Supervisor[T]) crashedLocked(why string) {
	if s.cfg.NoRestart {
		s.state = Down
		s.unavailable = fmt.Errorf("%s: %w: %s", s.subject(), s.cfg.Errors.Unavailable, why)
		return
	}
	d := s.crashes.Crash(time.Now())
	window := s.cfg.Policy.Window
	if d.Disable {
		s.state = Disabled
		s.unavailable = fmt.Errorf("%s: %w (%d crashes within %v; last: %s)", s.subject(), s.cfg.Errors.Disabled, d.Recent, window, why)
		s.cfg.Log.Error().Int("crashes", d.Recent).Dur("window", window).Str("last_crash", why).
			Msgf("%s disabled: it crashed %d times within %v; %s fail until the next reload", s.subject(), d.Recent, window, s.cfg.Serves)
		return
	}
	s.state = Restarting
	s.unavailable = fmt.Errorf("%s: %w: restarting after it %s", s.subject(), s.cfg.Errors.Unavailable, why)
	s.cfg.Log.Warn().Str("reason", why).Int("recent_crashes", d.Recent).Dur("restart_in", d.Delay).
		Msgf("%s crashed; restarting it", s.subject())
	s.wg.Add(1)
	s.timer = time.AfterFunc(d.Delay, s.restart)
}

// restart runs when the back-off after a crash has passed.
func (s *Supervisor[T]) restart() {
	defer s.wg.Done()
	s.mu.Lock()
	s.timer = nil
	closed := s.state == Closed
	s.mu.Unlock()
	if closed {
		return
	}
	inst, err := s.starter.Restart(s.cfg.Log.WithContext(context.Background()))
	s.mu.Lock()
	if s.state == Closed {
		s.mu.Unlock()
		if err == nil {
			s.starter.Stop(inst)
		}
		return
	}
	if err != nil {
		s.crashedLocked(err.Error())
		s.mu.Unlock()
		return
	}
	if exited := inst.Exited(); exited != nil {
		select {
		case <-exited:
			s.crashedLocked(inst.ExitDescription())
			s.mu.Unlock()
			return
		default:
		}
	}
	s.serveLocked(inst)
	s.restarts++
	s.mu.Unlock()
	s.starter.Restarted(inst)
}

// Close takes the instance out of service and stops it, cancels a
// scheduled restart, and waits for the supervisor's goroutines; calls fail
// with the Closed error afterwards. It is idempotent.
func (s *Supervisor[T]) Close() {
	s.mu.Lock()
	if s.state == Closed {
		s.mu.Unlock()
		s.wg.Wait()
		return
	}
	s.state = Closed
	s.unavailable = fmt.Errorf("%s: %w", s.subject(), s.cfg.Errors.Closed)
	if s.timer != nil && s.timer.Stop() {
		s.wg.Done() // the restart will not run
	}
	var zero T
	inst := s.cur
	s.releaseLocked()
	s.mu.Unlock()
	if inst != zero {
		s.starter.Stop(inst)
	}
	s.wg.Wait()
	s.cfg.Log.Info().Msg(s.cfg.Kind + " stopped")
}
