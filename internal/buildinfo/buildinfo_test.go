package buildinfo

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestMerge(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "-tags", Value: "goolm"},
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-11-28T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	devel := debug.Module{Path: "github.com/hookroom/hookroom", Version: "(devel)"}
	tests := []struct {
		name  string
		stamp stamp
		bi    *debug.BuildInfo
		want  Info
	}{
		{"no build information", stamp{}, nil,
			Info{Version: "dev"}},
		{"source build without a checkout", stamp{}, &debug.BuildInfo{GoVersion: "go1.26.8", Main: devel},
			Info{Version: "dev", GoVersion: "go1.26.8"}},
		{"source build in a checkout", stamp{}, &debug.BuildInfo{GoVersion: "go1.26.8", Main: devel, Settings: vcs},
			Info{Version: "dev", Revision: "0123456789abcdef0123456789abcdef01234567", Date: "2026-11-28T10:00:00Z", Modified: true, GoVersion: "go1.26.8"}},
		{"go install at a tag", stamp{}, &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}},
			Info{Version: "1.2.3", GoVersion: "go1.26.8"}},
		{"go install at a commit", stamp{}, &debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20261128100000-0123456789ab"}},
			Info{Version: "0.0.0-20261128100000-0123456789ab"}},
		{"release build", stamp{"v1.2.3", "fedcba9876543210fedcba9876543210fedcba98", "2026-11-29T04:00:00Z", ""},
			&debug.BuildInfo{GoVersion: "go1.26.8", Main: devel},
			Info{Version: "1.2.3", Revision: "fedcba9876543210fedcba9876543210fedcba98", Date: "2026-11-29T04:00:00Z", GoVersion: "go1.26.8"}},
		{"stamped revision wins over the checkout's, with its time and state", stamp{"", "fedcba98", "", ""},
			&debug.BuildInfo{Main: devel, Settings: vcs},
			Info{Version: "dev", Revision: "fedcba98"}},
		{"stamped version wins over the module version", stamp{"2.0.0", "", "", "true"},
			&debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}},
			Info{Version: "2.0.0", Modified: true}},
		{"a version that is not v-digit keeps its v", stamp{"vnext", "", "", ""}, nil,
			Info{Version: "vnext"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := merge(tt.stamp, tt.bi)
			if tt.want.GoVersion == "" {
				tt.want.GoVersion = runtime.Version()
			}
			tt.want.Platform = runtime.GOOS + "/" + runtime.GOARCH
			if got != tt.want {
				t.Errorf("merge =\n %+v, want\n %+v", got, tt.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		in   Info
		want string
	}{
		{Info{Version: "1.2.3", Revision: "abcdef1234567890", Date: "2026-11-29T04:00:00Z", GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"hookroom 1.2.3 (revision abcdef123456, 2026-11-29T04:00:00Z) go1.26.8 linux/amd64"},
		{Info{Version: "dev", Revision: "abc", Modified: true, GoVersion: "go1.26.8", Platform: "linux/arm64"},
			"hookroom dev (revision abc, modified) go1.26.8 linux/arm64"},
		{Info{Version: "dev", GoVersion: "go1.26.8", Platform: "linux/amd64"},
			"hookroom dev go1.26.8 linux/amd64"},
		{Info{}, "hookroom dev"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The variables are the ones -ldflags -X sets: a program built with them
// prints what was stamped, and one built without them says "dev".
func TestLinkerStamping(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to build the test program with")
	}
	dir := t.TempDir()
	const pkg = "github.com/hookroom/hookroom/internal/buildinfo"
	build := func(name string, ldflags ...string) string {
		t.Helper()
		out := filepath.Join(dir, name)
		args := []string{"build", "-tags", "goolm", "-trimpath", "-buildvcs=false", "-o", out}
		if len(ldflags) > 0 {
			args = append(args, "-ldflags", strings.Join(ldflags, " "))
		}
		cmd := exec.Command(goBin, append(args, "./testdata/printversion")...)
		// GOFLAGS cleared: scripts/test.sh sets -race there, which needs cgo;
		// this build says all it needs on its command line.
		cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local", "CGO_ENABLED=0", "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
		}
		return out
	}
	run := func(bin string) string {
		t.Helper()
		b, err := exec.Command(bin).Output()
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		return strings.TrimSpace(string(b))
	}
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	stamped := build("stamped",
		"-X", pkg+".Version=v9.8.7-rc.1",
		"-X", pkg+".Revision=0123456789abcdef0123456789abcdef01234567",
		"-X", pkg+".Date=2026-11-29T04:00:00Z")
	want := "hookroom 9.8.7-rc.1 (revision 0123456789ab, 2026-11-29T04:00:00Z) " + runtime.Version() + platform
	if got := run(stamped); got != want {
		t.Errorf("stamped build prints\n %q, want\n %q", got, want)
	}
	plain := build("plain")
	if want := "hookroom dev " + runtime.Version() + platform; run(plain) != want {
		t.Errorf("unstamped build prints %q, want %q", run(plain), want)
	}
}
