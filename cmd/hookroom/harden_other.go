//go:build !linux

package main

// hardenProcess does nothing outside Linux, which has no PR_SET_DUMPABLE.
func hardenProcess() error { return nil }
