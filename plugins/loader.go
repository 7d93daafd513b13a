package plugins

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/child"
	"github.com/hookroom/hookroom/plugins/process"
	"github.com/hookroom/hookroom/sandbox"
)

// Kind says which tier a plugin runs in.
type Kind string

// The plugin tiers.
const (
	// KindBuiltin plugins are Go code compiled into hookroom.
	KindBuiltin Kind = "builtin"
	// KindProcess plugins are separate processes speaking the plugin
	// protocol over stdin/stdout.
	KindProcess Kind = "process"
)

// ProcessSpec is everything needed to start one process plugin: it is
// process.Spec. The loader fills Name (the manifest's), Dir (absolute),
// Command (the manifest's, resolved by ResolveCommand), Env (filtered:
// PATH, HOME (= StateDir), LANG and the variables the manifest asks for
// and config.yaml allows), StateDir (absolute, created), Settings (the
// entry's, from config.yaml), Overrides (config.yaml's per-hook
// overrides; the registry applies those naming a hook the plugin
// declares), Sandbox (nil when the entry's sandbox.enabled is false) and
// Secrets (hookroom's own secrets, the values of the plugin's environment
// variables and its secret settings values). It leaves Supervision and
// Trace zero: the StartFunc sets them (ProcessStarter sets Supervision).
type ProcessSpec = process.Spec

// StartFunc starts a process plugin: the process is running and has
// declared its hooks and tools when it returns. ctx bounds the start only;
// the process lives until the returned instance is closed (the instance
// must implement io.Closer).
type StartFunc func(ctx context.Context, spec ProcessSpec) (Instance, error)

// defaultStart starts process plugins when Loader.StartProcess is nil
// (set by the adapter to the plugins/process supervisor).
var defaultStart StartFunc

// Loader builds plugin sets from configurations. Its zero value is ready to
// use; Load uses a zero Loader.
type Loader struct {
	// StartProcess starts process plugins (default: the plugins/process
	// supervisor). Tests put a fake here.
	StartProcess StartFunc
	// AllowEnv returns the names of the environment variables config.yaml
	// allows the plugin of entry to receive. A process plugin gets a
	// variable only when its manifest asks for it AND AllowEnv allows it,
	// and never when its value is one of the server's own secrets. nil
	// allows none (the manifest's requests are then reported as warnings).
	AllowEnv func(entry config.PluginEntry) []string
	// LookupEnv reads the server's environment (default os.LookupEnv).
	LookupEnv func(name string) (string, bool)
	// ForceRestart recreates every plugin instance, even unchanged ones
	// (for an explicit "reload plugins" request).
	ForceRestart bool
	// Parallel bounds how many plugins start at once (default 4).
	Parallel int
	// DB is hookroom's own database, given to built-in plugins (Env.DB);
	// nil gives them none (a built-in that needs it then fails to load).
	// Process plugins never get it.
	DB *dbutil.Database
	// RoomEncrypted reports whether a room is end-to-end encrypted, for
	// built-in plugins (Env.RoomEncrypted): true for a room known to be
	// encrypted, an error when it cannot tell. nil: built-ins treat every
	// room as encrypted.
	RoomEncrypted func(ctx context.Context, room id.RoomID) (bool, error)
	// Inspect loads the set only to look at it (hookroom check, hooks,
	// tools): built-ins get Env.Inspect and change nothing.
	Inspect bool
}

// Load builds the plugin set of cfg with a zero Loader. See Loader.Load.
func Load(ctx context.Context, cfg *config.Config, prev *Set) (*Set, error) {
	var l Loader
	return l.Load(ctx, cfg, prev)
}

