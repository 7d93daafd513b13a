package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/matrixio"
)

// recoveryKeyRE finds a recovery key in output.
var recoveryKeyRE = regexp.MustCompile(`Es[1-9A-HJ-NP-Za-km-z]{2}( [1-9A-HJ-NP-Za-km-z]{4}){11}`)

func TestE2EERecoveryKey(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	envPath := filepath.Join(dir, "hookroom.env")
	if err := os.WriteFile(envPath, []byte("HOOKROOM_ADMIN_TOKEN=abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e2ee := func(stdin string, args ...string) (int, string, string) {
		var out, errOut strings.Builder
		code := runE2EE(append([]string{"recovery-key", "--config", cfgPath}, args...),
			e2eeIO{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut})
		return code, out.String(), errOut.String()
	}
	envKey := func() string {
		t.Helper()
		raw, err := os.ReadFile(envPath)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(raw), "HOOKROOM_ADMIN_TOKEN=abc\n") {
			t.Errorf("env file lost its other lines:\n%s", raw)
		}
		if n := strings.Count(string(raw), envRecoveryKey+"="); n != 1 {
			t.Fatalf("env file sets %s %d times:\n%s", envRecoveryKey, n, raw)
		}
		return recoveryKeyRE.FindString(string(raw))
	}

	// A new key: written, printed once, valid; the hint names config.yaml.
	code, out, errOut := e2ee("")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	key := envKey()
	if !matrixio.ValidRecoveryKey(key) || recoveryKeyRE.FindString(out) != key {
		t.Fatalf("printed %q, env file has %q; want the same valid key", out, key)
	}
	if !strings.Contains(out, "recovery_key: ${HOOKROOM_RECOVERY_KEY}") {
		t.Errorf("output does not say how config.yaml reads the key:\n%s", out)
	}
	if st, err := os.Stat(envPath); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("env file mode = %v, %v; want 0600", st.Mode().Perm(), err)
	}

	// Again: refused, the key is kept and not printed.
	code, out, errOut = e2ee("")
	if code != 1 || !strings.Contains(errOut, "already sets HOOKROOM_RECOVERY_KEY") || recoveryKeyRE.MatchString(out+errOut) {
		t.Errorf("second run: exit %d, out %q, err %q; want a refusal that shows no key", code, out, errOut)
	}
	if envKey() != key {
		t.Error("a refused run changed the key")
	}

	// --set with a saved key and --force replaces it, without printing it.
	saved, err := matrixio.NewRecoveryKey()
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = e2ee(saved+"\n", "--set", "--force")
	if code != 0 || envKey() != saved || strings.Contains(out, saved) || !strings.Contains(out, "replaces the previous key") {
		t.Errorf("--set --force: exit %d, out %q, err %q, env key %q; want %q written, not printed", code, out, errOut, envKey(), saved)
	}

	// --set with something else is refused and never echoed.
	code, _, errOut = e2ee("EsTnot a key\n", "--set", "--force")
	if code != 1 || strings.Contains(errOut, "EsTnot") || envKey() != saved {
		t.Errorf("--set with a malformed key: exit %d, err %q", code, errOut)
	}

	// A config that reads the key already needs no hint.
	if err := os.WriteFile(cfgPath, []byte("matrix:\n  encryption:\n    recovery_key: ${HOOKROOM_RECOVERY_KEY}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ = e2ee("", "--force"); code != 0 || strings.Contains(out, "Then set") {
		t.Errorf("with the config reading the key: exit %d, out %q", code, out)
	}

	if code := run([]string{"e2ee", "rotate"}, &strings.Builder{}, &strings.Builder{}); code != 2 {
		t.Errorf("hookroom e2ee rotate: exit %d, want 2", code)
	}
}
