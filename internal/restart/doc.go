// Package restart supervises a process that is started again after a
// crash: exponential back-off between restarts, and a crash-loop limit
// after which the process stays down. Process plugins (plugins/process)
// and MCP stdio servers (mcp) share it, so both behave — are configured,
// fail and log — the same way.
//
// Tracker only decides (it keeps no goroutines or timers); Supervisor keeps
// the instance in service, watches its exit, schedules the restart and
// says why calls fail meanwhile.
package restart
