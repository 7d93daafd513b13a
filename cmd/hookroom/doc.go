// Command hookroom runs the hookroom Matrix agent server and manages its
// configuration and plugins.
//
//	hookroom init   --homeserver URL  write config.yaml and hookroom.env for a homeserver
//	hookroom run    --config FILE     run the server (reloads config.yaml and plugins on change)
//	hookroom check  --config FILE     validate the configuration and the plugins
//	hookroom hooks  --config FILE     list every hook with its effective settings (--json)
//	hookroom tools  --config FILE     list each agent's effective tools (--json)
//	hookroom plugin install|update|remove|list
//	                                  install and manage plugins (package plugins/installer)
//	hookroom version                  print the build (package internal/buildinfo)
//
// The command line lives here, the server in package bot: main calls run,
// which parses the command, hardens the process (harden_linux.go), loads
// config.yaml and hands it to bot.New. hookroom init is init.go, the plugin
// commands plugin.go. The binary includes the built-in plugins of
// plugins/builtin. See README.md and docs/ for configuration, hooks and
// operations.
package main