// Load builds the plugin set of cfg.Plugins, in order: it resolves every
// enabled entry (a directory with a manifest naming a command or a
// built-in, or a "builtin:" entry), creates the instances, collects their
// hooks and tools, and checks that a hook registry can be built from them.
//
// Instances of prev that did not change (same manifest, same content of the
// plugin directory's files, same settings, environment and state directory;
// for process plugins also the same hook overrides) and are healthy are
// reused; the others are created anew. Load never closes anything of prev:
// the caller swaps the new set in and then closes prev, which closes the
// instances only prev used (removed and restarted plugins).
//
// Every problem is reported at once as a config.ErrorList whose entries
// name config.yaml's file and line: a bad path, a missing or invalid
// manifest, an unsupported api_version, an unknown built-in, invalid
// settings, a duplicate plugin or tool name, a plugin that fails to start,
// a hook the registry refuses. On error nothing new stays running and prev
// is untouched.
func (l *Loader) Load(ctx context.Context, cfg *config.Config, prev *Set) (*Set, error) {
	log := zerolog.Ctx(ctx)
	s := &Set{
		conc:  cfg.Hooks.CollectorConcurrency,
		depth: cfg.Hooks.MaxDepth,
	}
	var errs config.ErrorList
	byName := map[string]*loaded{}
	for i, e := range cfg.Plugins {
		if !e.IsEnabled() {
			continue
		}
		p, perrs := l.resolve(cfg, i, e)
		errs = append(errs, perrs...)
		if p == nil {
			continue
		}
		if first, dup := byName[p.name]; dup {
			errs = append(errs, cfg.Errorf(p.path(), "plugin name %q is also used by plugins[%d]", p.name, first.index))
			continue
		}
		byName[p.name] = p
		s.plugins = append(s.plugins, p)
	}

	// Reuse what did not change; start the rest.
	var toStart []*loaded
	for _, p := range s.plugins {
		if old := prev.find(p.name); old != nil && !l.ForceRestart && old.fingerprint == p.fingerprint && old.inst.healthy() {
			old.inst.acquire()
			p.inst, p.hooks, p.tools, p.reused = old.inst, old.hooks, old.tools, true
			continue
		}
		toStart = append(toStart, p)
	}
	startErrs := make([]error, len(toStart))
	sem := make(chan struct{}, cmp.Or(l.Parallel, 4))
	var wg sync.WaitGroup
	for i, p := range toStart {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			startErrs[i] = l.start(ctx, p, cfg.Dir)
		}()
	}
	wg.Wait()
	for i, p := range toStart {
		if err := startErrs[i]; err != nil {
			var se *SettingsError
			if errors.As(err, &se) {
				errs = append(errs, cfg.Errorf(JoinKey(p.path(), "settings")+settingsSuffix(se.Path), "%v", se.Err))
			} else {
				errs = append(errs, cfg.Errorf(p.path(), "plugin %q failed to start: %v", p.name, err))
			}
			continue
		}
		log.Debug().Str("plugin", p.name).Str("kind", string(p.kind)).Msg("Started plugin")
	}

	// Tools must be unique across plugins.
	toolOwner := map[string]*loaded{}
	for _, p := range s.plugins {
		if p.inst == nil {
			continue
		}
		for _, t := range p.tools {
			if other, dup := toolOwner[t.Name]; dup {
				errs = append(errs, cfg.Errorf(p.path(), "tool %q of plugin %q is also provided by plugin %q (plugins[%d])", t.Name, p.name, other.name, other.index))
				continue
			}
			toolOwner[t.Name] = p
			s.tools = append(s.tools, PluginTool{Plugin: p.name, Tool: t})
		}
	}

	// So must commands.
	cmdOwner := map[string]*loaded{}
	for _, p := range s.plugins {
		if p.inst == nil {
			continue
		}
		for _, c := range commandsOf(p.inst.inst) {
			if other, dup := cmdOwner[c.Name]; dup {
				errs = append(errs, cfg.Errorf(p.path(), "command !%s of plugin %q is also provided by plugin %q (plugins[%d])", c.Name, p.name, other.name, other.index))
				continue
			}
			cmdOwner[c.Name] = p
		}
	}

	if len(errs) == 0 {
		s.overrideWarnings(cfg)
		s.allowlist(cfg)
		if _, err := hooks.NewRegistry(s.HookPlugins(), hooks.Options{CollectorConcurrency: s.conc, MaxDepth: s.depth, Allowlist: s.allow}); err != nil {
			errs = append(errs, s.mapRegistryErrors(cfg, err)...)
		}
	}
	if len(errs) > 0 {
		s.Close()
		sortErrors(errs)
		return nil, errs
	}
	return s, nil
}

// settingsSuffix joins a settings-relative path below "settings".
func settingsSuffix(p string) string {
	switch {
	case p == "":
		return ""
	case strings.HasPrefix(p, "["):
		return p
	default:
		return "." + p
	}
}

