package testkit

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestBufferIsSafeForConcurrentWriters(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				fmt.Fprintf(&b, "w%d-%d\n", i, j)
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if !b.Contains("w7-99\n") || len(b.String()) < 8*100*5 {
		t.Errorf("buffer lost writes: %d bytes", len(b.String()))
	}
}

func TestEventually(t *testing.T) {
	start := time.Now()
	Eventually(t, 5*time.Second, "the clock moved on", func() bool { return time.Since(start) > 3*Poll })

	// A condition that never holds fails the test, naming what it waited for.
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		Eventually(ft, 2*Poll, "pigs fly", func() bool { return false })
	}()
	if want := "timed out after 40ms: waiting until pigs fly"; ft.msg != want {
		t.Errorf("failure %q, want %q", ft.msg, want)
	}
}

func TestUntil(t *testing.T) {
	n := 0
	Until(t, 5*time.Second, func() (bool, string) { n++; return n == 3, fmt.Sprintf("%d checks", n) })
	if n != 3 {
		t.Errorf("cond called %d times, want 3 (until done)", n)
	}

	// A condition that never holds fails the test with its last status.
	ft := &fakeT{TB: t}
	n = 0
	func() {
		defer func() { _ = recover() }()
		Until(ft, 2*Poll, func() (bool, string) { n++; return false, fmt.Sprintf("%d checks", n) })
	}()
	if want := fmt.Sprintf("timed out after 40ms: %d checks", n); ft.msg != want || n < 2 {
		t.Errorf("failure %q after %d checks, want %q", ft.msg, n, want)
	}
}

// fakeT records a Fatalf and stops the caller as Fatalf does.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic("fatal")
}
