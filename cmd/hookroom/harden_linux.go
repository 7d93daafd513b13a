//go:build linux

package main

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// hardenProcess makes the server non-dumpable, so that processes of the
// same user — process plugins among them — cannot read its memory or
// /proc/<pid>/environ (where the secrets config.yaml takes from ${VAR}
// live) and it leaves no core dump. run calls it before loading the
// configuration. Children start dumpable again: the flag is reset on exec.
func hardenProcess() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("failed to make the process non-dumpable: %w", err)
	}
	return nil
}