// resolve reads entry i: its manifest, kind, settings, overrides, state
// directory, environment and fingerprint.
func (l *Loader) resolve(cfg *config.Config, i int, e config.PluginEntry) (*loaded, config.ErrorList) {
	path := JoinIndex("plugins", i)
	p := &loaded{index: i, entry: e}
	var errs config.ErrorList
	fail := func(key, format string, args ...any) (*loaded, config.ErrorList) {
		errs = append(errs, cfg.Errorf(key, format, args...))
		return nil, errs
	}
	if e.Builtin != "" {
		b, ok := LookupBuiltin(e.Builtin)
		if !ok {
			return fail(JoinKey(path, "builtin"), "unknown built-in plugin %q (%s)", e.Builtin, builtinNames())
		}
		p.name, p.kind, p.builtin, p.source = b.Name, KindBuiltin, b, "builtin:"+b.Name
	} else {
		dir := e.AbsPath
		if dir == "" {
			dir = cfg.ResolvePath(e.Path)
		}
		st, err := os.Stat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fail(path, "plugin directory %s does not exist", dir)
		case err != nil:
			return fail(path, "failed to read plugin directory: %v", err)
		case !st.IsDir():
			return fail(path, "%s is not a directory (a plugin is a directory with %s)", dir, ManifestFile)
		}
		m, err := ReadManifest(dir)
		if err != nil {
			for _, me := range splitErrors(err) {
				errs = append(errs, cfg.Errorf(path, "%v", me))
			}
			return nil, errs
		}
		p.name, p.dir, p.manifest, p.source = m.Name, dir, m, e.Path
		if m.Builtin != "" {
			b, ok := LookupBuiltin(m.Builtin)
			if !ok {
				return fail(path, "%s: unknown built-in plugin %q (%s)", filepath.Join(dir, ManifestFile), m.Builtin, builtinNames())
			}
			p.kind, p.builtin = KindBuiltin, b
		} else {
			p.kind = KindProcess
		}
	}

	settings, err := hooks.NewSettings(e.Settings)
	if err != nil {
		return fail(JoinKey(path, "settings"), "%v", err)
	}
	p.settings = settings
	p.overrides = map[string]hooks.Override{}
	for name, o := range e.Hooks {
		ov := hooks.Override{Enabled: o.Enabled, Priority: o.Priority}
		if d, ok := o.Timeout(); ok {
			ov.Timeout = &d
		}
		if o.FailurePolicy != nil {
			fp, err := hooks.ParseFailurePolicy(string(*o.FailurePolicy))
			if err != nil {
				errs = append(errs, cfg.Errorf(JoinKey(JoinKey(JoinKey(path, "hooks"), name), "failure_policy"), "%v", err))
				continue
			}
			ov.FailurePolicy = &fp
		}
		p.overrides[name] = ov
	}
	state := cfg.PluginStateDir(p.name)
	if abs, err := filepath.Abs(state); err == nil {
		state = abs
	}
	p.stateDir = state

	fp := fingerprint{Kind: p.kind, Name: p.name, Dir: p.dir, Settings: settings.JSON(), StateDir: state, Manifest: p.manifest}
	if p.kind == KindBuiltin {
		fp.Builtin = p.builtin.Name
	} else {
		cmd, err := ResolveCommand(p.dir, p.manifest.Command)
		if err == nil && !strings.ContainsRune(cmd[0], filepath.Separator) {
			_, err = exec.LookPath(cmd[0])
		}
		if err != nil {
			errs = append(errs, cfg.Errorf(path, "%s: command: %v", filepath.Join(p.dir, ManifestFile), err))
		}
		env, eerrs := l.environ(cfg, p)
		errs = append(errs, eerrs...)
		files, err := hashDir(p.dir, state)
		if err != nil {
			errs = append(errs, cfg.Errorf(path, "failed to read plugin directory: %v", err))
		}
		p.spec = ProcessSpec{
			Name: p.name, Dir: p.dir, Command: cmd, Env: env, StateDir: state,
			Settings: settings, Overrides: p.overrides, Secrets: pluginSecrets(cfg, i, env),
		}
		if e.Sandbox.IsEnabled() && len(cmd) > 0 {
			program := cmd[0]
			if lp, err := exec.LookPath(program); err == nil {
				program = lp
			}
			policy := sandbox.ForProgram(program, p.dir, state, e.Sandbox.ReadOnly, e.Sandbox.ReadWrite)
			p.spec.Sandbox = &policy
		}
		fp.Command, fp.Env, fp.Files, fp.Overrides, fp.Sandbox = cmd, env, files, p.overrides, p.spec.Sandbox
	}
	if len(errs) > 0 {
		return nil, errs
	}
	p.fingerprint = fp.sum()
	return p, nil
}

