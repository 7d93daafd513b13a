package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/config"
)

func TestConsoleLogIsPlainWhenNotATerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if colourful(w) {
		t.Error("a pipe counts as a terminal")
	}
	var buf bytes.Buffer
	log, err := NewLogger(config.Log{Level: "info", Format: "console"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	log.Warn().Err(errors.New("boom")).Str("room", "lobby").Msg("something to see")
	out := buf.String()
	if strings.Contains(out, "\x1b[") {
		t.Errorf("console log to a non-terminal has ANSI codes: %q", out)
	}
	if !strings.Contains(out, "WRN something to see") || !strings.Contains(out, "error=boom") || !strings.Contains(out, "room=lobby") {
		t.Errorf("console log lost its content: %q", out)
	}
}

func TestNoColorWins(t *testing.T) {
	t.Setenv("NO_COLOR", "1")
	tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0)
	if err == nil {
		defer tty.Close()
	}
	if colourful(os.Stderr) || (tty != nil && colourful(tty)) {
		t.Error("NO_COLOR is set but the log would be coloured")
	}
}

// The Matrix libraries' warnings about normal operation are written at a
// lower level (and dropped below the log's level): a request hookroom
// cancelled on purpose (debug), and a first share of a room key with a
// device that has no olm session yet (info). Other warnings are untouched.
func TestRoutineLibraryWarnings(t *testing.T) {
	canceled := func(log zerolog.Logger) {
		// As mautrix logs a request whose context was cancelled.
		log.Warn().Str("method", "PUT").Str("url", "http://hs/_matrix/client/v3/rooms/x/typing/y").
			Dur("duration", time.Millisecond).Msg("Request canceled")
	}
	noSession := func(log zerolog.Logger) {
		// As mautrix logs it (crypto/encryptmegolm.go), with a nil error.
		log.Warn().Err(nil).Str("target_user_id", "@demo:localhost").Str("target_device_id", "DEV").
			Msg("Didn't find olm session to encrypt group session")
	}
	noSelfSigning := func(log zerolog.Logger) {
		// As mautrix logs it (crypto/cross_sign_validation.go).
		log.Error().Str("user_id", "@demo:localhost").Msg("Self-signing key of user not found")
	}
	for _, tc := range []struct {
		name, level, format string
		log                 func(zerolog.Logger)
		want                string // "" when the line must be dropped
	}{
		{"no self-signing key", "warn", "json", noSelfSigning, ""},
		{"no self-signing key", "info", "json", noSelfSigning, `"level":"info"`},
		{"no self-signing key", "info", "console", noSelfSigning, "INF Self-signing key of user not found"},
		{"canceled", "info", "json", canceled, ""},
		{"canceled", "info", "console", canceled, ""},
		{"canceled", "debug", "json", canceled, `"level":"debug"`},
		{"canceled", "debug", "console", canceled, "DBG Request canceled"},
		{"no olm session", "warn", "json", noSession, ""},
		{"no olm session", "info", "json", noSession, `"level":"info"`},
		{"no olm session", "info", "console", noSession, "INF Didn't find olm session"},
	} {
		t.Run(tc.name+"/"+tc.level+"/"+tc.format, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := NewLogger(config.Log{Level: tc.level, Format: tc.format}, &buf)
			if err != nil {
				t.Fatal(err)
			}
			tc.log(log)
			got := buf.String()
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("logged as %q, want %q", got, tc.want)
			}
			if strings.Contains(got, "warn") || strings.Contains(got, "WRN") || strings.Contains(got, `"error"`) || strings.Contains(got, "ERR") {
				t.Errorf("logged as a warning or an error: %q", got)
			}
			buf.Reset()
			log.Warn().Str("method", "PUT").Msg("Request failed")
			log.Warn().Str("note", `"message":"Request canceled"}`).Msg("something else")
			log.Error().Msg("Self-signing key of user is not signed by their master key")
			if got := buf.String(); strings.Count(got, "WRN")+strings.Count(got, `"level":"warn"`) != 2 ||
				strings.Count(got, "ERR")+strings.Count(got, `"level":"error"`) != 1 {
				t.Errorf("other warnings or errors were changed: %q", got)
			}
		})
	}
}

