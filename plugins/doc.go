// Package plugins loads the plugins named in config.yaml and turns them into
// the hooks and tools the rest of hookroom uses.
//
// # Tiers
//
// A plugin is an Instance, whatever runs it:
//
//   - built-in Go plugins, compiled in and registered by name from init
//     with RegisterBuiltin (Caddy-style; plugins/builtin/all imports the
//     ones that ship with hookroom: audit_log, context_info, tool_guard, memory, knowledge);
//   - process plugins, any language: a directory whose manifest names a
//     command; the plugins/process supervisor runs it and speaks JSON-RPC
//     over its stdin/stdout (docs/plugin-protocol.md).
//
// An Instance offers hooks; it may also offer tools (ToolProvider), hold
// resources (io.Closer) and report that it stopped working
// (HealthReporter).
//
// # Configuration
//
// Each entry of config.yaml's plugins list is a plugin directory (holding
// hookroom-plugin.json, see Manifest) or a "builtin:" entry, with optional
// settings, per-hook overrides and enabled: false. A directory's manifest
// either names a command (a process plugin) or a built-in (a directory
// that configures a built-in under its own name). Each plugin's state
// directory is <data_dir>/plugins/<name>/.
//
// # Loading and reloading
//
// Load (or Loader.Load) builds a Set from a *config.Config: it resolves the
// enabled entries in order, starts what is new or changed, reuses what is
// unchanged from the previous set, and checks that a hook registry can be
// built. Every problem comes back at once as a config.ErrorList pointing at
// config.yaml's lines:
//
//	config.yaml:14: plugins[2]: plugin directory /srv/hookroom/plugins/geo does not exist
//	config.yaml:21: plugins[3].settings.rules[1].tool: invalid glob "x[": syntax error in pattern
//
// A reload is: next, err := loader.Load(ctx, cfg, cur); on error keep cur;
// otherwise reg, _ := next.Registry(opts), swap reg into the live registry,
// emit config:reloaded with next.Changes(cur), then cur.Close() (which
// stops only the instances next does not use). Set.Warnings lists the
// problems that do not stop loading (an override naming no hook, an
// allowlist naming no loaded plugin, an environment variable a manifest
// asks for but config.yaml does not allow), each with file:line.
//
// Process plugins get a minimal environment: PATH, LANG, HOME set to their
// state directory (also their working directory), and the variables their
// manifest asks for that Loader.AllowEnv allows — never one holding a
// value of the server's own secrets.
package plugins
