package plugins

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// Builtin describes a built-in Go plugin. Packages register theirs from
// init with RegisterBuiltin, the way Caddy modules and database/sql drivers
// do; the binary enables the ones it wants by importing their packages
// (plugins/builtin/all imports every plugin that ships with hookroom).
type Builtin struct {
	// Name is the registered name config.yaml enables it by
	// ("builtin: audit_log"); ^[a-z0-9_-]+$.
	Name string
	// Description says what the plugin does, for listings.
	Description string
	// New creates an instance for one plugins entry. It is called on every
	// load whose settings for the plugin changed (unchanged instances are
	// reused across reloads). It validates the settings and returns an
	// error for bad ones (a *SettingsError points the error at the key);
	// it must not block: ctx only bounds loading.
	New func(ctx context.Context, env Env) (Instance, error)
}

// Env is what a plugin instance gets from the host when it is created.
type Env struct {
	// Name is the plugin's name: the builtin name, or the manifest name of
	// a plugin directory that configures a built-in.
	Name string
	// Dir is the plugin directory, "" for a "builtin:" entry.
	Dir string
	// Settings are the entry's settings from config.yaml.
	Settings hooks.Settings
	// StateDir is the plugin's state directory, <data_dir>/plugins/<name>/.
	// It may not exist yet; create it on first use.
	StateDir string
	// Logger is bound to the plugin's name. Hooks should prefer the logger
	// of their context (c.Logger()), which also names the hook and event.
	Logger *zerolog.Logger

	// The fields below are host capabilities that only built-in plugins
	// get: they are trusted code compiled into hookroom. Process plugins
	// never see them (a process gets its settings, state directory and
	// environment, and reaches the host through the protocol's services).

	// ConfigDir is the directory of config.yaml, the one relative paths in
	// settings are resolved against (see ResolvePath).
	ConfigDir string
	// DB is hookroom's own database (SQLite or PostgreSQL), nil when the
	// host offers none (Loader.DB). A plugin keeps its tables apart with
	// their own version table (internal/database.Tables) and never touches
	// the host's.
	DB *dbutil.Database
	// RoomEncrypted reports whether a room is end-to-end encrypted, nil
	// when the host cannot tell (Loader.RoomEncrypted). Treat nil and an
	// error as "encrypted": what is said in an encrypted room must not
	// leave the server by mistake.
	RoomEncrypted func(ctx context.Context, room id.RoomID) (bool, error)
	// Inspect says the plugin set is only looked at, never run (hookroom
	// check, hooks, tools; Loader.Inspect): New validates its settings and
	// declares its hooks, tools and commands, but changes nothing — no
	// migrations, no background work — since a running hookroom may be
	// using the same database. DB may be nil then.
	Inspect bool
}

// ResolvePath returns p resolved against ConfigDir when it is relative
// (against the working directory when ConfigDir is empty), cleaned.
func (e Env) ResolvePath(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	dir := e.ConfigDir
	if dir == "" {
		if abs, err := filepath.Abs("."); err == nil {
			dir = abs
		}
	}
	return filepath.Join(dir, p)
}

// Encrypted reports whether room is end-to-end encrypted, by
// RoomEncrypted, and true whenever it cannot tell: no RoomEncrypted, an
// error, or an empty room id.
func (e Env) Encrypted(ctx context.Context, room id.RoomID) bool {
	if e.RoomEncrypted == nil || room == "" {
		return true
	}
	enc, err := e.RoomEncrypted(ctx, room)
	return err != nil || enc
}

var builtinRegistry = struct {
	sync.RWMutex
	m map[string]Builtin
}{m: map[string]Builtin{}}

// RegisterBuiltin makes a built-in plugin available under b.Name. It is
// meant to be called from init and panics on an invalid or duplicate name
// or a missing New.
func RegisterBuiltin(b Builtin) {
	if !NameRE.MatchString(b.Name) {
		panic(fmt.Sprintf("plugins: invalid built-in plugin name %q (want %s)", b.Name, NameRE))
	}
	if b.New == nil {
		panic(fmt.Sprintf("plugins: built-in plugin %q has no New function", b.Name))
	}
	builtinRegistry.Lock()
	defer builtinRegistry.Unlock()
	if _, dup := builtinRegistry.m[b.Name]; dup {
		panic(fmt.Sprintf("plugins: built-in plugin %q registered twice", b.Name))
	}
	builtinRegistry.m[b.Name] = b
}

// LookupBuiltin returns the built-in plugin registered under name.
func LookupBuiltin(name string) (Builtin, bool) {
	builtinRegistry.RLock()
	defer builtinRegistry.RUnlock()
	b, ok := builtinRegistry.m[name]
	return b, ok
}

// Builtins returns every registered built-in plugin, sorted by name.
func Builtins() []Builtin {
	builtinRegistry.RLock()
	defer builtinRegistry.RUnlock()
	out := make([]Builtin, 0, len(builtinRegistry.m))
	for _, b := range builtinRegistry.m {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Builtin) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func builtinNames() string {
	bs := Builtins()
	if len(bs) == 0 {
		return "none are compiled in"
	}
	names := make([]string, len(bs))
	for i, b := range bs {
		names[i] = b.Name
	}
	return "known: " + strings.Join(names, ", ")
}

// HookList is an Instance that has nothing besides its hooks.
type HookList []hooks.Hook

// Hooks returns the hooks.
func (h HookList) Hooks() []hooks.Hook { return h }

var _ Instance = HookList(nil)
