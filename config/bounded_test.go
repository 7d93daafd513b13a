package config_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/config"
)

// pathological returns a configuration with n problems of one kind, and the
// environment it is parsed with.
func pathological(kind string, n int) (string, map[string]string) {
	var b strings.Builder
	b.WriteString(minimal)
	env := map[string]string{}
	switch kind {
	case "invalid-env": // n ${VAR} values that substitute to invalid user ids
		b.WriteString("authorization:\n  global_users:\n")
		for i := range n {
			fmt.Fprintf(&b, "    - \"${USER_%d}\"\n", i)
			env[fmt.Sprintf("USER_%d", i)] = fmt.Sprintf("not-a-user-id-%d", i)
		}
	case "missing-env": // n ${VAR} references to unset variables
		b.WriteString("authorization:\n  global_users:\n")
		for i := range n {
			fmt.Fprintf(&b, "    - \"${UNSET_%d}\"\n", i)
		}
	case "unknown-keys": // n unknown keys
		b.WriteString("log:\n")
		for i := range n {
			fmt.Fprintf(&b, "  unknown_key_%d: x\n", i)
		}
	}
	return b.String(), env
}

// TestPathologicalFilesAreBounded parses files with 10,000 problems of
// each kind: the report is capped at config.MaxErrors problems and a count
// of the rest, and it takes well under a second per file on an idle machine
// (quadratic collection took 40 s for invalid-env; the bound leaves room
// for a loaded machine and -race).
func TestPathologicalFilesAreBounded(t *testing.T) {
	const n = 10_000
	for _, kind := range []string{"invalid-env", "missing-env", "unknown-keys"} {
		t.Run(kind, func(t *testing.T) {
			src, env := pathological(kind, n)
			start := time.Now()
			_, err := config.Parse([]byte(src), "config.yaml", fakeEnv(env))
			took := time.Since(start)
			var list config.ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("err = %v, want a config.ErrorList", err)
			}
			if len(list) != config.MaxErrors+1 {
				t.Fatalf("got %d entries, want %d problems and a summary", len(list), config.MaxErrors)
			}
			if want := fmt.Sprintf("config.yaml: and %d more problems (fix the ones above first)", n-config.MaxErrors); list[config.MaxErrors].Error() != want {
				t.Errorf("last entry = %q, want %q", list[config.MaxErrors].Error(), want)
			}
			first := strings.Count(src[:strings.Index(src, "_0")], "\n") + 1
			for i, e := range list[:config.MaxErrors] {
				if e.Line != first+i { // the first problems, in order
					t.Errorf("problem %d is on line %d, want %d: %v", i, e.Line, first+i, e)
					break
				}
			}
			if strings.Contains(err.Error(), "not-a-user-id") {
				t.Errorf("a value from the environment is in the report:\n%v", err)
			}
			if len(err.Error()) > 16<<10 {
				t.Errorf("report is %d bytes", len(err.Error()))
			}
			if took > 10*time.Second {
				t.Errorf("parsing %d problems took %v", n, took)
			}
		})
	}
}

func TestFilesOverMaxSizeAreRefused(t *testing.T) {
	big := []byte(minimal + "# " + strings.Repeat("x", config.MaxFileSize) + "\n")
	_, err := config.Parse(big, "config.yaml")
	if !errors.Is(err, config.ErrFileTooLarge) {
		t.Errorf("Parse: err = %v, want ErrFileTooLarge", err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = config.Load(context.Background(), path)
	if !errors.Is(err, config.ErrFileTooLarge) || !strings.Contains(err.Error(), "over 8 MiB") {
		t.Errorf("Load: err = %v, want ErrFileTooLarge over 8 MiB", err)
	}
}

// BenchmarkPathological parses files with 10,000 problems of each kind.
func BenchmarkPathological(b *testing.B) {
	for _, kind := range []string{"invalid-env", "missing-env", "unknown-keys"} {
		b.Run(kind, func(b *testing.B) {
			src, env := pathological(kind, 10_000)
			for b.Loop() {
				if _, err := config.Parse([]byte(src), "config.yaml", fakeEnv(env)); err == nil {
					b.Fatal("Parse succeeded")
				}
			}
		})
	}
}
