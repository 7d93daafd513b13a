//go:build !unix

package procgroup

import (
	"errors"
	"os"
	"os/exec"
)

// The signals that ask a child to stop and that stop it.
var (
	Term os.Signal = os.Interrupt
	Kill os.Signal = os.Kill
)

// Set does nothing here: there are no process groups.
func Set(*exec.Cmd) {}

// Signal is not supported here; callers signal the process itself.
func Signal(int, os.Signal) error { return errors.ErrUnsupported }
