package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
)

// appServiceConfig is a configuration with two agents, one of them an
// existing account; registration is put under matrix.registration.
func appServiceConfig(t *testing.T, registration string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	text := "matrix:\n  homeserver: http://127.0.0.1:8008\n  server_name: example.org\n" + registration +
		"models:\n  default: {provider: echo}\nagents:\n  assistant: {}\n  ext:\n    account: {user_id: \"@ext:example.org\", password: pw}\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func readRegistration(t *testing.T, data []byte) *matrixio.AppServiceRegistration {
	t.Helper()
	var r matrixio.AppServiceRegistration
	if err := yaml.Unmarshal(data, &r); err != nil {
		t.Fatalf("the registration is not YAML: %v\n%s", err, data)
	}
	return &r
}

// The first run generates the tokens, writes the file (0600) and adds the
// tokens to the env file; once config.yaml reads them from there, running
// it again gives the same file and prints no token.
func TestAppServiceRegistrationCommand(t *testing.T) {
	t.Setenv("HOOKROOM_AS_TOKEN", "")
	t.Setenv("HOOKROOM_HS_TOKEN", "")
	cfgPath := appServiceConfig(t, "")
	dir := filepath.Dir(cfgPath)
	out, envPath := filepath.Join(dir, "registration.yaml"), filepath.Join(dir, "hookroom.env")
	if err := os.WriteFile(envPath, []byte("OTHER=1"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("appservice", "registration", "--config", cfgPath, "--out", out, "--env", envPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %v, want 0600", out, fi.Mode().Perm())
	}
	first, _ := os.ReadFile(out)
	reg := readRegistration(t, first)
	if reg.ID != "hookroom" || reg.SenderLocalpart != "router" || reg.URL != nil || reg.RateLimited {
		t.Errorf("registration = %+v", reg)
	}
	for user, want := range map[id.UserID]bool{
		"@router:example.org": true, "@assistant:example.org": true,
		"@ext:example.org": false, "@someone:example.org": false,
	} {
		if reg.Covers(user) != want {
			t.Errorf("Covers(%s) = %v", user, !want)
		}
	}
	env := readEnvFile(t, envPath) // also checks mode 0600
	if env["OTHER"] != "1" || env["HOOKROOM_AS_TOKEN"] != reg.ASToken || env["HOOKROOM_HS_TOKEN"] != reg.HSToken || len(reg.ASToken) != 64 {
		t.Errorf("env file = %v, want the other line and the registration's tokens", env)
	}
	for _, want := range []string{"Wrote " + out, "app_service_config_files:", "config_files:", "The new tokens are in " + envPath,
		"as_token: ${HOOKROOM_AS_TOKEN}", "hookroom check --config"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout+stderr, reg.ASToken) {
		t.Error("the token was printed although it went to the env file")
	}

	// Again, with the tokens in config.yaml through the env file.
	cfgPath = appServiceConfig(t, "  registration:\n    appservice:\n      as_token: ${HOOKROOM_AS_TOKEN}\n      hs_token: ${HOOKROOM_HS_TOKEN}\n")
	for k, v := range env {
		t.Setenv(k, v)
	}
	code, stdout, stderr = runCLI("appservice", "registration", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("second run: exit %d: %s", code, stderr)
	}
	if stdout != string(first) {
		t.Errorf("second run printed another file:\n%s\nwant\n%s", stdout, first)
	}
	if strings.Contains(stderr, reg.ASToken) || strings.Contains(stderr, "new tokens") {
		t.Errorf("second run's steps:\n%s", stderr)
	}
	if code, _, stderr := runCLI("check", "--config", cfgPath); code != 0 {
		t.Errorf("hookroom check on the appservice configuration: exit %d: %s", code, stderr)
	}
}

// Without --env the new tokens are printed once, in the steps (stderr when
// the file itself goes to stdout).
func TestAppServiceRegistrationPrintsNewTokens(t *testing.T) {
	code, stdout, stderr := runCLI("appservice", "registration", "--config", appServiceConfig(t, "  registration:\n    token: abc\n"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	reg := readRegistration(t, []byte(stdout))
	for _, want := range []string{"HOOKROOM_AS_TOKEN=" + reg.ASToken, "HOOKROOM_HS_TOKEN=" + reg.HSToken, "Remove matrix.registration.shared_secret and token"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("steps lack %q:\n%s", want, stderr)
		}
	}
}

func TestAppServiceRegistrationWithPrefix(t *testing.T) {
	t.Setenv("HR_AS", "as-token-value")
	cfgPath := filepath.Join(t.TempDir(), "config.yaml")
	text := "matrix:\n  homeserver: http://127.0.0.1:8008\n  server_name: example.org\n" +
		"  registration:\n    appservice: {as_token: \"${HR_AS}\", id: hr, user_prefix: hr_}\n  router: {username: hr_router}\n" +
		"models:\n  default: {provider: echo}\nagents:\n  assistant: {username: hr_assistant}\n"
	if err := os.WriteFile(cfgPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI("appservice", "registration", "--config", cfgPath)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	reg := readRegistration(t, []byte(stdout))
	if reg.ID != "hr" || reg.ASToken != "as-token-value" || len(reg.HSToken) != 64 || reg.Namespaces.Users[0].Regex != `^@hr_.*:example\.org$` {
		t.Errorf("registration = %+v", reg)
	}
	if !strings.Contains(stderr, "HOOKROOM_HS_TOKEN=") || strings.Contains(stderr, "HOOKROOM_AS_TOKEN=") {
		t.Errorf("only the generated hs_token is new:\n%s", stderr)
	}
	if strings.Contains(stderr, "After adding an agent") {
		t.Errorf("with a prefix, agents are added without a new file:\n%s", stderr)
	}
}

func TestAppServiceRegistrationErrors(t *testing.T) {
	dir := t.TempDir()
	noServer := filepath.Join(dir, "no-server.yaml")
	if err := os.WriteFile(noServer, []byte("matrix:\n  homeserver: http://127.0.0.1:8008\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	envPath := filepath.Join(dir, "hookroom.env")
	if err := os.WriteFile(envPath, []byte("export HOOKROOM_AS_TOKEN=old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "registration.yaml")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no subcommand", nil, 2, "Usage: hookroom appservice registration"},
		{"unknown subcommand", []string{"register"}, 2, "Usage: hookroom appservice registration"},
		{"extra argument", []string{"registration", "--config", noServer, "x"}, 2, `unexpected argument "x"`},
		{"no server name", []string{"registration", "--config", noServer}, 1, "matrix.server_name is required"},
		{"token already in the env file", []string{"registration", "--config", appServiceConfig(t, ""), "--out", out, "--env", envPath}, 1,
			"hookroom.env already sets HOOKROOM_AS_TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runCLI(append([]string{"appservice"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d with %q", code, stderr, tt.code, tt.want)
			}
		})
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the registration was written although its tokens could not be stored: %v", err)
	}
	if code, stdout, _ := runCLI("appservice", "help"); code != 0 || !strings.Contains(stdout, "Usage: hookroom appservice registration") {
		t.Errorf("help: exit %d:\n%s", code, stdout)
	}
}
