package config

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of an MCP server entry.
const (
	DefaultMCPCallTimeout  = 60 * time.Second
	DefaultMCPStartTimeout = 30 * time.Second
	DefaultMCPCrashLimit   = 5
)

// MCPServer is one MCP (Model Context Protocol) tool server, an entry of
// mcp_servers. Its tools become agent tools named mcp:SERVER/TOOL. Exactly
// one of Command (a stdio server hookroom starts and supervises) and URL (a
// streamable-HTTP server that runs elsewhere) is set.
//
//	mcp_servers:
//	  files:
//	    command: npx
//	    args: [-y, "@modelcontextprotocol/server-filesystem", /srv/shared]
//	    sandbox: {read_only: [/srv/shared]}
//	  github:
//	    url: https://api.githubcopilot.com/mcp/
//	    headers: {Authorization: "Bearer ${GITHUB_TOKEN}"}
type MCPServer struct {
	// Command is the program of a stdio server (looked up in PATH when it
	// has no path separator; relative paths are resolved against the config
	// directory). It runs in <data_dir>/mcp/<name>/.
	Command string `yaml:"command,omitempty"`
	// Args are the program's arguments.
	Args []string `yaml:"args,omitempty"`
	// Env names the environment variables of the server's own
	// environment that the stdio server receives, besides PATH, HOME (its
	// state directory) and LANG. Nothing else is inherited.
	Env []string `yaml:"env,omitempty"`
	// URL is the endpoint of a streamable-HTTP server (http:// or https://).
	URL string `yaml:"url,omitempty"`
	// Headers are sent with every HTTP request to URL (e.g. Authorization:
	// "Bearer ${TOKEN}"); their values are secrets.
	Headers map[string]Secret `yaml:"headers,omitempty"`
	// CallTimeout bounds one tool call (default 60s).
	CallTimeout Duration `yaml:"call_timeout,omitempty"`
	// StartTimeout bounds starting the server and listing its tools
	// (default 30s; npx may download the package on its first start).
	StartTimeout Duration `yaml:"start_timeout,omitempty"`
	// CrashLimit crashes of a stdio server within a minute disable it
	// until the next reload (default 5). Restarts back off from 100 ms,
	// doubling up to 30 s.
	CrashLimit int `yaml:"crash_limit,omitempty"`
	// Sandbox confines a stdio server like a process plugin (Linux,
	// Landlock): system directories and the program's installation
	// read-only, its state directory read-write, plus what read_only and
	// read_write add (e.g. the directories a filesystem server serves).
	Sandbox PluginSandbox `yaml:"sandbox,omitempty"`
	// Enabled false keeps the server stopped (nil means enabled).
	Enabled *bool `yaml:"enabled,omitempty"`
}

// IsEnabled reports whether the server is enabled (Enabled nil or true).
func (s MCPServer) IsEnabled() bool { return s.Enabled == nil || *s.Enabled }

// Stdio reports whether the server is started as a process (Command set).
func (s MCPServer) Stdio() bool { return s.Command != "" }

// CallTimeoutOrDefault returns CallTimeout, or its default.
func (s MCPServer) CallTimeoutOrDefault() time.Duration {
	if s.CallTimeout > 0 {
		return time.Duration(s.CallTimeout)
	}
	return DefaultMCPCallTimeout
}

// StartTimeoutOrDefault returns StartTimeout, or its default.
func (s MCPServer) StartTimeoutOrDefault() time.Duration {
	if s.StartTimeout > 0 {
		return time.Duration(s.StartTimeout)
	}
	return DefaultMCPStartTimeout
}

// CrashLimitOrDefault returns CrashLimit, or its default.
func (s MCPServer) CrashLimitOrDefault() int {
	if s.CrashLimit > 0 {
		return s.CrashLimit
	}
	return DefaultMCPCrashLimit
}

func (s MCPServer) clone() MCPServer {
	s.Args = slices.Clone(s.Args)
	s.Env = slices.Clone(s.Env)
	s.Headers = maps.Clone(s.Headers)
	s.Sandbox.Enabled = clonePtr(s.Sandbox.Enabled)
	s.Sandbox.ReadOnly = slices.Clone(s.Sandbox.ReadOnly)
	s.Sandbox.ReadWrite = slices.Clone(s.Sandbox.ReadWrite)
	s.Enabled = clonePtr(s.Enabled)
	return s
}

