package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/config"
)

func TestCheck(t *testing.T) {
	env := map[string]string{"TOKEN": "0123456789abcdef-token"}
	tests := []struct {
		name string
		src  string
		want []string // substrings of the error, in order; nil: valid
	}{
		{"valid", minimal + "http:\n  listen: \":9090\"\n  admin_token: ${TOKEN}\n", nil},
		{"type error", minimal + "models:\n  m:\n    provider: echo\n    max_tokens: lots\n",
			[]string{`config.yaml:6: models.m.max_tokens: expected an integer, got "lots"`}},
		{"syntax error", minimal + "models:\n  m: [echo\n", []string{"config.yaml:4: invalid YAML"}},
		{"unset variable", minimal + "http:\n  listen: \":9090\"\n  admin_token: ${NOPE}\n",
			[]string{"config.yaml:5: http.admin_token: environment variable NOPE is not set"}},
		{"validation, secret masked", minimal + "http:\n  admin_token: ${TOKEN}\n",
			[]string{"config.yaml:4: http.admin_token: has no effect without http.listen"}},
		{"traces.retention zero", minimal + "traces:\n  retention: 0s\n",
			[]string{"config.yaml:4: traces.retention: must be positive"}},
		{"several", minimal + "log:\n  level: loud\ntraces:\n  retention: -1h\n",
			[]string{"config.yaml:4: log.level: must be one of", "config.yaml:6: traces.retention: must be positive"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := config.Check([]byte(tt.src), "config.yaml", fakeEnv(env))
			if tt.want == nil {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check succeeded, want errors")
			}
			var list config.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error is %T, want ErrorList", err)
			}
			msg := err.Error()
			if strings.Contains(msg, env["TOKEN"]) {
				t.Errorf("error shows the secret: %s", msg)
			}
			at := 0
			for _, w := range tt.want {
				i := strings.Index(msg[at:], w)
				if i < 0 {
					t.Fatalf("error lacks %q (in order):\n%s", w, msg)
				}
				at += i + len(w)
			}
		})
	}
}

func TestSecretKeyPaths(t *testing.T) {
	got := config.SecretKeyPaths()
	for _, want := range []string{
		"database.uri", "matrix.registration.shared_secret", "matrix.registration.token",
		"matrix.registration.appservice.as_token", "matrix.registration.appservice.hs_token",
		"matrix.router.account.access_token", "matrix.router.account.password",
		"agents.*.account.password", "models.*.api_key", "http.admin_token",
		"mcp_servers.*.headers.*", "plugins[*].settings.**",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("SecretKeyPaths lacks %q: %q", want, got)
		}
	}
}

