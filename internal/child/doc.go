// Package child starts and stops the child processes hookroom supervises
// (process plugins, MCP stdio servers), so that both do it the same way: in
// a process group of their own (package procgroup), confined by their
// sandbox when they have one, with pipes for stdin and stdout, their stderr
// read line by line (cut at 4 KiB, masked, its last lines kept for crash
// reports) and their exit watched. Stopping closes stdin, then sends
// SIGTERM, then kills, each step bounded by a timeout.
//
// What a crash leads to (a restart with back-off, a disabled process) is
// package restart's concern.
package child
