package restart

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/internal/testkit"
)

var testErrs = NewErrors("test process")

// fakeInst is an instance that exits when its exit channel is closed.
type fakeInst struct {
	id   int
	exit chan struct{}
}

func (f *fakeInst) Exited() <-chan struct{} { return f.exit }
func (f *fakeInst) ExitDescription() string { return "exited with status 1" }
func (f *fakeInst) crash()                  { close(f.exit) }
func newFake(id int) *fakeInst              { return &fakeInst{id: id, exit: make(chan struct{})} }
func (f *fakeInst) stopped() bool {
	select {
	case <-f.exit:
		return true
	default:
		return false
	}
}

// fakeStarter starts fake instances, failing when fail is set.
type fakeStarter struct {
	mu        sync.Mutex
	n         int
	fail      bool
	restarted []*fakeInst
	stops     []*fakeInst
}

func (s *fakeStarter) Restart(context.Context) (*fakeInst, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return nil, errors.New("failed to start test process: no luck")
	}
	s.n++
	return newFake(s.n), nil
}

func (s *fakeStarter) Restarted(inst *fakeInst) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.restarted = append(s.restarted, inst)
}

func (s *fakeStarter) Stop(inst *fakeInst) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stops = append(s.stops, inst)
	inst.crash()
}

func newTestSupervisor(st *fakeStarter, logs *testkit.Buffer) *Supervisor[*fakeInst] {
	return NewSupervisor[*fakeInst](Config{
		Kind: "test process", Name: "t", Serves: "its work",
		Policy: Policy{Delay: time.Millisecond, MaxDelay: 5 * time.Millisecond, Limit: 3, Window: time.Minute},
		Errors: testErrs, Log: zerolog.New(logs),
	}, st)
}

func TestSupervisorRestartsThenDisables(t *testing.T) {
	var logs testkit.Buffer
	st := &fakeStarter{}
	s := newTestSupervisor(st, &logs)
	if _, err := s.Current(); !errors.Is(err, testErrs.Unavailable) || s.State() != Down {
		t.Fatalf("before Serve: %v, %v; want unavailable and Down", err, s.State())
	}
	first := newFake(0)
	if err := s.Serve(first); err != nil {
		t.Fatal(err)
	}
	first.crash()
	testkit.Eventually(t, 5*time.Second, "the restart", func() bool { _, n, _ := s.Snapshot(); return n == 1 })
	cur, err := s.Current()
	if err != nil || cur.id != 1 || s.State() != Running {
		t.Fatalf("after the restart: %v, %v, %v; want instance 1 running", cur, err, s.State())
	}
	if !logs.Contains(`test process \"t\" crashed; restarting it`) {
		t.Errorf("no crash warning:\n%s", logs.String())
	}
	st.mu.Lock()
	st.fail = true
	st.mu.Unlock()
	cur.crash()
	testkit.Eventually(t, 5*time.Second, "disabled", func() bool { return s.State() == Disabled })
	_, err = s.Current()
	if !errors.Is(err, testErrs.Disabled) || !errors.Is(err, testErrs.Unavailable) || !strings.Contains(err.Error(), "no luck") {
		t.Errorf("disabled: %v, want Disabled wrapping Unavailable with the last crash", err)
	}
	if !logs.Contains(`test process \"t\" disabled: it crashed 3 times within 1m0s; its work fail until the next reload`) {
		t.Errorf("no disable error:\n%s", logs.String())
	}
	s.Close()
	if _, err := s.Current(); !errors.Is(err, testErrs.Closed) {
		t.Errorf("after Close: %v, want Closed", err)
	}
}

func TestSupervisorClose(t *testing.T) {
	var logs testkit.Buffer
	st := &fakeStarter{}
	s := newTestSupervisor(st, &logs)
	inst := newFake(0)
	_ = s.Serve(inst)
	s.Close()
	s.Close() // idempotent
	if !inst.stopped() || len(st.stops) != 1 {
		t.Errorf("Close stopped %d instances, want the one in service", len(st.stops))
	}
	late := newFake(9)
	if err := s.Serve(late); !errors.Is(err, testErrs.Closed) || !late.stopped() {
		t.Errorf("Serve after Close = %v, want Closed and the instance stopped", err)
	}
	if err := s.Failed("whatever"); !errors.Is(err, testErrs.Closed) {
		t.Errorf("Failed after Close = %v, want Closed", err)
	}
	if n := len(logs.Lines("test process stopped")); n != 1 {
		t.Errorf("%d stop messages, want 1:\n%s", n, logs.String())
	}
}

func TestSupervisorNoRestartAndDrop(t *testing.T) {
	var logs testkit.Buffer
	s := NewSupervisor[*fakeInst](Config{Kind: "test process", Name: "t", NoRestart: true, Errors: testErrs, Log: zerolog.New(&logs)}, &fakeStarter{})
	defer s.Close()
	inst := newFake(0)
	_ = s.Serve(inst)
	if s.Drop(newFake(1)) || !s.Drop(inst) || s.State() != Down {
		t.Fatal("Drop took the wrong instance out of service")
	}
	if err := s.Failed("failed to start: nope"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Current(); !errors.Is(err, testErrs.Unavailable) || s.State() != Down || !strings.Contains(err.Error(), "nope") {
		t.Errorf("after a failure without restarts: %v, %v", err, s.State())
	}
}

// One instance is in service at a time: a second Serve stops the new
// instance and fails, the first stays in service, and Close stops it.
func TestSupervisorServeWhileServing(t *testing.T) {
	var logs testkit.Buffer
	st := &fakeStarter{}
	s := newTestSupervisor(st, &logs)
	first, second := newFake(1), newFake(2)
	if err := s.Serve(first); err != nil {
		t.Fatal(err)
	}
	if err := s.Serve(second); err == nil || !second.stopped() {
		t.Errorf("second Serve = %v, stopped %v; want an error and the second instance stopped", err, second.stopped())
	}
	state, restarts, cur := s.Snapshot()
	if state != Running || restarts != 0 || cur != first {
		t.Errorf("Snapshot = %v, %d, %v; want Running, 0, the first instance", state, restarts, cur)
	}
	done := make(chan struct{})
	go func() { s.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Close hangs")
	}
	if !first.stopped() {
		t.Error("Close left the first instance running")
	}
}