func TestMaskText(t *testing.T) {
	tests := []struct {
		name, src, want string
	}{
		{"plain", "http:\n  admin_token: abcdefghijklmnopq   # comment\n  listen: :1\n",
			"http:\n  admin_token: REDACTED   # comment\n  listen: :1\n"},
		{"double quoted", "http:\n  admin_token: \"a\\\"b c\" # x\n", "http:\n  admin_token: \"REDACTED\" # x\n"},
		{"single quoted", "http:\n  admin_token: 'it''s'\n", "http:\n  admin_token: 'REDACTED'\n"},
		{"reference kept", "http:\n  admin_token: ${TOKEN}\n", "http:\n  admin_token: ${TOKEN}\n"},
		{"reference with default kept", "models:\n  m: {api_key: \"${K:-}\"}\n", "models:\n  m: {api_key: \"${K:-}\"}\n"},
		{"empty and null kept", "models:\n  a: {api_key: \"\"}\n  b:\n    api_key:\n  c: {api_key: ~}\n",
			"models:\n  a: {api_key: \"\"}\n  b:\n    api_key:\n  c: {api_key: ~}\n"},
		{"flow mapping", "models:\n  m: {provider: openai, api_key: sk-123, model: x}\n",
			"models:\n  m: {provider: openai, api_key: REDACTED, model: x}\n"},
		{"literal block", "http:\n  admin_token: |\n    line one\n\n    line two\n\n  listen: :1\n",
			"http:\n  admin_token: REDACTED\n\n  listen: :1\n"},
		{"multi-line plain", "http:\n  admin_token: first\n    second\n  listen: :1\n",
			"http:\n  admin_token: REDACTED\n  listen: :1\n"},
		{"tag and anchor", "http:\n  admin_token: &t !!str secret-value\n",
			"http:\n  admin_token: &t !!str REDACTED\n"},
		{"alias to plugin settings", "plugins:\n  - builtin: x\n    settings: {shared: &k hunter2}\nmodels:\n  m: {api_key: *k}\n",
			"plugins:\n  - builtin: x\n    settings: {shared: &k REDACTED}\nmodels:\n  m: {api_key: *k}\n"},
		{"merge key", "models:\n  a: &base {provider: openai, api_key: sk-1}\n  b:\n    <<: *base\n    model: y\n",
			"models:\n  a: &base {provider: openai, api_key: REDACTED}\n  b:\n    <<: *base\n    model: y\n"},
		{"plugin settings", "plugins:\n  - path: ./p\n    settings:\n      api_key: abc\n      units: metric\n      credentials:\n        user: u\n        pass: [p1, \"p2\"]\n      token: ${T}\n",
			"plugins:\n  - path: ./p\n    settings:\n      api_key: REDACTED\n      units: metric\n      credentials:\n        user: REDACTED\n        pass: [REDACTED, \"REDACTED\"]\n      token: ${T}\n"},
		{"mcp headers", "mcp_servers:\n  gh:\n    url: https://x\n    headers:\n      Authorization: Bearer abc\n      X-Ref: \"Bearer ${T}\"\n",
			"mcp_servers:\n  gh:\n    url: https://x\n    headers:\n      Authorization: REDACTED\n      X-Ref: \"Bearer ${T}\"\n"},
		{"database uri, crlf, unicode", "database:\r\n  type: postgres # ü\r\n  uri: postgres://u:pw@h/db\r\n",
			"database:\r\n  type: postgres # ü\r\n  uri: REDACTED\r\n"},
		{"unicode before value", "agents:\n  é:\n    account: {user_id: \"@é:x\", password: pässwörd}\n",
			"agents:\n  é:\n    account: {user_id: \"@é:x\", password: REDACTED}\n"},
		{"integer secret", "http:\n  admin_token: 12345678901234567\n", "http:\n  admin_token: REDACTED\n"},
		{"unknown keys and invalid config kept", "nope: secret\nhttp:\n  admin_token: short\n",
			"nope: secret\nhttp:\n  admin_token: REDACTED\n"},
		{"empty", "", ""},
		{"comments only", "# nothing\n", "# nothing\n"},
		{"plugin short form", "plugins:\n  - ./p\n", "plugins:\n  - ./p\n"},
		{"secret of the wrong shape", "models:\n  a: {api_key: [x, y]}\n  b:\n    api_key: {k: v}\n",
			"models:\n  a: {api_key: [REDACTED, REDACTED]}\n  b:\n    api_key: {k: REDACTED}\n"},
		{"block scalars", "---\nhttp:\n  admin_token: >+\n    folded\n    text\n\n\nlog: {}\nmodels:\n  m:\n    api_key: |-\n      x",
			"---\nhttp:\n  admin_token: REDACTED\n\n\nlog: {}\nmodels:\n  m:\n    api_key: REDACTED"},
		{"sequences in settings", "plugins:\n- builtin: a\n  settings:\n    api_keys:\n    - a\n    - |\n      b\n    -   c   # d\n    other: 1\n",
			"plugins:\n- builtin: a\n  settings:\n    api_keys:\n    - REDACTED\n    - REDACTED\n    -   REDACTED   # d\n    other: 1\n"},
		{"quoted over lines", "models:\n  m:\n    api_key:   \"multi\n      line\"\n    model: 'x\n\n      y'\n",
			"models:\n  m:\n    api_key:   \"REDACTED\"\n    model: 'x\n\n      y'\n"},
		{"explicit key", "models:\n  m:\n    ? api_key\n    : a:b#c\n", "models:\n  m:\n    ? api_key\n    : REDACTED\n"},
		{"alias cycle", "a: &a [*a]\n", "a: &a [*a]\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.MaskText([]byte(tt.src))
			if err != nil {
				t.Fatalf("MaskText: %v", err)
			}
			if string(got) != tt.want {
				t.Fatalf("MaskText:\n%s\nwant:\n%s", got, tt.want)
			}
			back, err := config.Unmask(got, []byte(tt.src))
			if err != nil {
				t.Fatalf("Unmask: %v", err)
			}
			if string(back) != tt.src {
				t.Fatalf("Unmask(MaskText(x), x):\n%q\nwant:\n%q", back, tt.src)
			}
		})
	}
}

func TestMaskTextSyntaxError(t *testing.T) {
	_, err := config.MaskText([]byte("a: [b\n"))
	var list config.ErrorList
	if !errors.As(err, &list) || list[0].Line == 0 {
		t.Fatalf("MaskText error = %v, want an ErrorList with a line", err)
	}
}

