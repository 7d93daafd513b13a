// Package process runs hookroom's process plugins: programs in any language
// that speak JSON-RPC 2.0 on their stdin and stdout, one JSON object per
// line (package protocol; docs/plugin-protocol.md). Start launches the
// program with exactly the environment it is given, in its state
// directory, performs the initialize handshake and turns the declared hooks
// into hooks.Hook values (hooks.HandleAny) that invoke the process within
// their deadlines; CallTool runs declared tools. While a hook or tool runs,
// the plugin may call back into the host (send a message, room state, emit
// a custom event, log) through the hook's context helpers.
//
// The Plugin supervises its process: stderr goes to the server log under
// the plugin's name (line by line, rate limited); a crash fails the calls
// in flight at once and restarts the process with exponential back-off; a
// process that stops answering is killed; one that keeps crashing is
// disabled until the next reload. Close stops it politely, then with
// SIGTERM, then SIGKILL, and leaves no process or goroutine behind.
package process
