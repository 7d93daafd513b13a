//go:build unix

package mcp

import (
	"os"
	"os/exec"
	"syscall"
)

var (
	sigTerm os.Signal = syscall.SIGTERM
	sigKill os.Signal = syscall.SIGKILL
)

// setProcessGroup puts the server in a process group of its own, so that
// stopping it also stops what it started (a shell script's children).
func setProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// signalGroup signals the process group led by pid.
func signalGroup(pid int, sig os.Signal) error {
	return syscall.Kill(-pid, sig.(syscall.Signal))
}
