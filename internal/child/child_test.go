//go:build unix

package child

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookroom/hookroom/internal/procgroup"
)

func TestExitAndStderr(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	p, err := Start(Spec{
		Argv:      []string{"/bin/sh", "-c", "echo one >&2; echo secret-two >&2; echo three >&2; exit 3"},
		Dir:       t.TempDir(),
		Redact:    func(s string) string { return strings.ReplaceAll(s, "secret", "[REDACTED]") },
		TailLines: 2,
		Stderr: func(_ int, line string, _ bool) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, line)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	e := p.Exit()
	if !e.Reaped || e.Err == nil || !strings.Contains(e.Err.Error(), "exit status 3") {
		t.Errorf("Exit = %+v, want reaped with exit status 3", e)
	}
	if want := []string{"[REDACTED]-two", "three"}; !slices.Equal(e.Stderr, want) {
		t.Errorf("tail = %q, want %q", e.Stderr, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"one", "[REDACTED]-two", "three"}; !slices.Equal(logged, want) {
		t.Errorf("Stderr got %q, want %q", logged, want)
	}
}

func TestLongLineCut(t *testing.T) {
	var truncated bool
	p, err := Start(Spec{
		Argv:      []string{"/bin/sh", "-c", "head -c 10000 /dev/zero | tr '\\0' x >&2; echo >&2; echo next >&2"},
		TailLines: 5, TailLineBytes: 10,
		Stderr: func(_ int, line string, cut bool) {
			if cut {
				truncated = len(line) == MaxStderrLine
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if !truncated {
		t.Error("the 10,000-byte line was not passed on cut at MaxStderrLine")
	}
	if want := []string{"xxxxxxxxxx…", "next"}; !slices.Equal(p.Exit().Stderr, want) {
		t.Errorf("tail = %q, want %q", p.Exit().Stderr, want)
	}
}

func TestStopEscalates(t *testing.T) {
	for _, tc := range []struct {
		name   string
		script string
		steps  []Step
		reason string
	}{
		{"stdin closed", "cat", nil, ""},
		{"SIGTERM", "trap 'exit 0' TERM; while :; do sleep 0.01; done", []Step{StepTerm}, ""},
		{"SIGKILL", "trap '' TERM; while :; do sleep 0.01; done", []Step{StepTerm, StepKill}, StopKillReason},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(Spec{Argv: []string{"/bin/sh", "-c", tc.script}})
			if err != nil {
				t.Fatal(err)
			}
			if tc.script != "cat" {
				_ = p.Stdin().Close()
			}
			var steps []Step
			p.Stop(200*time.Millisecond, func(s Step) { steps = append(steps, s) })
			if !slices.Equal(steps, tc.steps) {
				t.Errorf("steps = %v, want %v", steps, tc.steps)
			}
			if e := p.Exit(); !e.Reaped || e.KillReason != tc.reason {
				t.Errorf("Exit = %+v, want reaped, kill reason %q", e, tc.reason)
			}
			p.Signal(procgroup.Term) // reaped: left alone
		})
	}
}

func TestBaseEnv(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"hookroom's PATH and LANG", map[string]string{"PATH": "/opt/bin", "LANG": "de_DE.UTF-8", "SECRET": "x"},
			[]string{"PATH=/opt/bin", "HOME=/state", "LANG=de_DE.UTF-8"}},
		{"defaults when unset", nil, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/state", "LANG=C.UTF-8"}},
		{"defaults when empty", map[string]string{"PATH": "", "LANG": ""}, []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/state", "LANG=C.UTF-8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := BaseEnv(func(k string) (string, bool) { v, ok := tt.env[k]; return v, ok }, "/state")
			if !slices.Equal(got, tt.want) {
				t.Errorf("BaseEnv = %q, want %q", got, tt.want)
			}
		})
	}
}
