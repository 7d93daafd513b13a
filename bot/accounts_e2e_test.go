package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// accountEnv runs hookroom with accounts that exist already (made by
// hstest.RegisterUser, which logs each in once: a token and a password),
// and without a registration method, so nothing can be registered.
type accountEnv struct {
	*turnEnv
	router, helper *hstest.User
	env            map[string]string // the ${VAR} environment of config.yaml
	logs           logBuffer
	// rooms is the rooms section of config.yaml; default: e.room by id.
	rooms string
}

func newAccountEnv(t *testing.T) *accountEnv {
	e := &accountEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	e.person = e.hs.RegisterUser(t, "alice")
	e.router = e.hs.RegisterUser(t, "router")
	e.helper = e.hs.RegisterUser(t, "helper")
	e.room = createRoom(t, e.person, e.router.UserID, e.helper.UserID)
	e.env = map[string]string{
		"ROUTER_TOKEN": e.router.AccessToken, "ROUTER_PASSWORD": e.router.Password,
		"HELPER_TOKEN": e.helper.AccessToken, "HELPER_PASSWORD": e.helper.Password,
	}
	e.logs = logBuffer{}
	e.opts = Options{
		PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond,
		ConfigOptions: []config.Option{config.WithLookupEnv(e.lookup)},
		Registry: func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry([]hooks.Plugin{e.rec.plugin(), {Name: "test", Hooks: e.terminalHooks()}}, hooks.Options{Services: s})
		},
	}
	e.testEnv.logs = &e.logs
	e.rooms = fmt.Sprintf("  main:\n    id: %q\n", e.room)
	return e
}

func (e *accountEnv) lookup(k string) (string, bool) {
	v, ok := e.env[k]
	return v, ok
}

// write writes config.yaml: the router and the helper agent with the
// given account blocks (indented under "account:") and extra agent keys.
func (e *accountEnv) write(routerAccount, helperAccount, helperExtra string) *config.Config {
	e.t.Helper()
	text := fmt.Sprintf(`data_dir: ./data
matrix:
  homeserver: %s
  server_name: %s
  router:
    account:
%s
models:
  agent:
    provider: openai
    base_url: %s
    model: agent-model
rooms:
%sauthorization:
  global_users: ["%s"]
agents:
  helper:
    rooms: [main]
%s    account:
%s
`, e.hs.URL, e.hs.ServerName, routerAccount, e.llm.URL, e.rooms, e.person.UserID, helperExtra, helperAccount)
	e.yaml = filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(e.yaml, []byte(text), 0o600); err != nil {
		e.t.Fatal(err)
	}
	cfg, err := config.Load(context.Background(), e.yaml, e.opts.ConfigOptions...)
	if err != nil {
		e.t.Fatalf("config: %v", err)
	}
	return cfg
}

