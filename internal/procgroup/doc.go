// Package procgroup starts child processes (process plugins, MCP servers) in
// a process group of their own and signals that group, so stopping a child
// also stops what it started (a shell script's children, npx's node).
//
// On systems without process groups Set does nothing and Signal reports
// errors.ErrUnsupported; callers then signal the process itself.
package procgroup
