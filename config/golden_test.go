package config_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
)

var update = flag.Bool("update", false, "rewrite testdata/invalid/*.golden from the current output")

// TestInvalidGolden loads every testdata/invalid/*.yaml file, which must fail,
// and compares the full error output with the .golden file next to it.
func TestInvalidGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		t.Run(name, func(t *testing.T) {
			_, err := config.Load(t.Context(), file, fakeEnv(nil))
			if err == nil {
				t.Fatal("Load succeeded, want errors")
			}
			got := err.Error() + "\n"
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("errors differ from %s\n--- got ---\n%s--- want ---\n%s", golden, got, want)
			}
		})
	}
}
