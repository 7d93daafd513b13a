// Package restart decides when a supervised process is started again after
// a crash: exponential back-off between restarts, and a crash-loop limit
// after which the process stays down. Process plugins (plugins/process)
// and MCP stdio servers (mcp) share it, so both behave — and are
// configured — the same way. It keeps no goroutines or timers: the
// supervisor records crashes and schedules the restart itself.
package restart