// realistic is config.example.yaml with literal secrets in place of some
// ${VAR} references, and more secrets added.
func realistic(t *testing.T) ([]byte, []string) {
	t.Helper()
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src := string(data)
	secrets := []string{"shared-secret-3f9a1c", "sk-proj-openai-8d7e6f5a", "sk-ant-api03-xyz987", "admin-token-0123456789abcdef", "plugin-key-5e4d", "pg-password-77aa", "router-pass-w0rd"}
	for _, r := range []struct{ old, new string }{
		{"${MATRIX_REGISTRATION_SHARED_SECRET}", secrets[0]},
		{"${OPENAI_API_KEY:-}", secrets[1]},
		{"${ANTHROPIC_API_KEY:-}", `"` + secrets[2] + `"`},
		{"  # admin_token: ${HOOKROOM_ADMIN_TOKEN}", "  admin_token: '" + secrets[3] + "'"},
		{`  listen: ""`, `  listen: ":9090"`},
		{"      reason: Ask an operator first.\n", "      reason: Ask an operator first.\n      api_key: " + secrets[4] + "\n"},
		{"database:\n  type: sqlite\n", "database:\n  type: postgres\n  uri: postgres://hookroom:" + secrets[5] + "@localhost/hookroom\n"},
	} {
		if !strings.Contains(src, r.old) {
			t.Fatalf("config.example.yaml lacks %q", r.old)
		}
		src = strings.Replace(src, r.old, r.new, 1)
	}
	src += "\n# added for the test\nmcp_servers:\n  gh:\n    url: https://mcp.example.org/mcp\n    headers:\n      Authorization: \"Bearer ${GITHUB_MCP_TOKEN}\"\n" +
		"      X-Router: |\n        " + secrets[6] + "\n"
	return []byte(src), secrets
}

func TestMaskTextExample(t *testing.T) {
	src, secrets := realistic(t)
	if err := config.Check(src, "../config.example.yaml", fakeEnv(map[string]string{"GITHUB_MCP_TOKEN": "tok"})); err != nil {
		t.Fatalf("the realistic config does not load: %v", err)
	}
	masked, err := config.MaskText(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets {
		if strings.Contains(string(masked), s) {
			t.Errorf("masked text contains %q", s)
		}
	}
	for _, keep := range []string{"${GITHUB_MCP_TOKEN}", "# Copy it to config.yaml and adapt it.", "api_key: REDACTED", "admin_token: 'REDACTED'"} {
		if !strings.Contains(string(masked), keep) {
			t.Errorf("masked text lacks %q", keep)
		}
	}
	back, err := config.Unmask(masked, src)
	if err != nil {
		t.Fatal(err)
	}
	if string(back) != string(src) {
		t.Errorf("Unmask(MaskText(x), x) differs from x:\n%s", config.DiffText(src, back))
	}

	// An edit elsewhere keeps the secrets; a secret typed anew is taken.
	edited := strings.Replace(string(masked), "level: info", "level: debug", 1)
	edited = strings.Replace(edited, "api_key: REDACTED", "api_key: sk-new-key", 1)
	back, err = config.Unmask([]byte(edited), src)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(src), "level: info", "level: debug", 1)
	want = strings.Replace(want, "api_key: "+secrets[1], "api_key: sk-new-key", 1)
	if string(back) != want {
		t.Errorf("Unmask of an edit:\n%s", config.DiffText([]byte(want), back))
	}
}

func TestUnmaskErrors(t *testing.T) {
	orig := "models:\n  gpt: {provider: openai, model: m, api_key: sk-1}\nplugins:\n  - builtin: a\n    settings: {topic: REDACTED}\n"
	tests := []struct {
		name, edited string
		want         string // error substring; "" for success
		result       string
	}{
		{"unchanged", "models:\n  gpt: {provider: openai, model: m, api_key: REDACTED}\nplugins:\n  - builtin: a\n    settings: {topic: REDACTED}\n", "", orig},
		{"requoted", "models:\n  gpt: {provider: openai, model: m, api_key: \"REDACTED\"}\n", "",
			"models:\n  gpt: {provider: openai, model: m, api_key: sk-1}\n"},
		{"renamed parent", "models:\n  gpt4: {provider: openai, model: m, api_key: REDACTED}\n",
			"line 2: models.gpt4.api_key: holds the masked value REDACTED, but the file on disk has no secret at this key path", ""},
		{"moved to another key", "models:\n  gpt: {provider: openai, model: m, api_key: sk-1}\nrouter: {model: REDACTED}\n",
			"line 3: router.model: holds the masked value REDACTED", ""},
		{"literal REDACTED in the original kept", orig, "", orig},
		{"syntax error", "models: [\n", "invalid YAML", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := config.Unmask([]byte(tt.edited), []byte(orig))
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Unmask error = %v, want %q", err, tt.want)
				}
				if strings.Contains(err.Error(), "sk-1") {
					t.Errorf("error shows the secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.result {
				t.Errorf("Unmask = %q, want %q", got, tt.result)
			}
		})
	}
}

