package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/child"
	"github.com/hookroom/hookroom/internal/restart"
	"github.com/hookroom/hookroom/sandbox"
)

// Options tune Load.
type Options struct {
	// LookupEnv reads the server's environment for env allowlists (nil:
	// os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Inspect starts each server once to list its tools, without restarts
	// (hookroom check, hooks, tools), within InspectTimeout (default 10 s)
	// or the server's start_timeout, whichever is shorter.
	Inspect        bool
	InspectTimeout time.Duration
	// Force restarts every server, even unchanged ones.
	Force bool
	// HTTPClient sends the requests to streamable-HTTP servers (nil: a
	// new client).
	HTTPClient *http.Client
	// Restart overrides the back-off of stdio servers (tests); Limit and
	// Window come from crash_limit and one minute unless set here.
	Restart restart.Policy
}

// Set is the MCP servers of one configuration, by name. It is immutable
// once Load returned it; Close it once nothing uses it (servers shared with
// a newer set keep running).
type Set struct {
	servers  []*entry // by name
	warnings []string

	closeOnce sync.Once
}

type entry struct {
	name        string
	fingerprint string
	srv         *shared
	reused      bool
}

// shared is a server used by one or more sets.
type shared struct {
	*Server
	mu   sync.Mutex
	refs int
}

func (s *shared) acquire() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

func (s *shared) release() {
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if last {
		_ = s.Close()
	}
}

// Load builds the set of cfg's enabled MCP servers. Servers of prev whose
// entry is unchanged (and that are not disabled) are carried over running,
// unless opts.Force; the others are started, all at once, each within its
// start timeout. A server that fails to start is a warning (Warnings), not
// an error: a stdio server keeps being restarted with back-off, an HTTP
// server is connected again at its next call. Errors are problems of the
// configuration (a command not found, an environment variable holding one
// of hookroom's secrets), as a config.ErrorList with file:line; then
// nothing was started.
func Load(ctx context.Context, cfg *config.Config, prev *Set, opts Options) (*Set, error) {
	set := &Set{}
	var errs config.ErrorList
	var specs []Spec
	for _, name := range cfg.MCPServerNames() {
		sc := cfg.MCPServers[name]
		if !sc.IsEnabled() {
			continue
		}
		spec, warnings, serrs := buildSpec(cfg, name, sc, opts)
		errs = append(errs, serrs...)
		set.warnings = append(set.warnings, warnings...)
		specs = append(specs, spec)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	var starting []*entry
	for _, spec := range specs {
		e := &entry{name: spec.Name, fingerprint: fingerprint(spec)}
		if old := prev.find(spec.Name); old != nil && !opts.Force && !opts.Inspect && old.fingerprint == e.fingerprint && !old.srv.Disabled() {
			old.srv.acquire()
			e.srv, e.reused = old.srv, true
		} else {
			e.srv = &shared{Server: New(ctx, spec), refs: 1}
			starting = append(starting, e)
		}
		set.servers = append(set.servers, e)
	}
	var wg sync.WaitGroup
	failed := make([]error, len(starting))
	for i, e := range starting {
		wg.Go(func() { failed[i] = e.srv.Start(ctx) })
	}
	wg.Wait()
	for i, err := range failed {
		if err == nil {
			continue
		}
		e := starting[i]
		what := "it is started again with back-off"
		switch {
		case opts.Inspect:
			what = "its tools are unknown"
		case !e.srv.spec.stdio():
			what = "hookroom connects again at its next call"
		}
		set.warnings = append(set.warnings, cfg.Errorf(config.MCPServerPath(e.name), "MCP server %q did not start: %v; %s", e.name, err, what).Error())
	}
	for _, w := range set.warnings {
		zerolog.Ctx(ctx).Warn().Msg(w)
	}
	return set, nil
}

// buildSpec turns a config entry into a Spec.
func buildSpec(cfg *config.Config, name string, sc config.MCPServer, opts Options) (Spec, []string, config.ErrorList) {
	p := config.MCPServerPath(name)
	spec := Spec{
		Name: name, URL: sc.URL, HTTPClient: opts.HTTPClient,
		CallTimeout: sc.CallTimeoutOrDefault(), StartTimeout: sc.StartTimeoutOrDefault(),
		Restart: opts.Restart, NoRestart: opts.Inspect,
	}
	if spec.Restart.Limit == 0 {
		spec.Restart.Limit = sc.CrashLimitOrDefault()
	}
	if opts.Inspect {
		limit := opts.InspectTimeout
		if limit <= 0 {
			limit = 10 * time.Second
		}
		spec.StartTimeout = min(spec.StartTimeout, limit)
	}
	var errs config.ErrorList
	var warnings []string
	if !sc.Stdio() {
		if len(sc.Headers) > 0 {
			spec.Headers = make(map[string]string, len(sc.Headers))
			for k, v := range sc.Headers {
				spec.Headers[k] = v.Reveal()
			}
		}
		return spec, nil, nil
	}
	program := sc.Command
	if !strings.ContainsRune(program, '/') {
		lp, err := exec.LookPath(program)
		if err != nil {
			errs = append(errs, cfg.Errorf(p+".command", "program %q not found in PATH", program))
		} else {
			program = lp
		}
	} else if _, err := os.Stat(program); err != nil {
		errs = append(errs, cfg.Errorf(p+".command", "program %q: %v", program, err))
	}
	spec.Command = append([]string{program}, sc.Args...)
	spec.Dir = cfg.MCPStateDir(name)
	env, ws, eerrs := environ(cfg, name, sc, opts.LookupEnv)
	spec.Env = env
	warnings = append(warnings, ws...)
	errs = append(errs, eerrs...)
	if sc.Sandbox.IsEnabled() {
		policy := sandbox.ForProgram(program, "", spec.Dir, sc.Sandbox.ReadOnly, sc.Sandbox.ReadWrite)
		spec.Sandbox = &policy
	}
	return spec, warnings, errs
}

// environ builds a stdio server's environment: PATH and LANG of hookroom's
// (or defaults), HOME=its directory, and the allowed variables that are
// set. A variable holding one of hookroom's own secrets is an error.
func environ(cfg *config.Config, name string, sc config.MCPServer, lookup func(string) (string, bool)) ([]string, []string, config.ErrorList) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := child.BaseEnv(lookup, cfg.MCPStateDir(name))
	var warnings []string
	var errs config.ErrorList
	secrets := cfg.SecretValues()
	for i, v := range sc.Env {
		p := fmt.Sprintf("%s.env[%d]", config.MCPServerPath(name), i)
		val, ok := lookup(v)
		if !ok {
			warnings = append(warnings, cfg.Errorf(p, "environment variable %s (allowed for MCP server %q) is not set", v, name).Error())
			continue
		}
		if val != "" && slices.Contains(secrets, val) {
			errs = append(errs, cfg.Errorf(p, "environment variable %s holds one of hookroom's own secrets and is never passed to MCP servers", v))
			continue
		}
		env = append(env, v+"="+val)
	}
	return env, warnings, errs
}

