package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
	j, _ := json.Marshal(s)
	return map[string]string{
		"plain":      s,
		"base64":     base64.StdEncoding.EncodeToString([]byte(s)),
		"base64url":  base64.RawURLEncoding.EncodeToString([]byte(s)),
		"url-query":  url.QueryEscape(s),
		"url-path":   url.PathEscape(s),
		"json":       strings.Trim(string(j), `"`),
		"hex":        hex.EncodeToString([]byte(s)),
		"upper-case": strings.ToUpper(s),
	}
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

// copyDir copies the files of src (not recursive) into dst.
func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// runCLI runs the hookroom command line in-process and returns its exit
// code, stdout and stderr.
func runCLI(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

// Secrets from ${VAR} — the registration shared secret, a model API key, a
// token in a model's base URL, plugin settings, a process plugin's
// allowlisted environment variable, a PostgreSQL password, and values in
// places where validation fails — appear in no output of hookroom check,
// hooks, tools, version and run (the log included, at debug level), on a
// good configuration and on broken ones: values that fail validation, a
// plugin asking for one of hookroom's own secrets, a database that cannot
// be reached, and a plugin that writes the variables it got to stderr as
// it starts. bot's TestSecretsStayOutOfLogsAndRooms covers the running
// server.
func TestSecretsStayOutOfCLIOutput(t *testing.T) {
	secrets := map[string]string{
		"HS_SECRET":       secretValue(t, "hrhs"),
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
	dir := t.TempDir()
	pluginDir := filepath.Join(dir, "plugins", "spy")
	copyDir(t, "testdata/plugins/spy", pluginDir)
	copyDir(t, "../../plugins/sdk/python", pluginDir)

	head := fmt.Sprintf(`data_dir: ./data
log:
  level: debug
matrix:
  homeserver: http://127.0.0.1:%d
  server_name: localhost
  registration:
    shared_secret: ${HS_SECRET}
`, freePort(t))
	agentURL := fmt.Sprintf("http://127.0.0.1:%d/v1", freePort(t))
	good := fmt.Sprintf(`models:
  agent:
    provider: openai
    base_url: %s
    model: agent-model
    api_key: ${HR_API_KEY}
  default:
    provider: echo
  down:
    provider: openai
    base_url: http://127.0.0.1:%d/${HR_URL_TOKEN}/v1
    model: down-model
rooms:
  main:
    id: "!main:localhost"
authorization:
  global_users: ["@alice:localhost"]
agents:
  helper:
    username: helper
    rooms: [main]
    model: agent
  prober:
    username: prober
    model: down
    rooms: [main]
plugins:
  - path: ./plugins/spy
    settings:
      api_token: ${HR_PLUGIN_TOKEN}
      endpoint: ${HR_PLUGIN_NOTE}
    env: [HR_PLUGIN_ENV]
`, agentURL, freePort(t))
	// Validation fails on each of these; the values must not show.
	invalid := strings.NewReplacer(
		"  main:\n", "  bad:\n    alias: ${HR_BAD_ALIAS}\n  main:\n",
		"    base_url: "+agentURL+"\n", "    base_url: ${HR_BAD_URL}\n",
		"  down:\n    provider: openai\n", "  down:\n    provider: ${HR_BAD_ENUM}\n",
		"  helper:\n    username: helper\n", "  helper:\n    username: ${HR_BAD_USER}\n",
	).Replace(good) + "hooks:\n  max_depth: ${HR_BAD_TYPE}\n"
	if strings.Count(invalid, "${HR_BAD_") != 5 {
		t.Fatalf("the broken configuration lacks a broken value:\n%s", invalid)
	}
	// Valid, but the plugin loader refuses to hand a server secret to a
	// plugin.
	leakyEnv := strings.Replace(good, "env: [HR_PLUGIN_ENV]", "env: [HR_PLUGIN_ENV, HR_API_KEY]", 1)

	goodPath := filepath.Join(dir, "good.yaml")
	writeFile(t, goodPath, head+good)
	brokenPath := filepath.Join(dir, "broken.yaml")
	writeFile(t, brokenPath, head+invalid)
	leakyPath := filepath.Join(dir, "leaky.yaml")
	writeFile(t, leakyPath, head+leakyEnv)
	// A database that cannot be reached, with a password in its URI.
	dbPath := filepath.Join(dir, "db.yaml")
	writeFile(t, dbPath, strings.Replace(head, "data_dir: ./data\n", fmt.Sprintf(
		"data_dir: ./data-db\ndatabase:\n  type: postgres\n  uri: postgres://hookroom:${HR_DB_PASSWORD}@127.0.0.1:%d/hookroom?sslmode=disable\n", freePort(t)), 1)+good)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"check", "--config", goodPath}, 0, "is valid"},
		{[]string{"hooks", "--config", goodPath}, 0, "spy"},
		{[]string{"hooks", "--json", "--config", goodPath}, 0, "spy"},
		{[]string{"tools", "--config", goodPath}, 0, "helper"},
		{[]string{"tools", "--json", "--config", goodPath}, 0, "prober"},
		{[]string{"version"}, 0, "hookroom"},
		{[]string{"check", "--config", brokenPath}, 1, "${HR_BAD_ALIAS}"},
		{[]string{"hooks", "--config", brokenPath}, 1, "${HR_BAD_USER}"},
		{[]string{"run", "--config", brokenPath}, 1, "${HR_BAD_TYPE}"},
		{[]string{"check", "--config", leakyPath}, 1, "HR_API_KEY holds one of hookroom's own secrets"},
		{[]string{"run", "--config", dbPath}, 1, "failed to open postgres database"},
		{[]string{"plugin", "list", "--config", goodPath}, 0, "spy"},
	} {
		code, stdout, stderr := runCLI(tc.args...)
		name := "hookroom " + strings.Join(tc.args, " ")
		if code != tc.code || !strings.Contains(stdout+stderr, tc.want) {
			t.Errorf("%s: exit %d (want %d), output lacks %q:\n%s%s", name, code, tc.code, tc.want, stdout, stderr)
		}
		leakCheck(t, name, stdout+stderr, secrets)
	}
}