func TestWriteFile(t *testing.T) {
	const old, new = "log:\n  level: info\n", "log:\n  level: debug\n"
	tests := []struct {
		name    string
		mode    os.FileMode
		symlink bool
		base    string // the text the edit started from
		stale   bool
	}{
		{"replaces", 0o644, false, old, false},
		{"keeps mode", 0o600, false, old, false},
		{"follows a symlink", 0o640, true, old, false},
		{"stale", 0o644, false, "log:\n  level: warn\n", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			target := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(target, []byte(old), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, tt.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			path := target
			if tt.symlink {
				path = filepath.Join(dir, "link.yaml")
				if err := os.Symlink("config.yaml", path); err != nil {
					t.Fatal(err)
				}
			}
			before, _ := os.Stat(target)
			err := config.WriteFile(path, []byte(new), config.Hash([]byte(tt.base)))
			want := new
			if tt.stale {
				if !errors.Is(err, config.ErrStale) {
					t.Fatalf("WriteFile error = %v, want ErrStale", err)
				}
				if !strings.Contains(err.Error(), "config.yaml changed on disk since it was loaded; reload the page") {
					t.Errorf("message = %q", err)
				}
				want = old
			} else if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != want {
				t.Errorf("file holds %q, want %q", got, want)
			}
			info, err := os.Stat(target)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode() != tt.mode {
				t.Errorf("mode %v, want %v", info.Mode(), tt.mode)
			}
			if tt.stale && !info.ModTime().Equal(before.ModTime()) {
				t.Error("a stale write touched the file")
			}
			if tt.symlink {
				if fi, err := os.Lstat(path); err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Errorf("the symlink was replaced: %v %v", fi, err)
				}
			}
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".tmp") {
					t.Errorf("temporary file left: %s", e.Name())
				}
			}
		})
	}
}

func TestWriteFileMissing(t *testing.T) {
	err := config.WriteFile(filepath.Join(t.TempDir(), "config.yaml"), []byte("x: 1\n"), config.Hash(nil))
	if !errors.Is(err, config.ErrStale) {
		t.Fatalf("WriteFile of a missing file = %v, want ErrStale", err)
	}
}

func TestHash(t *testing.T) {
	if got := config.Hash([]byte("")); got != "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" {
		t.Errorf("Hash(\"\") = %s", got)
	}
}

