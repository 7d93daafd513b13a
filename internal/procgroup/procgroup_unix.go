//go:build unix

package procgroup

import (
	"os"
	"os/exec"
	"syscall"
)

// The signals that ask a child to stop and that stop it.
var (
	Term os.Signal = syscall.SIGTERM
	Kill os.Signal = syscall.SIGKILL
)

// Set makes cmd start in a process group of its own. Call it before
// cmd.Start.
func Set(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// Signal signals the process group led by pid (a child started with Set).
// A pid of 0 or less is refused with syscall.ESRCH: kill(2) would read it
// as the caller's own process group, or every process it may signal.
func Signal(pid int, sig os.Signal) error {
	if pid <= 0 {
		return syscall.ESRCH
	}
	return syscall.Kill(-pid, sig.(syscall.Signal))
}
