package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
)

// fakeHomeserver answers what hookroom init asks: the versions, the
// signing keys (naming the server) and, unless noAdmin, the shared-secret
// registration nonce.
func fakeHomeserver(t *testing.T, noAdmin bool) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /_matrix/client/versions", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"versions":["v1.1","v1.11","v1.2"]}`))
	})
	mux.HandleFunc("GET /_matrix/key/v2/server", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"server_name":"example.org"}`))
	})
	mux.HandleFunc("GET /_synapse/admin/v1/register", func(w http.ResponseWriter, _ *http.Request) {
		if noAdmin {
			http.Error(w, `{"errcode":"M_UNRECOGNIZED","error":"Unrecognized request"}`, http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"nonce":"abc"}`))
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs
}

// runInitTest runs hookroom init with args (never interactive) and
// returns its exit code, stdout and stderr.
func runInitTest(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := runInit(context.Background(), args, initIO{
		stdin:     strings.NewReader(""),
		lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
		stdout:    &stdout,
		stderr:    &stderr,
	})
	return code, stdout.String(), stderr.String()
}

// readEnvFile reads hookroom.env's KEY=value lines (values possibly single
// quoted) and checks that it is private.
func readEnvFile(t testing.TB, path string) map[string]string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: line %q is not KEY=value", path, line)
		}
		if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			v = strings.ReplaceAll(v[1:len(v)-1], `'\''`, `'`)
		}
		env[k] = v
	}
	return env
}

const initSecret = "s3cret:with;shell&chars"

