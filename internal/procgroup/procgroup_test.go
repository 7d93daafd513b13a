//go:build unix

package procgroup

import (
	"errors"
	"fmt"
	"github.com/hookroom/hookroom/internal/testkit"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestSignalStopsTheGroup(t *testing.T) {
	// A shell that starts a grandchild: signalling the group stops both.
	cmd := exec.Command("sh", "-c", "sleep 30 & echo $!; wait")
	Set(cmd)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var grandchild int
	buf := make([]byte, 32)
	n, _ := out.Read(buf)
	for _, c := range buf[:n] {
		if c >= '0' && c <= '9' {
			grandchild = grandchild*10 + int(c-'0')
		}
	}
	if err := Signal(cmd.Process.Pid, Kill); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	testkit.Eventually(t, 5*time.Second, fmt.Sprintf("grandchild %d is gone with its group", grandchild), func() bool {
		return syscall.Kill(grandchild, 0) != nil
	})
}

func TestSignalRefusesNonChildPids(t *testing.T) {
	for _, pid := range []int{0, -1} {
		if err := Signal(pid, Term); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("Signal(%d) = %v, want ESRCH (kill(2) would reach our own group)", pid, err)
		}
	}
}
