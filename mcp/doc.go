// Package mcp connects hookroom to MCP (Model Context Protocol) tool
// servers, through the official Go SDK (github.com/modelcontextprotocol/go-sdk).
//
// A Server is one entry of config.yaml's mcp_servers: a stdio server
// (a program hookroom starts, confined by the plugin sandbox where the
// kernel has Landlock, and supervises: a crash restarts it with back-off,
// a crash loop disables it until the next reload — internal/restart, as
// for process plugins) or a streamable-HTTP server (a URL; a call that
// fails at the transport drops the session and the next call connects
// again). A Server lists its tools at start, again after a restart and
// whenever the server sends notifications/tools/list_changed, and calls
// them with a per-call timeout, mapping the result's content to the text
// the model sees (isError results become errors).
//
// A Set is the servers of one configuration. Load builds it from the
// previous one: unchanged servers are carried over running, added ones
// started, changed ones restarted and removed ones stopped when the
// previous set is closed. The bot exposes the tools as agent tools named
// mcp:SERVER/TOOL; they pass tool:before_call and tool:after_call like any
// other tool, since the agents' tool loop runs every call through them.
//
// mcp/mcptest has test helpers: the reference filesystem server from npm,
// and an in-process streamable-HTTP server written with the SDK.
package mcp