func TestInitWritesAValidConfig(t *testing.T) {
	hs := fakeHomeserver(t, false)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	code, stdout, stderr := runInitTest(t, map[string]string{"MY_SECRET": initSecret},
		"--homeserver", hs.URL+"/", "--secret-env", "MY_SECRET", "--invite", "@op:example.org", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("init exited %d: %s", code, stderr)
	}
	env := readEnvFile(t, filepath.Join(dir, initEnvFile))
	if env[envSharedSecret] != initSecret {
		t.Errorf("%s in hookroom.env is %q, want the secret", envSharedSecret, env[envSharedSecret])
	}
	if tok := env[envAdminToken]; len(tok) != 64 {
		t.Errorf("admin token %q is not 32 bytes in hex", tok)
	}
	for _, secret := range []string{initSecret, env[envAdminToken]} {
		if strings.Contains(stdout+stderr, secret) {
			t.Errorf("init printed a secret:\n%s%s", stdout, stderr)
		}
	}
	for _, want := range []string{"server name example.org", "set -a; . " + filepath.Join(dir, initEnvFile) + "; set +a",
		"hookroom check --config " + cfgPath, "hookroom run --config " + cfgPath, "http://127.0.0.1:8080/", "Matrix v1.11"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}

	data, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.ReplaceAll(string(data), hs.URL, "http://HOMESERVER")
	golden := filepath.Join("testdata", "init", "config.yaml.golden")
	if os.Getenv("HOOKROOM_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("config.yaml differs from %s (HOOKROOM_UPDATE_GOLDEN=1 rewrites it):\n%s", golden, got)
	}
	cfg, err := config.Parse(data, cfgPath, config.WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if err != nil {
		t.Fatalf("the config does not parse: %v", err)
	}
	if cfg.Matrix.ServerName != "example.org" || cfg.Matrix.Registration.SharedSecret.Reveal() != initSecret ||
		cfg.HTTP.AdminToken.Reveal() != env[envAdminToken] || len(cfg.Authorization.GlobalUsers) != 1 {
		t.Errorf("config: server name %q, global users %v", cfg.Matrix.ServerName, cfg.Authorization.GlobalUsers)
	}
}

func TestInitModelsAndToken(t *testing.T) {
	hs := fakeHomeserver(t, true) // no shared-secret endpoint: a registration token needs none
	for _, model := range []string{"openai", "anthropic"} {
		dir := t.TempDir()
		cfgPath := filepath.Join(dir, "config.yaml")
		code, stdout, stderr := runInitTest(t, nil, "--homeserver", hs.URL, "--server-name", "chat.example.org",
			"--accounts", "registration-token", "--registration-token", "tok-123", "--model", model, "--config", cfgPath)
		if code != 0 {
			t.Fatalf("%s: init exited %d: %s", model, code, stderr)
		}
		if strings.Contains(stdout+stderr, "tok-123") {
			t.Errorf("init printed the token:\n%s%s", stdout, stderr)
		}
		env := readEnvFile(t, filepath.Join(dir, initEnvFile))
		keyEnv := strings.ToUpper(model) + "_API_KEY"
		data, _ := os.ReadFile(cfgPath)
		if !strings.Contains(string(data), "api_key: ${"+keyEnv+"}") {
			t.Errorf("%s: config lacks the api_key reference:\n%s", model, data)
		}
		lookup := func(k string) (string, bool) {
			if k == keyEnv {
				return "key", true
			}
			v, ok := env[k]
			return v, ok
		}
		cfg, err := config.Parse(data, cfgPath, config.WithLookupEnv(lookup))
		if err != nil {
			t.Fatalf("%s: the config does not parse: %v", model, err)
		}
		if cfg.Matrix.Registration.Token.Reveal() != "tok-123" || cfg.Matrix.ServerName != "chat.example.org" {
			t.Errorf("%s: token or server name wrong", model)
		}
	}
}

func TestInitRefusesToOverwrite(t *testing.T) {
	hs := fakeHomeserver(t, false)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	args := []string{"--homeserver", hs.URL, "--shared-secret", "x", "--config", cfgPath}
	if code, _, stderr := runInitTest(t, nil, args...); code != 0 {
		t.Fatalf("init exited %d: %s", code, stderr)
	}
	before := readEnvFile(t, filepath.Join(dir, initEnvFile))
	code, _, stderr := runInitTest(t, nil, args...)
	if code == 0 || !strings.Contains(stderr, cfgPath+" exists") || !strings.Contains(stderr, "--force") {
		t.Errorf("second init exited %d: %s", code, stderr)
	}
	// The env file alone is protected too.
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runInitTest(t, nil, args...)
	if envPath := filepath.Join(dir, initEnvFile); code == 0 || !strings.Contains(stderr, envPath+" exists") {
		t.Errorf("init over an env file exited %d: %s", code, stderr)
	}
	if _, err := os.Stat(cfgPath); err == nil {
		t.Error("a refused init wrote config.yaml")
	}
	if got := readEnvFile(t, filepath.Join(dir, initEnvFile)); got[envAdminToken] != before[envAdminToken] {
		t.Error("a refused init changed hookroom.env")
	}
	if code, _, stderr := runInitTest(t, nil, append(args, "--force")...); code != 0 {
		t.Fatalf("init --force exited %d: %s", code, stderr)
	}
	if got := readEnvFile(t, filepath.Join(dir, initEnvFile)); got[envAdminToken] == before[envAdminToken] {
		t.Error("init --force kept the old hookroom.env")
	}
}

func TestInitNeedsHomeserverAndSecret(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	code, _, stderr := runInitTest(t, nil, "--config", cfgPath)
	if code == 0 || !strings.Contains(stderr, "--homeserver is required") || !strings.Contains(stderr, "--secret-env") {
		t.Errorf("init without --homeserver exited %d: %s", code, stderr)
	}
	code, _, stderr = runInitTest(t, nil, "--homeserver", "http://127.0.0.1:1", "--config", cfgPath)
	if code == 0 || !strings.Contains(stderr, "--secret-env NAME") || !strings.Contains(stderr, "--shared-secret") {
		t.Errorf("init without a secret exited %d: %s", code, stderr)
	}
	code, _, stderr = runInitTest(t, nil, "--homeserver", "http://127.0.0.1:1", "--secret-env", "UNSET_VAR", "--config", cfgPath)
	if code == 0 || !strings.Contains(stderr, "UNSET_VAR") {
		t.Errorf("init with an unset --secret-env exited %d: %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a failed init wrote %v", entries)
	}
}

func TestInitUnreachableHomeserver(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	l.Close()
	dir := t.TempDir()
	code, stdout, stderr := runInitTest(t, nil, "--homeserver", url, "--shared-secret", "topsecret",
		"--config", filepath.Join(dir, "config.yaml"))
	if code == 0 || !strings.Contains(stderr, "the homeserver at "+url+" does not answer /_matrix/client/versions") {
		t.Errorf("init against a closed port exited %d: %s", code, stderr)
	}
	if strings.Contains(stdout+stderr, "topsecret") {
		t.Errorf("init printed the secret: %s", stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a failed init wrote %v", entries)
	}
}

func TestInitNeedsSharedSecretRegistration(t *testing.T) {
	hs := fakeHomeserver(t, true)
	dir := t.TempDir()
	code, _, stderr := runInitTest(t, nil, "--homeserver", hs.URL, "--shared-secret", "x",
		"--config", filepath.Join(dir, "config.yaml"))
	if code == 0 || !strings.Contains(stderr, "does not answer shared-secret registration") || !strings.Contains(stderr, hs.URL) {
		t.Errorf("init without the admin endpoint exited %d: %s", code, stderr)
	}
}

func TestInitThroughRun(t *testing.T) {
	hs := fakeHomeserver(t, false)
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	t.Setenv("HOOKROOM_TEST_INIT_SECRET", "abc")
	code := run([]string{"init", "--homeserver", hs.URL, "--secret-env", "HOOKROOM_TEST_INIT_SECRET",
		"--invite", "@op:example.org", "--config", filepath.Join(dir, "config.yaml")}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("hookroom init exited %d: %s", code, stderr.String())
	}
	if code := run([]string{"init", "--bogus"}, &stdout, &stderr); code != 2 {
		t.Errorf("hookroom init --bogus exited %d, want 2", code)
	}
}

func TestInitDataDir(t *testing.T) {
	hs := fakeHomeserver(t, false)
	dataDir := filepath.Join(t.TempDir(), "var lib", "hookroom${X}") // a space and a ${: written quoted, kept literal
	for _, tc := range []struct {
		name, flag, wantLine, wantDir string
	}{
		{"default", "", "data_dir: ./data\n", "data"},
		{"absolute", "/var/lib/hookroom", "data_dir: /var/lib/hookroom\n", "/var/lib/hookroom"},
		{"relative", "../state", "data_dir: ../state\n", "../state"},
		{"quoted", dataDir, "data_dir: " + yamlString(dataDir) + "\n", dataDir},
		{"no slash", "true", "data_dir: \"true\"\n", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			cfgPath := filepath.Join(dir, "config.yaml")
			args := []string{"--homeserver", hs.URL, "--shared-secret", "x", "--config", cfgPath}
			if tc.flag != "" {
				args = append(args, "--data-dir", tc.flag)
			}
			code, stdout, stderr := runInitTest(t, nil, args...)
			if code != 0 {
				t.Fatalf("init exited %d: %s", code, stderr)
			}
			data, err := os.ReadFile(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), "\n"+tc.wantLine) {
				t.Errorf("config.yaml lacks %q:\n%s", tc.wantLine, data)
			}
			env := readEnvFile(t, filepath.Join(dir, initEnvFile))
			cfg, err := config.Parse(data, cfgPath, config.WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
			if err != nil {
				t.Fatalf("the config does not parse: %v", err)
			}
			want := tc.wantDir
			if !filepath.IsAbs(want) {
				want = filepath.Join(dir, want)
			}
			if cfg.DataDir != want {
				t.Errorf("data_dir resolves to %q, want %q", cfg.DataDir, want)
			}
			if !strings.Contains(stdout, "keeps its database in "+want+" ") {
				t.Errorf("stdout does not name the data directory %s:\n%s", want, stdout)
			}
			if _, err := os.Stat(want); err == nil && tc.name != "absolute" {
				t.Errorf("init created %s: hookroom run does", want)
			}
		})
	}

	dir := t.TempDir()
	code, _, stderr := runInitTest(t, nil, "--homeserver", hs.URL, "--shared-secret", "x",
		"--config", filepath.Join(dir, "config.yaml"), "--data-dir", " ")
	if code == 0 || !strings.Contains(stderr, "--data-dir is empty") {
		t.Errorf("init --data-dir ' ' exited %d: %s", code, stderr)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused init wrote %v", entries)
	}
}

// --accounts appservice needs no secret: init generates both tokens into
// hookroom.env, points config.yaml at them and writes the registration
// file the homeserver loads, with the same tokens and a namespace holding
// exactly the router and the agent.
func TestInitAppService(t *testing.T) {
	hs := fakeHomeserver(t, true) // no shared-secret endpoint: the appservice needs none
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	code, stdout, stderr := runInitTest(t, nil, "--homeserver", hs.URL, "--accounts", "appservice",
		"--agent", "helper", "--router", "hookbot", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("init exited %d: %s", code, stderr)
	}
	env := readEnvFile(t, filepath.Join(dir, initEnvFile))
	as, hsTok := env[envASToken], env[envHSToken]
	if len(as) != 64 || len(hsTok) != 64 || as == hsTok {
		t.Fatalf("tokens in hookroom.env: as %d chars, hs %d chars, equal %v", len(as), len(hsTok), as == hsTok)
	}
	regPath := filepath.Join(dir, initRegistrationFile)
	fi, err := os.Stat(regPath)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", regPath, fi.Mode().Perm())
	}
	reg, _ := os.ReadFile(regPath)
	for _, want := range []string{"as_token: " + as, "hs_token: " + hsTok, "sender_localpart: hookbot",
		`^@(?:helper|hookbot):example\.org$`} {
		if !strings.Contains(string(reg), want) {
			t.Errorf("the registration lacks %q:\n%s", want, reg)
		}
	}
	for _, secret := range []string{as, hsTok, env[envAdminToken]} {
		if strings.Contains(stdout+stderr, secret) {
			t.Errorf("init printed a secret:\n%s%s", stdout, stderr)
		}
	}
	for _, want := range []string{regPath, "app_service_config_files", "app_service_api"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	data, _ := os.ReadFile(cfgPath)
	cfg, err := config.Parse(data, cfgPath, config.WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if err != nil {
		t.Fatalf("the config does not parse: %v", err)
	}
	r := cfg.Matrix.Registration
	if r.AppService.ASToken.Reveal() != as || r.AppService.HSToken.Reveal() != hsTok || r.SharedSecret.IsSet() || r.Token.IsSet() {
		t.Errorf("config.yaml's registration is not the appservice's tokens alone:\n%s", data)
	}

	// A second run refuses to overwrite the registration too.
	if err := os.Remove(cfgPath); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, initEnvFile)); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = runInitTest(t, nil, "--homeserver", hs.URL, "--accounts", "appservice", "--config", cfgPath)
	if code == 0 || !strings.Contains(stderr, regPath+" exists") {
		t.Errorf("init over a registration file exited %d: %s", code, stderr)
	}
	// And a secret makes no sense with it.
	code, _, stderr = runInitTest(t, nil, "--homeserver", hs.URL, "--accounts", "appservice", "--shared-secret", "x",
		"--config", filepath.Join(t.TempDir(), "config.yaml"))
	if code == 0 || !strings.Contains(stderr, "needs no secret") {
		t.Errorf("init --accounts appservice with a shared secret exited %d: %s", code, stderr)
	}
}
