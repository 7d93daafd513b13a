package enrich

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// goldenCase is one entry of testdata/cases.json. The same file drives
// testdata/crosscheck.py, which renders the cases independently with Python's
// html.escape and compares its output with the golden files.
type goldenCase struct {
	Name   string                 `json:"name"`
	Kind   string                 `json:"kind"` // message, system, transient or build
	User   string                 `json:"user"`
	Items  []hooks.EnrichmentItem `json:"items"`
	System []hooks.EnrichmentItem `json:"system"`
	Parts  []string               `json:"parts"`
}

// render produces the golden output of c.
func (c goldenCase) render(t *testing.T) string {
	t.Helper()
	switch c.Kind {
	case "message":
		return RenderMessage(c.Items)
	case "system":
		return RenderSystem(c.Items)
	case "transient":
		// Items (if any) are rendered as a message block that precedes the
		// parts, the way Build composes its transient block.
		return RenderTransient(append([]string{RenderMessage(c.Items)}, c.Parts...)...)
	case "build":
		return formatTurn(Build(c.User, c.Items, c.System, c.Parts...))
	}
	t.Fatalf("case %q: unknown kind %q", c.Name, c.Kind)
	return ""
}

// formatTurn lays out the three fields of a Turn for a golden file.
func formatTurn(turn Turn) string {
	return "-- prompt --\n" + turn.Prompt +
		"\n-- transient --\n" + turn.Transient +
		"\n-- system --\n" + turn.System + "\n"
}

func loadCases(t *testing.T) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "cases.json"))
	if err != nil {
		t.Fatalf("failed to read cases: %v", err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("failed to decode cases: %v", err)
	}
	if len(cases) == 0 {
		t.Fatal("testdata/cases.json has no cases")
	}
	return cases
}

func TestGolden(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range loadCases(t) {
		if seen[c.Name] {
			t.Fatalf("duplicate case name %q", c.Name)
		}
		seen[c.Name] = true
		t.Run(c.Name, func(t *testing.T) {
			got := c.render(t)
			path := filepath.Join("testdata", c.Name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatalf("failed to write golden: %v", err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("failed to read golden (run go test -update): %v", err)
			}
			if !bytes.Equal([]byte(got), want) {
				t.Errorf("output differs from %s\n got: %q\nwant: %q", path, got, want)
			}
		})
	}

	// Every golden file must belong to a case, so a renamed case cannot leave
	// a stale file behind that nothing checks.
	files, err := filepath.Glob(filepath.Join("testdata", "*.golden"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		name := filepath.Base(f)
		name = name[:len(name)-len(".golden")]
		if !seen[name] {
			t.Errorf("%s has no case in testdata/cases.json", f)
		}
	}
}
