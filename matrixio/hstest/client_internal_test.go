package hstest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestClientErrorsComeBack checks that each client answers a failing command with an error
// that says what failed, that a Go-side timeout does not confuse the next command, and that a
// dead client is reported with its exit status.
func TestClientErrorsComeBack(t *testing.T) {
	t.Parallel()
	for _, kind := range []ClientKind{Nio, JS} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			srv := Shared(t)
			u := srv.RegisterUser(t, "errors")
			c, err := launchClient(t, kind)
			if err != nil {
				t.Fatal(err)
			}
			before := []struct {
				cmd  string
				args map[string]any
				want string
			}{
				{"bogus", nil, "unknown command"},
				{"send", map[string]any{"room_id": "!r:localhost", "body": "x"}, "not logged in"},
			}
			for _, tc := range before {
				if err := c.do(tc.cmd, 10*time.Second, tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v, want one containing %q", tc.cmd, err, tc.want)
				}
			}
			if err := c.do("login", startTimeout, map[string]any{
				"url": srv.URL, "user_id": u.UserID, "password": "wrong-" + u.Password, "store_dir": t.TempDir(),
			}, nil); err == nil || !strings.Contains(err.Error(), "M_FORBIDDEN") {
				t.Errorf("login with a wrong password: error %v, want M_FORBIDDEN", err)
			}
			if err := c.do("login", startTimeout, map[string]any{
				"url": srv.URL, "user_id": u.UserID, "password": u.Password, "store_dir": t.TempDir(),
			}, nil); err != nil {
				t.Fatalf("login: %v", err)
			}
			after := []struct {
				cmd  string
				args map[string]any
				want string
			}{
				{"join", map[string]any{"room_id": "!nowhere:localhost"}, "join"},
				{"send", map[string]any{"room_id": "!nowhere:localhost", "body": "x"}, "not in room !nowhere:localhost"},
				{"wait_message", map[string]any{"room_id": "!nowhere:localhost", "contains": "never", "timeout_ms": 200}, "timed out"},
				{"sync_until", map[string]any{"room_id": "!r:localhost", "condition": "sunny"}, "unknown sync_until condition"},
				{"trust", map[string]any{"policy": "blind"}, "unknown trust policy"},
			}
			for _, tc := range after {
				if err := c.do(tc.cmd, 10*time.Second, tc.args, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("%s: error %v, want one containing %q", tc.cmd, err, tc.want)
				}
			}

			// The Go side gives up first; the late answer is skipped by the next command.
			err = c.do("sync_until", 100*time.Millisecond, map[string]any{"room_id": "!r:localhost", "condition": "joined", "timeout_ms": 500}, nil)
			if err == nil || !strings.Contains(err.Error(), "no answer within") {
				t.Errorf("short Go-side timeout: error %v, want no answer", err)
			}
			time.Sleep(time.Second) // let the late answer arrive first
			if err := c.do("trust", 10*time.Second, map[string]any{"policy": "none"}, nil); err != nil {
				t.Errorf("the command after a timed-out one: %v", err)
			}

			if out := c.stderr.String(); strings.Contains(out, u.Password) || strings.Contains(out, "access_token=") {
				t.Errorf("the client's stderr shows a secret:\n%s", out)
			}

			if err := c.proc.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-c.proc.exited
			if err := c.do("trust", 10*time.Second, map[string]any{"policy": "tofu"}, nil); err == nil || !strings.Contains(err.Error(), "killed") {
				t.Errorf("a command to a dead client: error %v, want one saying it was killed", err)
			}
		})
	}
}

// TestClientThatCannotStartSaysWhy checks that a client failing at start-up fails with its
// stderr, and that an unknown kind is refused.
func TestClientThatCannotStartSaysWhy(t *testing.T) {
	// A module named nio first on the path stands in for a broken installation.
	fake := t.TempDir()
	if err := os.WriteFile(filepath.Join(fake, "nio.py"), []byte("raise ImportError('hstest-broken nio')\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PYTHONPATH", fake)
	_, err := launchClient(t, Nio)
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "hstest-broken nio") {
		t.Errorf("a nio client that cannot start: error %v, want it to say it exited, with its stderr", err)
	}
	if _, err := launchClient(t, "matrix-rust"); err == nil || !strings.Contains(err.Error(), "unknown client kind") {
		t.Errorf("an unknown kind: error %v", err)
	}
}
