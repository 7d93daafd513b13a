package hstest

import (
	"bytes"
	"context"
	_ "embed"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// NioPython is the interpreter RunNio uses: Debian's, which sees the python3-matrix-nio package
// (a pyenv or venv python3 on PATH does not).
const NioPython = "/usr/bin/python3"

//go:embed hsnio.py
var hsnioSource []byte

// RunNio runs a Python program with Debian's python3-matrix-nio, an independent Matrix client,
// and returns its standard output. script is either the path of a .py file or the program's
// source; args become sys.argv[1:]. The helper module hsnio (new_client, login, sync_until, fail)
// is importable. The test fails with the program's stderr when it exits non-zero or runs longer
// than two minutes. Pass secrets (passwords, tokens) as args, never inside printed output.
func RunNio(t testing.TB, script string, args ...string) string {
	t.Helper()
	lib := t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "hsnio.py"), hsnioSource, 0o600); err != nil {
		t.Fatalf("hstest: failed to write hsnio.py: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	var cmd *exec.Cmd
	if !strings.Contains(script, "\n") && strings.HasSuffix(script, ".py") {
		cmd = exec.CommandContext(ctx, NioPython, append([]string{script}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, NioPython, append([]string{"-"}, args...)...)
		cmd.Stdin = strings.NewReader(script)
	}
	cmd.Env = append(os.Environ(), "PYTHONPATH="+lib, "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1")
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		hint := ""
		if strings.Contains(stderr.String(), "No module named 'nio'") {
			hint = "\n(python3-matrix-nio is missing: ./scripts/test.sh installs it, or apt-get install -y python3-matrix-nio)"
		}
		t.Fatalf("hstest: nio program failed: %v%s\nstderr:\n%s\nstdout:\n%s", err, hint, stderr.String(), stdout.String())
	}
	return stdout.String()
}
