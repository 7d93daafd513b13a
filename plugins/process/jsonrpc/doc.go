// Package jsonrpc is a small JSON-RPC 2.0 implementation over a byte stream
// carrying one JSON object per line, as hookroom's process plugins speak it
// on their stdin and stdout. Both ends of a Conn may call and notify each
// other concurrently; $/cancel notifications cancel requests in flight;
// lines are bounded in size and garbage is logged and skipped, so a
// misbehaving peer can slow nothing but its own calls.
package jsonrpc
