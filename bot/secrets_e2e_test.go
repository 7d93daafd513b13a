package bot

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/testkit"
)

// secretValue returns a distinctive random value that no other text in a
// test run contains by chance.
func secretValue(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return prefix + hex.EncodeToString(b)
}

// encodings are the forms of a secret the leak checks look for: as is,
// and as the usual encodings would carry it.
func encodings(s string) map[string]string {
	return map[string]string{
		"plain":      s,
		"base64":     base64.StdEncoding.EncodeToString([]byte(s)),
		"base64url":  base64.RawURLEncoding.EncodeToString([]byte(s)),
		"url-query":  url.QueryEscape(s),
		"url-path":   url.PathEscape(s),
		"json":       strings.Trim(mustJSON(s), `"`),
		"hex":        hex.EncodeToString([]byte(s)),
		"upper-case": strings.ToUpper(s),
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// secretCore matches the random part secretValue makes.
var secretCore = regexp.MustCompile(`hr[a-z]+[0-9a-f]{24}`)

// leakCheck reports every secret (or encoding of one) found in text; of a
// secret written around a random value (`"#bad alias hralias…"`), the
// random part alone too.
func leakCheck(t testing.TB, where, text string, secrets map[string]string) {
	t.Helper()
	for name, value := range secrets {
		if value == "" {
			t.Fatalf("secret %s is empty", name)
		}
		values := []string{value}
		if core := secretCore.FindString(value); core != "" && core != value {
			values = append(values, core)
		}
		for _, v := range values {
			for enc, form := range encodings(v) {
				if i := strings.Index(text, form); i >= 0 {
					lo, hi := max(0, i-200), min(len(text), i+len(form)+100)
					t.Errorf("%s holds the value of %s (%s):\n…%s…", where, name, enc, text[lo:hi])
				}
			}
		}
	}
}

// roomTimeline returns every event of room as a person reads it (messages,
// notices, edits, state), as JSON, oldest first.
func roomTimeline(t testing.TB, c *mautrix.Client, room id.RoomID) []string {
	t.Helper()
	var out []string
	from := ""
	for range 50 {
		resp, err := c.Messages(context.Background(), room, from, "", mautrix.DirectionBackward, nil, 500)
		if err != nil {
			t.Fatalf("read the room: %v", err)
		}
		for _, ev := range resp.Chunk {
			raw, err := json.Marshal(ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(raw))
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			break
		}
		from = resp.End
	}
	return out
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// Secrets — from ${VAR}: a model API key (rotated by a hot reload), the
// registration shared secret, a token in a model's base URL, plugin
// settings, a process plugin's allowlisted environment variable, a
// PostgreSQL password and values in places where validation fails; and
// the accounts' access tokens and passwords — appear in no log line (at
// trace level), no room event, no hook context handed to a plugin and (but
// for its own variable) not in a plugin's environment, whatever goes
// wrong: a model that answers 401 echoing the key, a model server that
// cannot be reached, broken edits of config.yaml picked up by the watcher
// and by !reload-plugins, and a plugin that writes its secrets to stderr,
// its log and its errors. The test also asserts that each of those
// failures did happen. HOOKROOM_TEST_LOG=FILE keeps the log. The command
// line on such configurations (hookroom check/hooks/tools/run, a database
// that cannot be reached) is cmd/hookroom's TestSecretsStayOutOfCLIOutput.
func TestSecretsStayOutOfLogsAndRooms(t *testing.T) {
	e := &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	secrets := map[string]string{
		"HS_SECRET":       e.hs.Secret,
		"HR_API_KEY":      secretValue(t, "hrkey"),
		"HR_URL_TOKEN":    secretValue(t, "hrpath"),
		"HR_PLUGIN_TOKEN": secretValue(t, "hrptok"),
		"HR_PLUGIN_NOTE":  secretValue(t, "hrpnote"),
		"HR_PLUGIN_ENV":   secretValue(t, "hrpenv"),
		"HR_BAD_ALIAS":    "#bad alias " + secretValue(t, "hralias"),
		"HR_BAD_URL":      "ftp://" + secretValue(t, "hrurl") + ".example.org/v1",
		"HR_BAD_TYPE":     secretValue(t, "hrtype"),
		"HR_BAD_ENUM":     secretValue(t, "hrenum"),
		"HR_BAD_USER":     `"` + secretValue(t, "hruser") + `"`,
		"HR_DB_PASSWORD":  secretValue(t, "hrdbpw"),
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}

	pluginDir := filepath.Join(e.dir, "plugins", "spy")
	copyDir(t, "testdata/plugins/spy", pluginDir)
	copyDir(t, "../plugins/sdk/python", pluginDir)
	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID("helper"), e.userID("prober"))

	head := e.configHead()
	good := agentSetup{
		LLM: e.llm.URL, Model: "agent-model", ModelYAML: "    api_key: ${HR_API_KEY}\n",
		Models: fmt.Sprintf(`  default:
    provider: echo
  down:
    provider: openai
    base_url: http://127.0.0.1:%d/${HR_URL_TOKEN}/v1
    model: down-model
`, closedPort(t)),
		Room: e.room, Admins: []id.UserID{e.person.UserID}, AgentYAML: "    model: agent\n",
		Extra: fmt.Sprintf(`  prober:
    username: %s
    model: down
    rooms: [main]
plugins:
  - path: ./plugins/spy
    settings:
      api_token: ${HR_PLUGIN_TOKEN}
      endpoint: ${HR_PLUGIN_NOTE}
    env: [HR_PLUGIN_ENV]
`, e.localpart("prober")),
	}.body(e.testEnv)
	// Validation fails on each of these; the values must not show.
	invalid := strings.NewReplacer(
		"  main:\n", "  bad:\n    alias: ${HR_BAD_ALIAS}\n  main:\n",
		"    base_url: "+e.llm.URL+"\n", "    base_url: ${HR_BAD_URL}\n",
		"  down:\n    provider: openai\n", "  down:\n    provider: ${HR_BAD_ENUM}\n",
		"  helper:\n    username: "+e.localpart("helper")+"\n", "  helper:\n    username: ${HR_BAD_USER}\n",
	).Replace(good) + "hooks:\n  max_depth: ${HR_BAD_TYPE}\n"
	// Valid, but the plugin loader refuses to hand a server secret to a
	// plugin.
	leakyEnv := strings.Replace(good, "env: [HR_PLUGIN_ENV]", "env: [HR_PLUGIN_ENV, HR_API_KEY]", 1)

	e.yaml = filepath.Join(e.dir, "config.yaml")
	writeFile(t, e.yaml, head+good)
	cfg, err := config.Load(t.Context(), e.yaml)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	r := e.run(cfg, Options{Watch: true, PlaceholderDelay: 50 * time.Millisecond, EditInterval: 100 * time.Millisecond},
		zerolog.New(&e.logs).Level(zerolog.TraceLevel))
	e.bot = r
	e.waitLog("account caught up", 3)
	// The accounts' access tokens and passwords are secrets too.
	rows, err := r.bot.db.Query(t.Context(), `SELECT user_id, access_token, password FROM matrixio_account`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var user, token, password string
		if err := rows.Scan(&user, &token, &password); err != nil {
			t.Fatal(err)
		}
		secrets[user+" access token"], secrets[user+" password"] = token, password
	}
	if err := rows.Err(); err != nil || len(secrets) < 12+6 {
		t.Fatalf("read the accounts' credentials: %v (%d secrets)", err, len(secrets))
	}

	// A model that refuses the key and echoes it, in the body and in a
	// header.
	refuseKey := func(text string) {
		t.Helper()
		key := os.Getenv("HR_API_KEY")
		e.llm.Script(llmtest.Reply{
			Status: http.StatusUnauthorized,
			Body: mustJSON(map[string]any{"error": map[string]any{
				"message": "Incorrect API key provided: " + key + " (sent as Authorization: Bearer " + key + ")",
				"type":    "invalid_request_error", "code": "invalid_api_key",
			}}),
			Header: http.Header{"Www-Authenticate": {`Bearer error="invalid_token", key="` + key + `"`}},
		})
		q := e.say("@"+e.localpart("helper")+" "+text, "")
		e.waitForSender(q, e.userID("helper"), "rejected hookroom's credentials")
		if got := e.llm.LastRequest(t).Header.Get("Authorization"); got != "Bearer "+key {
			t.Errorf("the model got Authorization %q, not the key from ${HR_API_KEY}", got)
		}
	}
	refuseKey("hello")
	// A model server that cannot be reached, at a URL with a token in it.
	q2 := e.say("@"+e.localpart("prober")+" hello", "")
	e.waitForSender(q2, e.userID("prober"), "could not answer")

	// !reload-plugins on the good configuration…
	q3 := e.say("!reload-plugins", "")
	e.waitForSender(q3, e.userID("router"), "Reloaded in")
	// A key and a plugin token rotated by a reload: neither the old nor
	// the new values show.
	for _, name := range []string{"HR_API_KEY", "HR_PLUGIN_TOKEN"} {
		secrets[name+" (rotated)"] = secretValue(t, "hrrot")
		t.Setenv(name, secrets[name+" (rotated)"])
	}
	e.rewrite(good)
	e.waitLog("configuration reloaded", 2) // !reload-plugins was the first
	refuseKey("hello again")
	// …a broken edit, picked up by the file watcher…
	e.rewrite(invalid)
	e.waitLog("configuration not reloaded", 1)
	// …and a valid one that would hand the API key to the plugin, reloaded
	// by the watcher and by !reload-plugins.
	e.rewrite(leakyEnv)
	e.waitLog("configuration not reloaded", 2)
	q4 := e.say("!reload-plugins", "")
	if got := e.waitForSender(q4, e.userID("router"), "Reload failed"); !strings.Contains(got, "hookroom's own secrets") {
		t.Errorf("!reload-plugins on the leaky edit answered %q", got)
	}
	r.stop(t)
	logs := e.logs.String()
	if p := os.Getenv("HOOKROOM_TEST_LOG"); p != "" {
		_ = os.WriteFile(p, []byte(logs), 0o600) // for a look at what was logged
	}
	for _, want := range []string{
		"${HR_BAD_ALIAS}", "models.agent.base_url: must be an http", "${HR_BAD_ENUM}", "${HR_BAD_TYPE}", "${HR_BAD_USER}",
		"rooms.bad.alias", "models.agent.base_url", "models.down.provider", "hooks.max_depth", "agents.helper.username",
		"HR_API_KEY holds one of hookroom's own secrets",
		"plugin \\\"spy\\\" asks for environment variable HR_API_KEY",
		"the server answered HTTP 401",
		// The plugin's attempts, masked.
		"spy stderr: token [REDACTED] env [REDACTED]",
		"spy log: token [REDACTED]",
		"spy failed: token [REDACTED] env [REDACTED]",
		"could not talk to the model server",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log never says %q", want)
		}
	}
	leakCheck(t, "the log", logs, secrets)
	leakCheck(t, "the room", strings.Join(roomTimeline(t, e.person.Client, e.room), "\n"), secrets)

	// What the plugin got: its allowlisted variable, no other secret.
	state := filepath.Join(cfg.DataDir, "plugins", "spy")
	environ, err := os.ReadFile(filepath.Join(state, "environ.json"))
	if err != nil {
		t.Fatal(err)
	}
	var env map[string]string
	if err := json.Unmarshal(environ, &env); err != nil {
		t.Fatal(err)
	}
	if env["HR_PLUGIN_ENV"] != secrets["HR_PLUGIN_ENV"] {
		t.Errorf("the plugin did not get its allowlisted variable: %v", env)
	}
	delete(env, "HR_PLUGIN_ENV")
	leakCheck(t, "the plugin's environment", mustJSON(env), secrets)
	contexts, err := os.ReadFile(filepath.Join(state, "contexts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"message:cancelled"`, `"message:received"`, `"config:reloaded"`} {
		if !bytes.Contains(contexts, []byte(want)) {
			t.Errorf("the plugin never saw %s", want)
		}
	}
	leakCheck(t, "the hook contexts handed to the plugin", string(contexts), secrets)
}

// waitForSender waits until a message of sender in the thread of (or in
// reply to) q shows text containing want, and returns that text.
func (e *reloadEnv) waitForSender(q id.EventID, sender id.UserID, want string) string {
	e.t.Helper()
	var found string
	testkit.Until(e.t, 90*time.Second, func() (bool, string) {
		resp, err := e.person.Client.Messages(context.Background(), e.room, "", "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			e.t.Fatalf("read the room: %v", err)
		}
		var seen []string
		for _, ev := range resp.Chunk {
			if ev.Sender != sender {
				continue
			}
			_ = ev.Content.ParseRaw(ev.Type)
			m := ev.Content.AsMessage()
			if m.RelatesTo == nil || (m.RelatesTo.GetThreadParent() != q && m.RelatesTo.GetReplyTo() != q) {
				continue
			}
			text, _, _ := e.visibleText(ev.ID)
			if strings.Contains(text, want) {
				found = text
				return true, ""
			}
			seen = append(seen, text)
		}
		return false, fmt.Sprintf("waiting for %s to answer %s with %q; it said %q", sender, q, want, seen)
	})
	return found
}