// fingerprint identifies what a server runs with; a change restarts it.
// It is a hash: header and environment values never leave it.
func fingerprint(s Spec) string {
	raw, _ := json.Marshal(struct {
		Command, Env          []string
		Dir, URL              string
		Headers               map[string]string
		Sandbox               *sandbox.Policy
		Call, Start           time.Duration
		Limit                 int
		RestartDelay, MaxWait time.Duration
	}{s.Command, s.Env, s.Dir, s.URL, s.Headers, s.Sandbox, s.CallTimeout, s.StartTimeout, s.Restart.Limit, s.Restart.Delay, s.Restart.MaxDelay})
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

func (s *Set) find(name string) *entry {
	if s == nil {
		return nil
	}
	for _, e := range s.servers {
		if e.name == name {
			return e
		}
	}
	return nil
}

// Server returns the server called name, or nil.
func (s *Set) Server(name string) *Server {
	if e := s.find(name); e != nil {
		return e.srv.Server
	}
	return nil
}

// Names returns the servers' names, sorted.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s.servers))
	for i, e := range s.servers {
		out[i] = e.name
	}
	return out
}

// Tools returns every server's current tools, servers by name.
func (s *Set) Tools() []Tool {
	if s == nil {
		return nil
	}
	var out []Tool
	for _, e := range s.servers {
		out = append(out, e.srv.Tools()...)
	}
	return out
}

// Version changes whenever a server's tool list changes.
func (s *Set) Version() uint64 {
	if s == nil {
		return 0
	}
	var v uint64
	for _, e := range s.servers {
		v += e.srv.Version()
	}
	return v
}

// CallTool calls tool of server.
func (s *Set) CallTool(ctx context.Context, server, tool string, args json.RawMessage) (string, error) {
	srv := s.Server(server)
	if srv == nil {
		return "", fmt.Errorf("no MCP server %q: %w", server, ErrUnavailable)
	}
	return srv.CallTool(ctx, tool, args)
}

// Warnings returns what Load warned about (also logged).
func (s *Set) Warnings() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.warnings)
}

// Changes describes what s changed compared with old, for the reload
// report: "started files", "restarted github", "stopped old".
func (s *Set) Changes(old *Set) []string {
	var out []string
	for _, e := range s.servers {
		switch {
		case e.reused:
		case old.find(e.name) != nil:
			out = append(out, "restarted "+e.name)
		default:
			out = append(out, "started "+e.name)
		}
	}
	if old != nil {
		for _, e := range old.servers {
			if s.find(e.name) == nil {
				out = append(out, "stopped "+e.name)
			}
		}
	}
	return out
}

// Close releases the set's servers: those no newer set uses are stopped.
func (s *Set) Close() error {
	if s == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for _, e := range s.servers {
			wg.Go(e.srv.release)
		}
		wg.Wait()
	})
	return nil
}
