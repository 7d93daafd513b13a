package config_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/config"
)

func TestMCPServers(t *testing.T) {
	src := minimal + `mcp_servers:
  files:
    command: ./bin/fs-server
    args: [--root, /srv]
    env: [FS_TOKEN]
    call_timeout: 5s
    start_timeout: 1m
    crash_limit: 3
    sandbox: {read_only: [shared]}
  github:
    url: https://mcp.example.org/mcp
    headers: {Authorization: "Bearer ${GH_TOKEN}"}
`
	c, err := config.Parse([]byte(src), "/etc/hookroom/config.yaml", fakeEnv(map[string]string{"GH_TOKEN": "ghp-secret"}))
	if err != nil {
		t.Fatal(err)
	}
	files, gh := c.MCPServers["files"], c.MCPServers["github"]
	checks := []struct {
		name      string
		got, want any
	}{
		{"names", c.MCPServerNames(), []string{"files", "github"}},
		{"files.command resolved", files.Command, "/etc/hookroom/bin/fs-server"},
		{"files.args", files.Args, []string{"--root", "/srv"}},
		{"files.env", files.Env, []string{"FS_TOKEN"}},
		{"files.stdio", files.Stdio(), true},
		{"files.call_timeout", files.CallTimeoutOrDefault(), 5 * time.Second},
		{"files.start_timeout", files.StartTimeoutOrDefault(), time.Minute},
		{"files.crash_limit", files.CrashLimitOrDefault(), 3},
		{"files.sandbox.read_only resolved", files.Sandbox.ReadOnly, []string{"/etc/hookroom/shared"}},
		{"files.state dir", c.MCPStateDir("files"), "/etc/hookroom/data/mcp/files"},
		{"github.stdio", gh.Stdio(), false},
		{"github.header", gh.Headers["Authorization"].Reveal(), "Bearer ghp-secret"},
		{"github.call_timeout default", gh.CallTimeoutOrDefault(), config.DefaultMCPCallTimeout},
		{"github.start_timeout default", gh.StartTimeoutOrDefault(), config.DefaultMCPStartTimeout},
		{"github.crash_limit default", gh.CrashLimitOrDefault(), config.DefaultMCPCrashLimit},
		{"enabled", gh.IsEnabled(), true},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s = %#v, want %#v", ch.name, ch.got, ch.want)
		}
	}
	if s := c.String(); strings.Contains(s, "ghp-secret") {
		t.Errorf("String() leaks a header value:\n%s", s)
	}
}

func TestMCPServersRedactedAndCloned(t *testing.T) {
	src := minimal + `mcp_servers:
  files:
    command: srv
    args: [--token, "${FS_TOKEN}", --plain]
  web:
    url: "https://h/mcp?key=${WEB_KEY}"
`
	c := mustParse(t, src, map[string]string{"FS_TOKEN": "fs-secret-token", "WEB_KEY": "web-secret-key"})
	if got := c.MCPServers["files"].Args; !reflect.DeepEqual(got, []string{"--token", "fs-secret-token", "--plain"}) {
		t.Fatalf("args = %q", got)
	}
	s := c.String()
	for _, secret := range []string{"fs-secret-token", "web-secret-key"} {
		if strings.Contains(s, secret) {
			t.Errorf("String() leaks %s:\n%s", secret, s)
		}
	}
	if !strings.Contains(s, "--plain") {
		t.Errorf("String() lost the plain argument:\n%s", s)
	}
	if got := c.MCPServers["files"].Args[1]; got != "fs-secret-token" {
		t.Errorf("redacting changed the configuration: %q", got)
	}
	cl := c.Clone()
	cl.MCPServers["files"].Args[0] = "changed"
	if c.MCPServers["files"].Args[0] != "--token" {
		t.Error("Clone shares the args slice")
	}
}

func TestMCPServerErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"neither", "mcp_servers:\n  x: {call_timeout: 1s}\n",
			[]string{`config.yaml:4: mcp_servers.x: set command (a stdio server hookroom starts) or url (a streamable-HTTP server)`}},
		{"both", "mcp_servers:\n  x:\n    command: srv\n    url: http://h/mcp\n",
			[]string{`config.yaml:4: mcp_servers.x: set either command (a stdio server) or url (a streamable-HTTP server), not both`}},
		{"bad name and url", "mcp_servers:\n  Big:\n    url: ftp://h/mcp\n", []string{
			`config.yaml:4: mcp_servers.Big: MCP server name "Big" must match ^[a-z0-9_-]+$ (it names the tools' source, mcp:Big/TOOL)`,
			`config.yaml:5: mcp_servers.Big.url: must be an http:// or https:// URL`,
		}},
		{"stdio keys on url", "mcp_servers:\n  x:\n    url: http://h/mcp\n    args: [a]\n    env: [A]\n    crash_limit: 2\n    sandbox: {enabled: false}\n", []string{
			`config.yaml:6: mcp_servers.x.args: applies to stdio servers (command), not to url`,
			`config.yaml:7: mcp_servers.x.env: applies to stdio servers (command), not to url`,
			`config.yaml:8: mcp_servers.x.crash_limit: applies to stdio servers (command), not to url`,
			`config.yaml:9: mcp_servers.x.sandbox: applies to stdio servers (command), not to url`,
		}},
		{"headers on stdio, bad env, negatives", "mcp_servers:\n  x:\n    command: srv\n    headers: {A: b}\n    env: [1X]\n    crash_limit: -1\n", []string{
			`config.yaml:6: mcp_servers.x.headers: applies to url servers, not to command`,
			`config.yaml:7: mcp_servers.x.env[0]: "1X" is not an environment variable name`,
			`config.yaml:8: mcp_servers.x.crash_limit: must be positive, not -1`,
		}},
		{"bad duration", "mcp_servers:\n  x:\n    command: srv\n    call_timeout: 10\n", []string{
			`config.yaml:6: mcp_servers.x.call_timeout: expected a duration (like 500ms, 90s, 15m, 1h or 1h30m), got "10"`,
		}},
		{"unknown key", "mcp_servers:\n  x:\n    command: srv\n    cmd: srv\n", []string{
			`config.yaml:6: mcp_servers.x.cmd: unknown key (known keys: args, call_timeout, command, crash_limit, enabled, env, headers, sandbox, start_timeout, url)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrors(t, minimal+tt.yaml, nil)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestDiffMCPServers(t *testing.T) {
	old := mustParse(t, minimal+"mcp_servers:\n  a: {command: x}\n  b: {command: y}\n  c: {url: http://h/mcp}\n", nil)
	next := mustParse(t, minimal+"mcp_servers:\n  a: {command: x}\n  b: {command: y, args: [z]}\n  d: {url: http://h/mcp}\n", nil)
	ch := config.Diff(old, next)
	if !reflect.DeepEqual(ch.MCPServersAdded, []string{"d"}) || !reflect.DeepEqual(ch.MCPServersRemoved, []string{"c"}) || !reflect.DeepEqual(ch.MCPServersChanged, []string{"b"}) {
		t.Errorf("Diff = +%v -%v ~%v, want +[d] -[c] ~[b]", ch.MCPServersAdded, ch.MCPServersRemoved, ch.MCPServersChanged)
	}
	if got := ch.String(); got != "mcp_servers +d -c ~b" {
		t.Errorf("String() = %q", got)
	}
	if ch := config.Diff(old, mustParse(t, minimal+"mcp_servers:\n  a: {command: x}\n  b: {command: y}\n  c: {url: http://h/mcp}\n", nil)); !ch.IsEmpty() {
		t.Errorf("same servers: %v, want no changes", ch)
	}
}