// redactMCP masks the MCP servers' arguments and URLs that came from
// ${VAR} substitution (they may hold tokens); headers are Secrets and mask
// themselves.
func (c *Config) redactMCP() {
	for name, s := range c.MCPServers {
		p := MCPServerPath(name)
		for i := range s.Args {
			if c.fromEnv[JoinIndex(JoinKey(p, "args"), i)] {
				s.Args[i] = redacted
			}
		}
		if c.fromEnv[JoinKey(p, "url")] {
			s.URL = redacted
		}
		c.MCPServers[name] = s
	}
}

// MCPServerNames returns the names of the configured MCP servers, sorted.
func (c *Config) MCPServerNames() []string { return sortedKeys(c.MCPServers) }

// MCPStateDir returns <data_dir>/mcp/<name>/, the working and home
// directory of the stdio MCP server with that name.
func (c *Config) MCPStateDir(name string) string {
	return filepath.Join(c.DataDir, "mcp", name)
}

// MCPServerPath is the key path of an MCP server entry, for Errorf.
func MCPServerPath(name string) string { return JoinKey("mcp_servers", name) }

func (c *Config) applyMCPDefaults() {
	for name, s := range c.MCPServers {
		if s.Command != "" && strings.ContainsRune(s.Command, '/') {
			s.Command = c.ResolvePath(s.Command)
		}
		for _, list := range [][]string{s.Sandbox.ReadOnly, s.Sandbox.ReadWrite} {
			for j, path := range list {
				if path != "" {
					list[j] = c.ResolvePath(path)
				}
			}
		}
		s.Args = nilIfEmpty(s.Args)
		s.Env = nilIfEmpty(s.Env)
		if len(s.Headers) == 0 {
			s.Headers = nil
		}
		c.MCPServers[name] = s
	}
	if len(c.MCPServers) == 0 {
		c.MCPServers = nil
	}
}

func (v *validator) mcpServers() {
	for _, name := range sortedKeys(v.c.MCPServers) {
		s := v.c.MCPServers[name]
		p := MCPServerPath(name)
		if !nameRE.MatchString(name) {
			v.errorf(p, "MCP server name %q must match %s (it names the tools' source, mcp:%s/TOOL)", name, nameRE, name)
		}
		switch {
		case s.Command != "" && s.URL != "":
			v.errorf(p, "set either command (a stdio server) or url (a streamable-HTTP server), not both")
		case s.Command == "" && s.URL == "":
			v.errorf(p, "set command (a stdio server hookroom starts) or url (a streamable-HTTP server)")
		case s.URL != "":
			v.httpURL(JoinKey(p, "url"), s.URL)
			for _, key := range []string{"args", "env", "crash_limit"} {
				if v.set(s, key) {
					v.errorf(JoinKey(p, key), "applies to stdio servers (command), not to url")
				}
			}
			if s.Sandbox.Enabled != nil || len(s.Sandbox.ReadOnly)+len(s.Sandbox.ReadWrite) > 0 {
				v.errorf(JoinKey(p, "sandbox"), "applies to stdio servers (command), not to url")
			}
		default:
			if len(s.Headers) > 0 {
				v.errorf(JoinKey(p, "headers"), "applies to url servers, not to command")
			}
		}
		for j, env := range s.Env {
			if !envNameRE.MatchString(env) {
				v.errorf(JoinIndex(JoinKey(p, "env"), j), "%q is not an environment variable name", env)
			}
		}
		for _, h := range slices.Sorted(maps.Keys(s.Headers)) {
			if h == "" || strings.ContainsAny(h, " :\r\n\t") {
				v.errorf(JoinKey(JoinKey(p, "headers"), h), "%q is not an HTTP header name", h)
			}
		}
		if s.CallTimeout < 0 {
			v.errorf(JoinKey(p, "call_timeout"), "must be positive")
		}
		if s.StartTimeout < 0 {
			v.errorf(JoinKey(p, "start_timeout"), "must be positive")
		}
		if s.CrashLimit < 0 {
			v.errorf(JoinKey(p, "crash_limit"), "must be positive, not %d", s.CrashLimit)
		}
		for _, l := range []struct {
			key   string
			paths []string
		}{{"read_only", s.Sandbox.ReadOnly}, {"read_write", s.Sandbox.ReadWrite}} {
			for j, path := range l.paths {
				if path == "" {
					v.errorf(JoinIndex(JoinKey(JoinKey(p, "sandbox"), l.key), j), "must not be empty")
				}
			}
		}
	}
}

// set reports whether a stdio-only key of s is set.
func (v *validator) set(s MCPServer, key string) bool {
	switch key {
	case "args":
		return len(s.Args) > 0
	case "env":
		return len(s.Env) > 0
	case "crash_limit":
		return s.CrashLimit != 0
	}
	return false
}
