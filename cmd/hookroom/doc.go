// Command hookroom runs the hookroom Matrix agent server.
//
//	hookroom run    --config FILE   run the server (reloads config.yaml and plugins on change)
//	hookroom check  --config FILE   validate the configuration and the plugins
//	hookroom hooks  --config FILE   list every hook with its effective settings (--json)
//	hookroom version
//
// The binary includes the built-in plugins of plugins/builtin. See README.md
// and docs/ for configuration, hooks and operations.
package main