func TestLogDurationHasUnits(t *testing.T) {
	for d, want := range map[time.Duration]string{
		2137 * time.Microsecond:                  "2.14ms",
		1530 * time.Millisecond:                  "1.53s",
		420*time.Microsecond + 7*time.Nanosecond: "420µs",
	} {
		if got := logDuration(d); got != want {
			t.Errorf("logDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// reloadLogBot is a bot on a config.yaml with no accounts (nothing to do
// on the homeserver) whose log goes to a buffer as JSON.
func reloadLogBot(t *testing.T, body string) (b *Bot, ctx context.Context, path string, logs *bytes.Buffer) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	logs = &bytes.Buffer{}
	log, err := NewLogger(config.Log{Level: "info", Format: "json"}, logs)
	if err != nil {
		t.Fatal(err)
	}
	ctx = log.WithContext(t.Context())
	cfg, err := config.Load(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	b, err = New(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b, ctx, path, logs
}

// reloadConfig is a config.yaml for a homeserver that is never reached,
// with the echo model and the context_info plugin; extra follows the
// plugin's line (more of its settings, more plugins).
func reloadConfig(extra string) string {
	return `matrix:
  homeserver: http://127.0.0.1:9
  server_name: localhost
models:
  default:
    provider: echo
plugins:
  - builtin: context_info
` + extra
}

func logLines(t *testing.T, logs *bytes.Buffer, msg string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", l)
		}
		if m["message"] == msg {
			out = append(out, m)
		}
	}
	return out
}

func TestReloadLogsEachProblemOnItsOwnLine(t *testing.T) {
	b, ctx, path, logs := reloadLogBot(t, reloadConfig(""))
	broken := reloadConfig("    colour: blue\nagents:\n  helper:\n    shape: round\n    model: nowhere\n")
	if err := os.WriteFile(path, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	b.reloadAndLog(ctx)
	lines := logLines(t, logs, "configuration not reloaded; the running one stays in service")
	if len(lines) < 2 {
		t.Fatalf("%d error lines for an edit with several problems, want one each:\n%s", len(lines), logs)
	}
	fileLine := regexp.MustCompile(`config\.yaml:\d+: `)
	seen := map[string]bool{}
	for i, l := range lines {
		msg, _ := l["error"].(string)
		if n := len(fileLine.FindAllString(msg, -1)); n != 1 || strings.Contains(msg, "\n") {
			t.Errorf("line %d names %d file:line positions, want 1: %q", i, n, msg)
		}
		if !strings.HasPrefix(msg, "failed to reload: ") {
			t.Errorf("line %d lost what failed: %q", i, msg)
		}
		if l["problem"] != fmt.Sprintf("%d/%d", i+1, len(lines)) {
			t.Errorf("line %d: problem=%v", i, l["problem"])
		}
		if l["level"] != "error" {
			t.Errorf("line %d: level %v", i, l["level"])
		}
		seen[msg] = true
	}
	for _, want := range []string{"plugins[0].colour", "agents.helper.shape"} {
		found := false
		for msg := range seen {
			found = found || strings.Contains(msg, want)
		}
		if !found {
			t.Errorf("no line names %s: %v", want, seen)
		}
	}
}

func TestReloadLineSaysTookWithUnitAndEachChangeOnce(t *testing.T) {
	b, ctx, path, logs := reloadLogBot(t, reloadConfig(""))
	edited := strings.Replace(reloadConfig("    hooks:\n      add_datetime:\n        priority: 7\n  - builtin: tool_guard\n"),
		"provider: echo\n", "provider: echo\n  other:\n    provider: echo\n", 1) + "log:\n  level: debug\n"
	if err := os.WriteFile(path, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	b.reloadAndLog(ctx)
	lines := logLines(t, logs, "configuration reloaded")
	if len(lines) != 1 {
		t.Fatalf("%d reload lines:\n%s", len(lines), logs)
	}
	took, _ := lines[0]["took"].(string)
	if !regexp.MustCompile(`^[0-9.]+(ns|µs|ms|s)$`).MatchString(took) {
		t.Errorf("took=%v has no unit", lines[0]["took"])
	}
	changes, _ := lines[0]["changes"].(string)
	for _, name := range []string{"context_info", "tool_guard", "models", "log"} {
		if n := strings.Count(changes, name); n != 1 {
			t.Errorf("%q named %d times in changes=%q", name, n, changes)
		}
	}
	if !strings.Contains(changes, "needs a restart: log") {
		t.Errorf("changes=%q does not say the log section needs a restart", changes)
	}
}