func accountYAML(user *hstest.User, keys ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "      user_id: %q\n", user.UserID)
	for _, k := range keys {
		fmt.Fprintf(&b, "      %s\n", k)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// ask mentions the helper and waits for its answer, which it checks.
func (e *accountEnv) ask(n int, answer string) {
	e.t.Helper()
	e.llm.Script(llmtest.Text(answer))
	e.say("@helper "+answer+"?", "")
	got := e.waitTerminal(n)
	if got[n-1] != "after:"+answer {
		e.t.Fatalf("terminal events %v, want the helper's answer %q", got, answer)
	}
	e.mu.Lock()
	res := e.results[len(e.results)-1]
	e.mu.Unlock()
	_, _, ev := e.visibleText(res.EventID)
	if ev.Sender != e.helper.UserID {
		e.t.Errorf("answer from %s, want %s", ev.Sender, e.helper.UserID)
	}
}

func (e *accountEnv) assertNoSecretsLogged() {
	e.t.Helper()
	for name, v := range e.env {
		if strings.Contains(e.logs.String(), v) {
			e.t.Errorf("the log holds ${%s}", name)
		}
	}
}

// TestAgentConfiguredByAccessToken runs the router and an agent on access
// tokens (as Matrix Authentication Service issues them): no registration
// method is configured and none is needed; the agent answers on the
// token's device, and presence says the accounts are online.
func TestAgentConfiguredByAccessToken(t *testing.T) {
	e := newAccountEnv(t)
	cfg := e.write(accountYAML(e.router, "access_token: ${ROUTER_TOKEN}"), accountYAML(e.helper, "access_token: ${HELPER_TOKEN}"), "")
	e.bot = e.start(cfg, e.rec, e.opts)
	helper := e.bot.bot.w().agents["helper"]
	if helper.UserID() != e.helper.UserID || helper.DeviceID() != e.helper.DeviceID {
		t.Errorf("helper runs as %s on %s, want %s on the token's device %s", helper.UserID(), helper.DeviceID(), e.helper.UserID, e.helper.DeviceID)
	}
	e.ask(1, "Answered on a token")
	if p, err := e.person.Client.GetPresence(context.Background(), e.helper.UserID); err != nil || p.Presence != event.PresenceOnline {
		t.Errorf("helper presence = %+v, %v; want online", p, err)
	}
	e.bot.stop(t)
	if p, err := e.person.Client.GetPresence(context.Background(), e.helper.UserID); err != nil || p.Presence != event.PresenceOffline {
		t.Errorf("helper presence after shutdown = %+v, %v; want offline", p, err)
	}
	e.assertNoSecretsLogged()
}

// TestPasswordAccountsSurviveLostDatabase loses the database of accounts
// configured by password: the next start logs in again on new devices
// with new encryption keys, and the agent still answers.
func TestPasswordAccountsSurviveLostDatabase(t *testing.T) {
	e := newAccountEnv(t)
	cfg := e.write(accountYAML(e.router, "password: ${ROUTER_PASSWORD}"), accountYAML(e.helper, "password: ${HELPER_PASSWORD}"), "")
	e.bot = e.start(cfg, e.rec, e.opts)
	first := e.bot.bot.w().agents["helper"].DeviceID()
	e.ask(1, "Before the loss")
	e.bot.stop(t)

	if err := os.RemoveAll(filepath.Join(e.dir, "data")); err != nil {
		t.Fatal(err)
	}
	e.bot = e.start(cfg, e.rec, e.opts)
	helper := e.bot.bot.w().agents["helper"]
	if helper.DeviceID() == first || helper.DeviceID() == "" {
		t.Errorf("device after the loss = %q, want a new one (not %s)", helper.DeviceID(), first)
	}
	keys, err := e.person.Client.QueryKeys(context.Background(), &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{e.helper.UserID: {helper.DeviceID()}}})
	if err != nil || len(keys.DeviceKeys[e.helper.UserID][helper.DeviceID()].Keys) == 0 {
		t.Errorf("the new device has no keys on the homeserver: %v", err)
	}
	// The question asked before the loss may come again (the inbox went
	// with the database); the new one is answered.
	e.mu.Lock()
	n := len(e.terminal)
	e.mu.Unlock()
	e.ask(n+1, "After the loss")
	e.assertNoSecretsLogged()
}

// TestPasswordAccountsSurviveLostDatabaseEncrypted is the same in a room
// hookroom created encrypted, with a person on an independent encrypting
// client (matrix-nio): after the loss the agent reads the person's new
// messages with its new device's keys and its answer decrypts.
func TestPasswordAccountsSurviveLostDatabaseEncrypted(t *testing.T) {
	e := newAccountEnv(t)
	e.rooms = fmt.Sprintf("  main:\n    alias: %s\n    invite: [%q]\n", e.localpart("secret"), e.person.UserID)
	cfg := e.write(accountYAML(e.router, "password: ${ROUTER_PASSWORD}"), accountYAML(e.helper, "password: ${HELPER_PASSWORD}"), "")
	e.bot = e.start(cfg, e.rec, e.opts)
	room := e.bot.bot.w().rooms["main"]
	phone := e.joinEncrypted(t, hstest.Nio, e.person, room)
	ask := func(answer string) {
		t.Helper()
		e.llm.Script(llmtest.Text(answer))
		q := phone.SendText(t, room, "@helper "+answer+"?")
		got := phone.WaitMessage(t, room, hstest.Match{Sender: e.helper.UserID, Contains: answer, ThreadRoot: q})
		if !got.Encrypted || got.Undecryptable {
			t.Errorf("reply %q encrypted=%v undecryptable=%v, want an encrypted reply that decrypts", answer, got.Encrypted, got.Undecryptable)
		}
	}
	ask("Encrypted before the loss")
	e.bot.stop(t)

	if err := os.RemoveAll(filepath.Join(e.dir, "data")); err != nil {
		t.Fatal(err)
	}
	e.bot = e.start(cfg, e.rec, e.opts)
	helper := e.bot.bot.w().agents["helper"]
	// The person's client learns of the new device from its sync before it
	// shares its room key, as with any new device.
	phone.WaitDevice(t, e.helper.UserID, helper.DeviceID())
	ask("Encrypted after the loss")
	e.assertNoSecretsLogged()
}

