// Package protocol defines hookroom's process-plugin protocol on top of
// JSON-RPC 2.0 (package jsonrpc): the method names, their params and
// results, the error codes, the API version, and which fields of each
// event's context a plugin may change (Apply on the host side, Result on
// the plugin side). docs/plugin-protocol.md describes the same protocol for
// authors in any language.
package protocol
