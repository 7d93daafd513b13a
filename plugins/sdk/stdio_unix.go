//go:build unix

package sdk

import (
	"os"
	"syscall"
)

// stdin returns the process's stdin as a pollable file: reading a blocking
// stdin pins a thread in read(2), and every goroutine it readies then waits
// for the scheduler to take its processor back (tens of microseconds per
// hook call); a non-blocking descriptor goes through the runtime's poller
// instead.
func stdin() *os.File {
	if err := syscall.SetNonblock(0, true); err != nil {
		return os.Stdin
	}
	return os.NewFile(0, "/dev/stdin")
}
