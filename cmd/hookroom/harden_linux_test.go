//go:build linux

package main

import (
	"testing"

	"golang.org/x/sys/unix"
)

// After hardenProcess the kernel reports the process as not dumpable, which
// is what keeps other processes of the same user out of /proc/<pid>/environ
// and /proc/<pid>/mem.
func TestHardenProcessMakesItNonDumpable(t *testing.T) {
	if err := hardenProcess(); err != nil {
		t.Fatal(err)
	}
	got, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got != 0 {
		t.Errorf("PR_GET_DUMPABLE = %d, want 0", got)
	}
}
