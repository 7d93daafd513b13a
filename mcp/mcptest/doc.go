// Package mcptest helps tests run MCP tool servers: the reference
// filesystem server (@modelcontextprotocol/server-filesystem, a
// third-party server from npm, pinned by filesystem/package-lock.json and
// installed by scripts/test-clients.sh install-mcp) run with node, and a
// streamable-HTTP server written with the Go SDK, in process.
package mcptest
