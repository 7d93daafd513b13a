//go:build !unix

package mcp

import (
	"errors"
	"os"
	"os/exec"
)

var (
	sigTerm os.Signal = os.Interrupt
	sigKill os.Signal = os.Kill
)

func setProcessGroup(*exec.Cmd) {}

// signalGroup is not supported here; callers fall back to signalling the
// process itself.
func signalGroup(int, os.Signal) error { return errors.ErrUnsupported }