// environ builds a process plugin's environment.
func (l *Loader) environ(cfg *config.Config, p *loaded) ([]string, config.ErrorList) {
	lookup := l.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := child.BaseEnv(lookup, p.stateDir)
	var allowed []string
	if l.AllowEnv != nil {
		allowed = l.AllowEnv(p.entry)
	}
	var errs config.ErrorList
	path := p.path()
	secrets := cfg.SecretValues()
	for _, name := range p.manifest.Env {
		if !slices.Contains(allowed, name) {
			p.warnings = append(p.warnings, cfg.Errorf(path, "plugin %q asks for environment variable %s, which config.yaml does not allow it; the plugin does not get it", p.name, name).Error())
			continue
		}
		v, ok := lookup(name)
		if !ok {
			p.warnings = append(p.warnings, cfg.Errorf(path, "environment variable %s (allowed for plugin %q) is not set", name, p.name).Error())
			continue
		}
		if slices.Contains(secrets, v) {
			errs = append(errs, cfg.Errorf(path, "environment variable %s holds one of hookroom's own secrets and is never passed to plugins", name))
			continue
		}
		env = append(env, name+"="+v)
	}
	for _, name := range allowed {
		if !slices.Contains(p.manifest.Env, name) {
			p.warnings = append(p.warnings, cfg.Errorf(path, "environment variable %s is allowed for plugin %q, but its manifest does not ask for it", name, p.name).Error())
		}
	}
	return env, errs
}

// pluginSecrets are the values the process plugin of entry i must not
// carry into hookroom's log: the server's own secrets, the values of the
// environment variables it gets beyond the base ones, and its settings
// values that are secret (those config.Redacted masks: under a key that
// looks secret, or from ${VAR}).
func pluginSecrets(cfg *config.Config, i int, env []string) []string {
	out := cfg.SecretValues()
	if cfg.Database.Type != config.DatabasePostgres {
		// An SQLite file name is no secret, and plugins may name paths.
		out = slices.DeleteFunc(out, func(s string) bool { return s == cfg.Database.URI.Reveal() })
	}
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if !slices.Contains(baseEnv, name) && value != "" {
			out = append(out, value)
		}
	}
	if red := cfg.Redacted(); i < len(red.Plugins) {
		out = append(out, redactedLeaves(cfg.Plugins[i].Settings, red.Plugins[i].Settings)...)
	}
	return out
}

// redactedLeaves returns the scalar values of orig (as text) that the
// redacted copy red masks.
func redactedLeaves(orig, red any) []string {
	var out []string
	switch o := orig.(type) {
	case map[string]any:
		r, ok := red.(map[string]any)
		if !ok {
			return leaves(orig)
		}
		for k, v := range o {
			out = append(out, redactedLeaves(v, r[k])...)
		}
	case []any:
		r, ok := red.([]any)
		if !ok || len(r) != len(o) {
			return leaves(orig)
		}
		for j, v := range o {
			out = append(out, redactedLeaves(v, r[j])...)
		}
	default:
		if orig != nil && !reflect.DeepEqual(orig, red) {
			out = append(out, fmt.Sprint(orig))
		}
	}
	return out
}

// leaves returns every scalar value in v, as text.
func leaves(v any) []string {
	switch x := v.(type) {
	case map[string]any:
		var out []string
		for _, e := range x {
			out = append(out, leaves(e)...)
		}
		return out
	case []any:
		var out []string
		for _, e := range x {
			out = append(out, leaves(e)...)
		}
		return out
	case nil:
		return nil
	default:
		return []string{fmt.Sprint(x)}
	}
}

