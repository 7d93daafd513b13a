// Package plugins loads the plugins named in config.yaml: manifests, the
// registry of built-in Go plugins, process plugins spoken to over JSON-RPC 2.0
// on stdin/stdout and their supervisor, and hot reload of plugin code.
package plugins
