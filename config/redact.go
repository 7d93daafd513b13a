package config

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
	"maunium.net/go/mautrix/id"
)

var (
	_ yaml.Marshaler = (*Config)(nil)
	_ json.Marshaler = (*Config)(nil)
)

// Clone returns a deep copy of the configuration.
func (c *Config) Clone() *Config {
	n := *c
	n.Matrix.BotAccounts = slices.Clone(c.Matrix.BotAccounts)
	if c.Agents != nil {
		n.Agents = make(map[string]Agent, len(c.Agents))
		for k, a := range c.Agents {
			a.Rooms = slices.Clone(a.Rooms)
			a.Tools = slices.Clone(a.Tools)
			a.Plugins = slices.Clone(a.Plugins)
			n.Agents[k] = a
		}
	}
	n.Rooms = maps.Clone(c.Rooms)
	n.Models = maps.Clone(c.Models)
	n.Authorization.GlobalUsers = slices.Clone(c.Authorization.GlobalUsers)
	n.Authorization.InviteUsers = slices.Clone(c.Authorization.InviteUsers)
	if c.Authorization.RoomPermissions != nil {
		n.Authorization.RoomPermissions = make(map[string][]id.UserID, len(c.Authorization.RoomPermissions))
		for k, v := range c.Authorization.RoomPermissions {
			n.Authorization.RoomPermissions[k] = slices.Clone(v)
		}
	}
	n.Defaults.Streaming = clonePtr(c.Defaults.Streaming)
	n.Traces.Enabled = clonePtr(c.Traces.Enabled)
	if c.Plugins != nil {
		n.Plugins = make([]PluginEntry, len(c.Plugins))
		for i, p := range c.Plugins {
			n.Plugins[i] = p.clone()
		}
	}
	if c.MCPServers != nil {
		n.MCPServers = make(map[string]MCPServer, len(c.MCPServers))
		for k, m := range c.MCPServers {
			n.MCPServers[k] = m.clone()
		}
	}
	n.lines = maps.Clone(c.lines)
	n.fromEnv = maps.Clone(c.fromEnv)
	n.envValues = maps.Clone(c.envValues)
	return &n
}

func (p PluginEntry) clone() PluginEntry {
	p.Enabled = clonePtr(p.Enabled)
	if p.Settings != nil {
		p.Settings = cloneAny(p.Settings).(map[string]any)
	}
	if p.Hooks != nil {
		hooks := make(map[string]HookOverride, len(p.Hooks))
		for k, h := range p.Hooks {
			hooks[k] = HookOverride{
				Enabled:       clonePtr(h.Enabled),
				Priority:      clonePtr(h.Priority),
				TimeoutMS:     clonePtr(h.TimeoutMS),
				FailurePolicy: clonePtr(h.FailurePolicy),
			}
		}
		p.Hooks = hooks
	}
	return p
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneAny(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, x := range v {
			m[k] = cloneAny(x)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, x := range v {
			s[i] = cloneAny(x)
		}
		return s
	default:
		return v
	}
}

// secretWords mark plugin settings keys whose values are masked by Redacted.
var secretWords = []string{"key", "token", "secret", "password", "passwd", "credential"}

func isSecretKey(k string) bool {
	k = strings.ToLower(k)
	for _, w := range secretWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// Redacted returns a deep copy that is safe to print or log. Secret fields
// mask themselves; plugin settings have no declared types, so Redacted masks
// the settings values whose key looks secret (contains key, token, secret,
// password, passwd or credential) and every settings value that came from a
// ${VAR} substitution.
func (c *Config) Redacted() *Config {
	n := c.Clone()
	n.envValues, n.masker = nil, nil // the values themselves
	for i := range n.Plugins {
		if s := n.Plugins[i].Settings; s != nil {
			n.redactSettings(s, JoinKey(JoinIndex("plugins", i), "settings"))
		}
	}
	n.redactMCP()
	return n
}

func (c *Config) redactSettings(v any, path string) any {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			kp := JoinKey(path, k)
			if isSecretKey(k) && val != nil {
				x[k] = redacted
				continue
			}
			x[k] = c.redactSettings(val, kp)
		}
		return x
	case []any:
		for i, val := range x {
			x[i] = c.redactSettings(val, JoinIndex(path, i))
		}
		return x
	default:
		if c.fromEnv[path] {
			return redacted
		}
		return v
	}
}

// configFields has Config's fields without its methods.
type configFields Config

// MarshalYAML writes the redacted configuration (see Redacted).
func (c *Config) MarshalYAML() (any, error) {
	return (*configFields)(c.Redacted()), nil
}

// MarshalJSON writes the redacted configuration with the YAML key names.
func (c *Config) MarshalJSON() ([]byte, error) {
	data, err := yaml.Marshal(c)
	if err != nil {
		return nil, err
	}
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// String returns the redacted configuration as YAML.
func (c *Config) String() string {
	data, err := yaml.Marshal(c)
	if err != nil {
		return "<config: " + err.Error() + ">"
	}
	return string(data)
}

// GoString (%#v) prints the redacted configuration.
func (c *Config) GoString() string {
	return fmt.Sprintf("%#v", (*configFields)(c.Redacted()))
}