// start creates p's instance and reads its hooks, tools and commands.
// configDir is config.yaml's directory.
func (l *Loader) start(ctx context.Context, p *loaded, configDir string) (err error) {
	var inst Instance
	switch p.kind {
	case KindBuiltin:
		logger := zerolog.Ctx(ctx).With().Str("plugin", p.name).Logger()
		env := Env{
			Name: p.name, Dir: p.dir, Settings: p.settings, StateDir: p.stateDir, Logger: &logger,
			ConfigDir: configDir, DB: l.DB, RoomEncrypted: l.RoomEncrypted, Inspect: l.Inspect,
		}
		func() {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("built-in %q panicked: %v\n%s", p.builtin.Name, r, debug.Stack())
				}
			}()
			inst, err = p.builtin.New(ctx, env)
		}()
	case KindProcess:
		start := l.StartProcess
		if start == nil {
			start = defaultStart
		}
		if start == nil {
			return errors.New("process plugins are not available in this build")
		}
		if err := os.MkdirAll(p.stateDir, 0o750); err != nil {
			return fmt.Errorf("failed to create state directory: %w", err)
		}
		inst, err = start(ctx, p.spec)
	}
	if err != nil {
		return err
	}
	if inst == nil {
		return errors.New("plugin returned no instance")
	}
	p.inst = newShared(inst)
	p.hooks = slices.Clone(inst.Hooks())
	if tp, ok := inst.(ToolProvider); ok {
		seen := map[string]bool{}
		for _, t := range tp.Tools() {
			t, err := checkTool(t)
			if err == nil && seen[t.Name] {
				err = fmt.Errorf("tool %q declared twice", t.Name)
			}
			if err != nil {
				return err
			}
			seen[t.Name] = true
			p.tools = append(p.tools, t)
		}
	}
	seen := map[string]bool{}
	for _, c := range commandsOf(inst) {
		err := checkCommand(c)
		if err == nil && seen[c.Name] {
			err = fmt.Errorf("command %q declared twice", c.Name)
		}
		if err != nil {
			return err
		}
		seen[c.Name] = true
	}
	return nil
}

// fingerprint is what decides whether an instance can be reused.
type fingerprint struct {
	Kind      Kind
	Name      string
	Dir       string
	Builtin   string
	Manifest  *Manifest
	Command   []string
	Env       []string
	Files     string
	Settings  json.RawMessage
	StateDir  string
	Overrides map[string]hooks.Override
	Sandbox   *sandbox.Policy
}

func (f fingerprint) sum() string {
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(f); err != nil {
		// Only unencodable values fail, and none are; never reuse then.
		return "unencodable:" + err.Error()
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Hashed file contents are capped: bigger files count by size and time.
const maxHashedFile = 8 << 20

// hashDir hashes the names, modes and contents of the files below dir,
// skipping what tools write while a plugin runs: dot-files and
// dot-directories, __pycache__, *.pyc and node_modules, and the state
// directory should it lie inside dir.
func hashDir(dir, stateDir string) (string, error) {
	h := sha256.New()
	buf := make([]byte, 32<<10)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if path != dir && (strings.HasPrefix(name, ".") || name == "__pycache__" || name == "node_modules" || path == stateDir) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || strings.HasSuffix(name, ".pyc") || strings.HasSuffix(name, ".pyo") {
			return nil
		}
		rel, _ := filepath.Rel(dir, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %v %d\n", rel, info.Mode(), info.Size())
		if info.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(path)
			fmt.Fprintf(h, "-> %q\n", target)
			if st, err := os.Stat(path); err != nil || st.IsDir() {
				return nil
			}
		}
		if info.Size() > maxHashedFile {
			fmt.Fprintf(h, "mtime %d\n", info.ModTime().UnixNano())
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyBuffer(h, struct{ io.Reader }{f}, buf) // hide WriteTo so buf is used
		return err
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Dirs returns the directories of cfg's enabled path entries, for a watcher
// that reloads when plugin code changes.
func Dirs(cfg *config.Config) []string {
	var out []string
	for _, e := range cfg.Plugins {
		if e.Builtin != "" || !e.IsEnabled() {
			continue
		}
		dir := e.AbsPath
		if dir == "" {
			dir = cfg.ResolvePath(e.Path)
		}
		out = append(out, dir)
	}
	return out
}

func sortErrors(l config.ErrorList) {
	slices.SortStableFunc(l, func(a, b *config.Error) int {
		if (a.Line == 0) != (b.Line == 0) {
			if a.Line == 0 {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Path, b.Path), cmp.Compare(a.Msg, b.Msg))
	})
}
