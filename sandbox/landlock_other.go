//go:build !linux

package sandbox

import (
	"fmt"
	"os/exec"
)

// Available reports the kernel's Landlock ABI version: always 0 here.
func Available() int { return 0 }

// Start reports ErrUnsupported: Landlock exists on Linux only.
func (p Policy) Start(cmd *exec.Cmd) error {
	return fmt.Errorf("failed to confine %s: %w", cmd.Path, ErrUnsupported)
}
