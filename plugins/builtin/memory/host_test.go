package memory

// The plugins package's machinery for commands and the built-ins' Env,
// tested here: a test built-in registered in package plugins' own tests
// would change the listings its tests expect.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/plugins"
)

const header = "matrix:\n  homeserver: http://localhost:8008\n"

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// commander is a built-in with the commands its "commands" setting names;
// each answers with its plugin's name, its arguments and the Env it got.
type commander struct {
	plugins.HookList
	env  plugins.Env
	cmds []plugins.Command
}

func (c *commander) Commands() []plugins.Command { return c.cmds }

var _ plugins.CommandProvider = (*commander)(nil)

func init() {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name: "test_commander", Description: "a built-in with commands, for tests",
		New: func(_ context.Context, env plugins.Env) (plugins.Instance, error) {
			var s struct {
				Commands []string `json:"commands"`
			}
			if err := plugins.DecodeSettings(env.Settings, &s); err != nil {
				return nil, err
			}
			c := &commander{env: env}
			for _, name := range s.Commands {
				c.cmds = append(c.cmds, plugins.Command{Name: name, Help: "test", Run: func(_ context.Context, req plugins.CommandRequest) (string, error) {
					if len(req.Args) > 0 && req.Args[0] == "panic" {
						panic("boom")
					}
					return env.Name + " " + strings.Join(req.Args, " "), nil
				}})
			}
			return c, nil
		},
	})
}

func loadCommanders(t *testing.T, src string, l plugins.Loader) (*plugins.Set, error) {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"one", "two"} {
		writeFile(t, filepath.Join(dir, name, plugins.ManifestFile), `{"name":"`+name+`","version":"1","api_version":1,"builtin":"test_commander"}`)
	}
	cfg, err := config.Parse([]byte(header+"plugins:\n"+src), filepath.Join(dir, "config.yaml"), config.WithLookupEnv(func(string) (string, bool) { return "", false }))
	if err != nil {
		t.Fatal(err)
	}
	set, err := l.Load(hooktest.Context(t), cfg, nil)
	if err == nil {
		t.Cleanup(func() { _ = set.Close() })
	}
	return set, err
}

func TestPluginCommands(t *testing.T) {
	set, err := loadCommanders(t, "  - path: one\n    settings: {commands: [memo, stats]}\n  - path: two\n    settings: {commands: [other]}\n", plugins.Loader{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range set.Commands() {
		names = append(names, c.Plugin+"/!"+c.Name)
	}
	if got := strings.Join(names, " "); got != "one/!memo one/!stats two/!other" {
		t.Errorf("commands %s", got)
	}
	c, ok := set.Command("MEMO")
	if !ok || c.Plugin != "one" {
		t.Fatalf("Command(MEMO) = %+v, %v", c, ok)
	}
	if out, err := c.Call(t.Context(), plugins.CommandRequest{Room: "!r:x", Sender: "@a:x", Args: []string{"a", "b"}}); err != nil || out != "one a b" {
		t.Errorf("Call = %q, %v", out, err)
	}
	var pe *hooks.PanicError
	if _, err := c.Call(t.Context(), plugins.CommandRequest{Args: []string{"panic"}}); !errors.As(err, &pe) {
		t.Errorf("a panicking command: %v", err)
	}
	if _, ok := set.Command("nope"); ok {
		t.Error("Command(nope) found something")
	}
	var nilSet *plugins.Set
	if nilSet.Commands() != nil {
		t.Error("a nil set has commands")
	}
}

func TestPluginCommandErrors(t *testing.T) {
	tests := []struct{ name, src, want string }{
		{"duplicate across plugins", "  - path: one\n    settings: {commands: [memo]}\n  - path: two\n    settings: {commands: [memo]}\n",
			`config.yaml:6: plugins[1]: command !memo of plugin "two" is also provided by plugin "one" (plugins[0])`},
		{"duplicate in one plugin", "  - path: one\n    settings: {commands: [memo, memo]}\n",
			`config.yaml:4: plugins[0]: plugin "one" failed to start: command "memo" declared twice`},
		{"bad name", "  - path: one\n    settings: {commands: [\"Memo!\"]}\n",
			`config.yaml:4: plugins[0]: plugin "one" failed to start: command name "Memo!" must match`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := loadCommanders(t, tt.src, plugins.Loader{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Load = %v\nwant %s", err, tt.want)
			}
		})
	}
}

// Built-ins get the host's database, config.yaml's folder and its answer
// about encryption; Env.Encrypted says "encrypted" whenever it cannot tell.
func TestBuiltinEnvCapabilities(t *testing.T) {
	db := dbtest.SQLite.Fresh(t)
	enc := func(_ context.Context, room id.RoomID) (bool, error) {
		switch room {
		case "!plain:x":
			return false, nil
		case "!broken:x":
			return false, errors.New("no state")
		}
		return true, nil
	}
	set, err := loadCommanders(t, "  - path: one\n", plugins.Loader{DB: db, RoomEncrypted: enc})
	if err != nil {
		t.Fatal(err)
	}
	inst, _ := set.Instance("one")
	env := inst.(*commander).env
	if env.DB != db || env.ConfigDir == "" || env.RoomEncrypted == nil {
		t.Fatalf("env: DB %v, ConfigDir %q, RoomEncrypted set %v", env.DB, env.ConfigDir, env.RoomEncrypted != nil)
	}
	if got, want := env.ResolvePath("kb"), filepath.Join(env.ConfigDir, "kb"); got != want {
		t.Errorf("ResolvePath(kb) = %s, want %s", got, want)
	}
	if got := env.ResolvePath("/abs/kb/"); got != "/abs/kb" {
		t.Errorf("ResolvePath(/abs/kb/) = %s", got)
	}
	ctx := t.Context()
	for room, want := range map[id.RoomID]bool{"!plain:x": false, "!broken:x": true, "!e2ee:x": true, "": true} {
		if got := env.Encrypted(ctx, room); got != want {
			t.Errorf("Encrypted(%q) = %v, want %v", room, got, want)
		}
	}
	if (plugins.Env{}).Encrypted(ctx, "!plain:x") != true {
		t.Error("without RoomEncrypted a room must count as encrypted")
	}
}
