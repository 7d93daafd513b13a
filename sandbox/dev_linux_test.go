package sandbox_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/sandbox"
)

// A plugin gets the device nodes programs use, not the /dev tree: /dev/shm
// is a tmpfs where hookroom's data_dir (database and WAL, access tokens
// included) or PostgreSQL's shared memory may live.
func TestDevicesButNotDevShm(t *testing.T) {
	requireLandlock(t)
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		t.Skip("no /dev/shm on this system")
	}
	data, err := os.MkdirTemp("/dev/shm", "hookroom-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	db := filepath.Join(data, "hookroom.db")
	if err := os.WriteFile(db, []byte("access token"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	p := sandbox.ForProgram(exe, "", t.TempDir(), nil, nil)

	for _, tc := range []struct {
		op, path string
		allowed  bool
	}{
		{"read", db, false},
		{"readsome", db, false},
		{"write", db, false},
		{"write", db + "-wal", false},
		{"list", data, false},
		{"list", "/dev/shm", false},
		{"list", "/dev", false},
		{"readsome", "/dev/urandom", true},
		{"readsome", "/dev/random", true},
		{"readsome", "/dev/zero", true},
		{"write", "/dev/null", true},
		{"readsome", "/dev/null", false}, // EOF, not permission denied
	} {
		got := confined(t, p, tc.op, tc.path)
		denied := strings.Contains(got, "permission denied") || strings.Contains(got, "operation not permitted")
		switch {
		case tc.allowed && got != "ok":
			t.Errorf("%s %s: want allowed, got %q", tc.op, tc.path, got)
		case !tc.allowed && tc.path == "/dev/null":
			if got != "EOF" {
				t.Errorf("%s %s: want EOF, got %q", tc.op, tc.path, got)
			}
		case !tc.allowed && !denied:
			t.Errorf("%s %s: want permission denied, got %q", tc.op, tc.path, got)
		}
	}
}

// A symbolic link among the devices is skipped, not followed: /dev/fd
// resolved by the server is the server's /proc/<pid>/fd.
func TestDeviceSymlinkIsNotFollowed(t *testing.T) {
	requireLandlock(t)
	exe, _ := os.Executable()
	p := sandbox.ForProgram(exe, "", t.TempDir(), nil, nil)
	p.Devices = append(p.Devices, "/dev/fd", "/dev/stdin")
	for _, path := range []string{fmt.Sprintf("/proc/%d/fd", os.Getpid()), "/dev/fd"} {
		if got := confined(t, p, "list", path); !strings.Contains(got, "permission denied") {
			t.Errorf("list %s: want permission denied, got %q", path, got)
		}
	}
}

// Shell and Python plugins still run with the narrower /dev: redirections
// to /dev/null, /dev/stdout and /dev/stderr, randomness from /dev/urandom.
func TestInterpretersRunWithTheDevices(t *testing.T) {
	requireLandlock(t)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"sh", []string{"-c", `head -c 8 /dev/urandom | od >/dev/null && echo x 2>/dev/null >/dev/stderr && ls /dev/null >/dev/null && echo ok >/dev/stdout`}},
		{"python3", []string{"-c", `import os, random, tempfile, subprocess, sys
os.urandom(16); random.random(); open("/dev/null", "w").write("x")
subprocess.run(["true"], stdout=subprocess.DEVNULL, check=True)
with tempfile.TemporaryFile() as f: f.write(b"x")
print("ok")`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			program, err := exec.LookPath(tc.name)
			if err != nil {
				t.Skipf("no %s: %v", tc.name, err)
			}
			if program, err = filepath.Abs(program); err != nil {
				t.Fatal(err)
			}
			state := t.TempDir()
			p := sandbox.ForProgram(program, "", state, nil, nil)
			cmd := exec.Command(program, tc.args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+state)
			var out, errOut bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &errOut
			if err := p.Start(cmd); err != nil {
				t.Fatalf("Start: %v", err)
			}
			if err := cmd.Wait(); err != nil || strings.TrimSpace(out.String()) != "ok" {
				t.Fatalf("%s: %v\nstdout: %s\nstderr: %s", tc.name, err, out.String(), errOut.String())
			}
		})
	}
}
