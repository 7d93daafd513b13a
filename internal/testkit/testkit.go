package testkit

import (
	"bytes"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Buffer collects what is written to it (a zerolog logger's output, a
// process's stderr) and is safe for concurrent writers and readers. The
// zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Contains reports whether s was written.
func (b *Buffer) Contains(s string) bool { return strings.Contains(b.String(), s) }

// Poll is how often Eventually checks its condition.
const Poll = 20 * time.Millisecond

// Eventually waits until cond holds, checking it every Poll, and fails the
// test with "timed out after TIMEOUT: waiting until WHAT" when it does not
// within timeout.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Until(t, timeout, func() (bool, string) { return cond(), "waiting until " + what })
}

// Until waits until cond reports done, checking it every Poll, and fails
// the test with "timed out after TIMEOUT: STATUS", the status cond gave
// last, when it is not done within timeout. It is Eventually for a wait
// whose failure is worth explaining with what was seen (how many of the
// expected events arrived, the last error).
func Until(t testing.TB, timeout time.Duration, cond func() (done bool, status string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, status := cond()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v: %s", timeout, status)
		}
		time.Sleep(Poll)
	}
}

// Lines returns the lines written so far that contain s.
func (b *Buffer) Lines(s string) []string {
	var out []string
	for line := range strings.Lines(b.String()) {
		if strings.Contains(line, s) {
			out = append(out, strings.TrimSuffix(line, "\n"))
		}
	}
	return out
}

// WaitFor waits until s was written, failing the test when it is not
// within timeout.
func (b *Buffer) WaitFor(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, "the log contains "+strconv.Quote(s), func() bool { return b.Contains(s) })
}