// TestRejectedAccessTokenNamesTheAgent starts with a revoked token: Run
// fails with an error that names the agent and its account, never the
// token, and with no password configured nothing else is tried.
func TestRejectedAccessTokenNamesTheAgent(t *testing.T) {
	e := newAccountEnv(t)
	e.env["HELPER_TOKEN"] = "syt_revoked_SECRETSECRETSECRET_0000"
	cfg := e.write(accountYAML(e.router, "access_token: ${ROUTER_TOKEN}"), accountYAML(e.helper, "access_token: ${HELPER_TOKEN}"), "")
	var logs bytes.Buffer
	ctx := zerolog.New(&logs).Level(zerolog.DebugLevel).WithContext(t.Context())
	b, err := New(ctx, cfg, e.opts)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Run(ctx)
	if !errors.Is(err, matrixio.ErrTokenRejected) {
		t.Fatalf("Run = %v, want ErrTokenRejected", err)
	}
	for _, want := range []string{"agent helper", string(e.helper.UserID)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "SECRET") || strings.Contains(logs.String(), "SECRET") {
		t.Errorf("the token is in the error or the log:\n%v\n%s", err, logs.String())
	}
}

// TestProfileFollowsReload changes the display names and avatars of the
// router and an agent in config.yaml: a reload applies them on the running
// accounts (no new login), without "needs a restart"; an avatar file is
// uploaded once.
func TestProfileFollowsReload(t *testing.T) {
	e := newAccountEnv(t)
	routerAcct := accountYAML(e.router, "password: ${ROUTER_PASSWORD}")
	helperAcct := accountYAML(e.helper, "password: ${HELPER_PASSWORD}")
	cfg := e.write(routerAcct, helperAcct, "    display_name: Helper\n")
	e.bot = e.start(cfg, e.rec, e.opts)
	ctx := context.Background()
	helper := e.bot.bot.w().agents["helper"]
	device := helper.DeviceID()
	if n, err := e.person.Client.GetDisplayName(ctx, e.helper.UserID); err != nil || n.DisplayName != "Helper" {
		t.Fatalf("display name = %+v, %v", n, err)
	}

	png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{7}, 100)...)
	if err := os.WriteFile(filepath.Join(e.dir, "helper.png"), png, 0o600); err != nil {
		t.Fatal(err)
	}
	routerAvatar, err := e.person.Client.UploadBytes(ctx, png, "image/png")
	if err != nil {
		t.Fatal(err)
	}
	text, _ := os.ReadFile(e.yaml)
	edited := strings.Replace(string(text), "    display_name: Helper\n", "    display_name: Helper Two\n    avatar: helper.png\n", 1)
	edited = strings.Replace(edited, "  router:\n", fmt.Sprintf("  router:\n    display_name: Router Two\n    avatar: %s\n", routerAvatar.ContentURI), 1)
	if err := os.WriteFile(e.yaml, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	rep, err := e.bot.bot.Reload(ctx, false)
	if err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if len(rep.NeedsRestart) > 0 || !rep.Config.RouterProfile || !slices.Contains(rep.Config.AgentsChanged, "helper") {
		t.Errorf("reload report = %q (%+v)", rep.Summary(), rep.Config)
	}
	if got := e.bot.bot.w().agents["helper"]; got != helper || got.DeviceID() != device {
		t.Errorf("the helper's account was replaced (device %s, was %s)", got.DeviceID(), device)
	}
	profile := func(user id.UserID) (string, id.ContentURI) {
		n, err := e.person.Client.GetDisplayName(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		a, err := e.person.Client.GetAvatarURL(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		return n.DisplayName, a
	}
	name, helperAvatar := profile(e.helper.UserID)
	if name != "Helper Two" || helperAvatar.IsEmpty() {
		t.Errorf("helper profile = %q %v, want Helper Two with an avatar", name, helperAvatar)
	}
	if name, avatar := profile(e.router.UserID); name != "Router Two" || avatar != routerAvatar.ContentURI {
		t.Errorf("router profile = %q %v, want Router Two with %v", name, avatar, routerAvatar.ContentURI)
	}

	// A restart keeps the uploaded avatar instead of uploading it again.
	e.bot.stop(t)
	cfg, err = config.Load(ctx, e.yaml, e.opts.ConfigOptions...)
	if err != nil {
		t.Fatal(err)
	}
	e.bot = e.start(cfg, e.rec, e.opts)
	if _, again := profile(e.helper.UserID); again != helperAvatar {
		t.Errorf("after restart avatar = %v, want the first upload %v", again, helperAvatar)
	}
}