func TestDiffText(t *testing.T) {
	tests := []struct {
		name, old, new, want string
	}{
		{"equal", "a\nb\n", "a\nb\n", ""},
		{"one line changed", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			"@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{"added at start", "a\nb\n", "x\na\nb\n", "@@ -1,2 +1,3 @@\n+x\n a\n b\n"},
		{"removed at end", "a\nb\nc\n", "a\nb\n", "@@ -1,3 +1,2 @@\n a\n b\n-c\n"},
		{"from empty", "", "a\nb\n", "@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"to empty", "a\n", "", "@@ -1 +0,0 @@\n-a\n"},
		{"no newline at end", "a\nb", "a\nc", "@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "one\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\ntwelve\n",
			"@@ -1,4 +1,4 @@\n-1\n+one\n 2\n 3\n 4\n@@ -9,4 +9,4 @@\n 9\n 10\n 11\n-12\n+twelve\n"},
		{"close changes merge", "1\n2\n3\n4\n5\n6\n7\n8\n", "one\n2\n3\n4\n5\n6\n7\neight\n",
			"@@ -1,8 +1,8 @@\n-1\n+one\n 2\n 3\n 4\n 5\n 6\n 7\n-8\n+eight\n"},
		{"interleaved", "a\nb\nc\nd\n", "a\nx\nc\ny\n", "@@ -1,4 +1,4 @@\n a\n-b\n+x\n c\n-d\n+y\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := config.DiffText([]byte(tt.old), []byte(tt.new)); got != tt.want {
				t.Errorf("DiffText:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}

func TestDiffTextLarge(t *testing.T) {
	// Every line differs on both sides: too large for the LCS table, shown
	// as replaced whole, quickly.
	var a, b strings.Builder
	for i := range 3000 {
		a.WriteString("old " + strings.Repeat("x", i%7) + "\n")
		b.WriteString("new " + strings.Repeat("y", i%5) + "\n")
	}
	start := time.Now()
	d := config.DiffText([]byte(a.String()), []byte(b.String()))
	if time.Since(start) > 5*time.Second {
		t.Errorf("DiffText took %v", time.Since(start))
	}
	if !strings.HasPrefix(d, "@@ -1,3000 +1,3000 @@\n-old \n") || strings.Count(d, "\n-") != 3000 || strings.Count(d, "\n+") != 3000 {
		t.Errorf("unexpected diff (%d bytes): %.200s", len(d), d)
	}
}

func TestTracesAndSessionTTL(t *testing.T) {
	c := mustParse(t, minimal, nil)
	if !c.Traces.IsEnabled() || c.Traces.Retention != config.DefaultTraceRetention || c.Traces.Retention.Std() != 14*24*time.Hour {
		t.Errorf("traces defaults = %+v", c.Traces)
	}
	if c.HTTP.SessionTTL.Std() != 12*time.Hour {
		t.Errorf("http.session_ttl default = %v", c.HTTP.SessionTTL)
	}
	c2 := mustParse(t, minimal+"http:\n  session_ttl: 1h\ntraces:\n  enabled: false\n  retention: 72h\n", nil)
	if c2.Traces.IsEnabled() || c2.Traces.Retention.Std() != 72*time.Hour || c2.HTTP.SessionTTL.Std() != time.Hour {
		t.Errorf("traces = %+v, session_ttl = %v", c2.Traces, c2.HTTP.SessionTTL)
	}
	ch := config.Diff(c, c2)
	if !ch.Traces || !ch.SessionTTL || ch.HTTPListen || ch.AdminToken {
		t.Errorf("Diff = %+v", ch)
	}
	if s := ch.String(); !strings.Contains(s, "traces") || !strings.Contains(s, "http.session_ttl") {
		t.Errorf("Changes.String() = %q", s)
	}
	if ch := config.Diff(c, mustParse(t, minimal+"traces: {enabled: true, retention: 336h}\n", nil)); !ch.IsEmpty() {
		t.Errorf("explicit defaults differ: %+v", ch)
	}
	cl := c2.Clone()
	*cl.Traces.Enabled = true
	if c2.Traces.IsEnabled() {
		t.Error("Clone shares traces.enabled")
	}

	for _, tt := range []struct{ src, want string }{
		{"traces:\n  retention: 0s\n", "config.yaml:4: traces.retention: must be positive, not 0s"},
		{"traces:\n  retention:\n", "config.yaml:4: traces.retention: must be positive"},
		{"traces:\n  retention: -5m\n", "config.yaml:4: traces.retention: must be positive, not -5m0s"},
		{"traces:\n  retention: 14d\n", "config.yaml:4: traces.retention: expected a duration"},
		{"traces:\n  enabled: nope\n", "config.yaml:4: traces.enabled: expected true or false"},
		{"traces:\n  keep: 1h\n", "config.yaml:4: traces.keep: unknown key"},
		{"http:\n  session_ttl: -1h\n", "config.yaml:4: http.session_ttl: must be positive"},
	} {
		errs := parseErrors(t, minimal+tt.src, nil)
		if len(errs) != 1 || !strings.HasPrefix(errs[0], tt.want) {
			t.Errorf("%q: errors %q, want %q", tt.src, errs, tt.want)
		}
	}
}

// FuzzMaskText checks that masking never panics and that unmasking the
// masked text gives back the original, byte for byte.
func FuzzMaskText(f *testing.F) {
	for _, s := range []string{
		"http:\n  admin_token: abc # c\n", "models: {m: {api_key: 'x''y', model: z}}\n",
		"plugins:\n- settings:\n    token: |\n      a\n    k: [1, 2]\n", "a: &x b\nhttp: {admin_token: *x}\n",
		"database:\n  uri: \"p\\\"q\"\n", "models:\n  m:\n    api_key: one\n      two\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		masked, err := config.MaskText(src)
		if err != nil {
			return
		}
		back, err := config.Unmask(masked, src)
		if err != nil {
			if strings.Contains(err.Error(), "duplicate key") {
				return
			}
			t.Fatalf("Unmask(MaskText(%q)) = %q: %v", src, masked, err)
		}
		if string(back) != string(src) {
			t.Fatalf("Unmask(MaskText(%q)) = %q, masked %q", src, back, masked)
		}
	})
}
