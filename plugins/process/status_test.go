package process_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins/process"
)

// Status is one snapshot, also while the plugin crashes and restarts in a
// loop: running with a pid, or another state without one.
func TestStatusIsOneSnapshot(t *testing.T) {
	ctx, _ := testContext(t)
	spec := fakeSpec(t, "crash")
	spec.Supervision.CrashLimit = 10000
	spec.Supervision.RestartDelay = time.Microsecond
	spec.Supervision.MaxRestartDelay = time.Microsecond
	p, err := process.Start(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	reg := registry(t, p, nil)
	var bad atomic.Int64
	var sample atomic.Value
	stop := make(chan struct{})
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				st := p.Status()
				if (st.State == process.StateRunning) != (st.PID != 0) {
					bad.Add(1)
					sample.Store(st)
				}
			}
		}()
	}
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) && bad.Load() == 0 {
		c := hooktest.BeforeResponse("x")
		_ = hooks.Emit(ctx, reg, hooks.MessageBeforeResponse, c)
	}
	close(stop)
	if n := bad.Load(); n > 0 {
		t.Errorf("%d inconsistent Status snapshots, e.g. %+v", n, sample.Load())
	}
}
