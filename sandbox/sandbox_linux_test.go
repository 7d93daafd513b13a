package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/hookroom/hookroom/sandbox"
)

// The test binary doubles as the confined program: with
// SANDBOX_TEST_OP=read|readsome|write|list and SANDBOX_TEST_PATH it tries
// the operation and prints "ok" or the error. readsome reads a few bytes (of
// a device such as /dev/urandom that never ends).
func TestMain(m *testing.M) {
	if op := os.Getenv("SANDBOX_TEST_OP"); op != "" {
		path := os.Getenv("SANDBOX_TEST_PATH")
		var err error
		switch op {
		case "read":
			_, err = os.ReadFile(path)
		case "readsome":
			var f *os.File
			if f, err = os.Open(path); err == nil {
				_, err = io.ReadFull(f, make([]byte, 8))
				f.Close()
			}
		case "write":
			err = os.WriteFile(path, []byte("x"), 0o600)
		case "list":
			_, err = os.ReadDir(path)
		}
		if err != nil {
			fmt.Println(err)
			os.Exit(0)
		}
		fmt.Println("ok")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func requireLandlock(t *testing.T) {
	t.Helper()
	if sandbox.Available() == 0 {
		t.Fatal("this kernel has no Landlock; the sandbox tests need it (Linux ≥ 5.13 with landlock in the lsm= list)")
	}
}

// confined runs the test binary confined by p doing op on path.
func confined(t *testing.T, p sandbox.Policy, op, path string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = []string{"SANDBOX_TEST_OP=" + op, "SANDBOX_TEST_PATH=" + path}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := p.Start(cmd); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("confined program failed: %v\n%s", err, out.String())
	}
	return strings.TrimSpace(out.String())
}

func TestPolicyConfinesTheProgram(t *testing.T) {
	requireLandlock(t)
	root := t.TempDir()
	plugin := filepath.Join(root, "plugin")
	state := filepath.Join(root, "state")
	secrets := filepath.Join(root, "data")
	for _, d := range []string{plugin, state, secrets} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	write := func(path string) {
		if err := os.WriteFile(path, []byte("content"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(plugin, "main.py"))
	write(filepath.Join(secrets, "hookroom.db"))
	write(filepath.Join(state, "cache"))
	exe, _ := os.Executable()
	p := sandbox.ForProgram(exe, plugin, state, nil, nil)

	for _, tc := range []struct {
		op, path string
		allowed  bool
	}{
		{"read", filepath.Join(plugin, "main.py"), true},
		{"write", filepath.Join(plugin, "main.py"), false},
		{"write", filepath.Join(plugin, "new"), false},
		{"read", filepath.Join(state, "cache"), true},
		{"write", filepath.Join(state, "new"), true},
		{"read", filepath.Join(secrets, "hookroom.db"), false},
		{"list", secrets, false},
		{"list", root, false},
		{"read", "/etc/hosts", true},
		{"write", "/dev/null", true},
		// No /proc: the server's environment holds its secrets, and root
		// reads it even from a non-dumpable process.
		{"read", fmt.Sprintf("/proc/%d/environ", os.Getpid()), false},
		{"read", "/proc/self/status", false},
	} {
		got := confined(t, p, tc.op, tc.path)
		if tc.allowed && got != "ok" {
			t.Errorf("%s %s: want allowed, got %q", tc.op, tc.path, got)
		}
		if !tc.allowed && !strings.Contains(got, "permission denied") && !strings.Contains(got, "operation not permitted") {
			t.Errorf("%s %s: want permission denied, got %q", tc.op, tc.path, got)
		}
	}
}

// The server's own threads are never confined, however many programs it
// started confined from how many goroutines.
func TestServerStaysUnconfined(t *testing.T) {
	requireLandlock(t)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	p := sandbox.ForProgram(exe, "", t.TempDir(), nil, nil)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := confined(t, p, "read", secret); !strings.Contains(got, "permission denied") {
				t.Errorf("confined read: %q", got)
			}
		})
	}
	wg.Wait()
	// Every goroutine (and so every thread the runtime might pick) still
	// reads it.
	for range 64 {
		wg.Go(func() {
			if _, err := os.ReadFile(secret); err != nil {
				t.Errorf("server read: %v", err)
			}
		})
	}
	wg.Wait()
}

func TestRelativePathIsAnError(t *testing.T) {
	requireLandlock(t)
	exe, _ := os.Executable()
	err := sandbox.Policy{ReadOnly: []string{"relative/dir"}}.Start(exec.Command(exe))
	if err == nil || !strings.Contains(err.Error(), `"relative/dir" is not absolute`) {
		t.Fatalf("err = %v", err)
	}
	if errors.Is(err, sandbox.ErrUnsupported) {
		t.Fatal("not an unsupported kernel")
	}
}

func TestProgramRoots(t *testing.T) {
	for _, tc := range []struct {
		program string
		want    []string
	}{
		{"/opt/node/bin/node", []string{"/opt/node"}},
		{"/root/.pyenv/shims/python3", []string{"/root/.pyenv"}},
		{"/usr/bin/env-nonexistent", []string{"/usr/bin/env-nonexistent"}},
		{"/srv/plugins/geo/geo", []string{"/srv/plugins/geo"}},
		{"/bin/sh-nonexistent", []string{"/bin/sh-nonexistent"}},
		{"relative", nil},
	} {
		got := sandbox.ProgramRoots(tc.program)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("ProgramRoots(%q) = %v, want %v", tc.program, got, tc.want)
		}
	}
}
