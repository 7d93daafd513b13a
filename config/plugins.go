package config

import (
	"reflect"
	"time"

	"gopkg.in/yaml.v3"
)

// PluginEntry is one item of the plugins list. It is written in one of three forms:
//
//	plugins:
//	  - ./plugins/audit                  # a path (process plugin directory)
//	  - path: ./plugins/weather          # a path with settings and hook overrides
//	    settings: {api_key: ${OPENWEATHER_API_KEY}}
//	    hooks: {enrich_weather: {priority: 10}}
//	  - builtin: echo_guard              # a compiled-in plugin, by registered name
//	    enabled: false
//
// Exactly one of Path and Builtin is set.
type PluginEntry struct {
	// Path is the plugin directory as written; relative to the config
	// directory. See AbsPath.
	Path string `yaml:"path,omitempty"`
	// Builtin is the registered name of a compiled-in plugin.
	Builtin string `yaml:"builtin,omitempty"`
	// Enabled turns the whole plugin off when false. nil means enabled.
	Enabled *bool `yaml:"enabled,omitempty"`
	// Settings are passed to the plugin as-is (after ${VAR} substitution).
	Settings map[string]any `yaml:"settings,omitempty"`
	// Hooks overrides the plugin's own declaration of individual hooks, by hook name.
	Hooks map[string]HookOverride `yaml:"hooks,omitempty"`
	// Env names the environment variables a process plugin may receive
	// (when its manifest asks for them). Nothing else of the server's
	// environment reaches the plugin.
	Env []string `yaml:"env,omitempty"`
	// Sandbox confines a process plugin's files (Linux, Landlock).
	Sandbox PluginSandbox `yaml:"sandbox,omitempty"`

	// AbsPath is Path resolved against the config directory (set by
	// ApplyDefaults; "" for built-ins).
	AbsPath string `yaml:"-"`
}

// PluginSandbox confines a process plugin on Linux kernels with Landlock:
// it may read and execute the system's programs and libraries, its own
// directory and the installation of its program (a bin/ or shims/
// directory's parent), read and write its state directory, use /dev — and
// reach nothing else on the file system: not hookroom's database,
// configuration or credentials, not other plugins' state, not /proc or
// /tmp (TMPDIR points into its state directory). The zero value is the
// default: confined where the kernel supports it.
type PluginSandbox struct {
	// Enabled turns the sandbox off when false. nil means on.
	Enabled *bool `yaml:"enabled,omitempty"`
	// ReadOnly adds paths the plugin may read and execute (relative to
	// the config directory), e.g. a runtime installed elsewhere or /proc.
	ReadOnly []string `yaml:"read_only,omitempty"`
	// ReadWrite adds paths the plugin may also write.
	ReadWrite []string `yaml:"read_write,omitempty"`
}

// IsEnabled reports whether the sandbox is on (Enabled nil or true).
func (s PluginSandbox) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// IsEnabled reports whether the plugin is enabled (Enabled nil or true).
func (p PluginEntry) IsEnabled() bool { return p.Enabled == nil || *p.Enabled }

// Identity names the plugin entry for comparisons across configurations:
// "builtin:<name>" for a built-in, otherwise the resolved path (AbsPath, or
// Path when it has not been resolved).
func (p PluginEntry) Identity() string {
	switch {
	case p.Builtin != "":
		return "builtin:" + p.Builtin
	case p.AbsPath != "":
		return p.AbsPath
	default:
		return p.Path
	}
}

// FailurePolicy says what a gate hook's failure (error, panic, timeout) means.
type FailurePolicy string

// The failure policies.
const (
	// FailOpen ignores the failed hook (the default for gates).
	FailOpen FailurePolicy = "open"
	// FailClosed turns the failure into a decline saying the gate was unavailable.
	FailClosed FailurePolicy = "closed"
)

// HookOverride changes one hook of a plugin. Every field is optional: nil
// keeps what the plugin declared (or the engine's default).
type HookOverride struct {
	// Enabled false leaves the hook unregistered.
	Enabled *bool `yaml:"enabled,omitempty"`
	// Priority replaces the declared priority (lower runs first; any integer).
	Priority *int `yaml:"priority,omitempty"`
	// TimeoutMS replaces the declared timeout, in milliseconds (> 0).
	TimeoutMS *int `yaml:"timeout_ms,omitempty"`
	// FailurePolicy replaces the hook's failure policy ("open" or "closed").
	FailurePolicy *FailurePolicy `yaml:"failure_policy,omitempty"`
}

// Timeout returns the overridden timeout, if any.
func (h HookOverride) Timeout() (time.Duration, bool) {
	if h.TimeoutMS == nil {
		return 0, false
	}
	return time.Duration(*h.TimeoutMS) * time.Millisecond, true
}

// pluginEntryFields has PluginEntry's fields without its methods, so that
// the mapping form decodes field by field.
type pluginEntryFields PluginEntry

var (
	_ nodeDecoder      = (*PluginEntry)(nil)
	_ yaml.Unmarshaler = (*PluginEntry)(nil)
	_ yaml.Marshaler   = PluginEntry{}
)

func (p *PluginEntry) decodeNode(d *decoder, n *yaml.Node, path string) {
	switch {
	case isNull(n):
		d.errorf(n, path, "empty plugin entry: want a path, or a mapping with path or builtin")
	case n.Kind == yaml.ScalarNode:
		*p = PluginEntry{Path: n.Value}
	case n.Kind == yaml.MappingNode:
		var f pluginEntryFields
		d.decode(n, reflect.ValueOf(&f).Elem(), path)
		*p = PluginEntry(f)
	default:
		d.typeError(n, path, "a plugin path or a mapping")
	}
}

// UnmarshalYAML decodes either form of a plugin entry when PluginEntry is
// used with yaml.v3 directly. It is strict like Parse but does not
// substitute ${VAR} references: only Parse and Load do.
func (p *PluginEntry) UnmarshalYAML(n *yaml.Node) error {
	d := newDecoder("")
	p.decodeNode(d, n, "")
	return d.errs.asError()
}

// MarshalYAML writes the short (path string) form when the entry has only a
// path, and the mapping form otherwise.
func (p PluginEntry) MarshalYAML() (any, error) {
	if p.Builtin == "" && p.Enabled == nil && p.Settings == nil && p.Hooks == nil && p.Env == nil {
		return p.Path, nil
	}
	return pluginEntryFields(p), nil
}
