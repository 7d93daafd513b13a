package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/config"
)

// TestSetValueGolden sets one value in testdata/settext/input.yaml (a
// configuration with comments, quoting, flow and block lists, a literal
// block, a merge key and an empty value) per case and compares the whole
// result with testdata/settext/NAME.golden.yaml (-update rewrites them).
// Every result must also still be a valid configuration.
func TestSetValueGolden(t *testing.T) {
	input, err := os.ReadFile("testdata/settext/input.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := fakeEnv(map[string]string{"HS_SECRET": "s3cret"})
	if err := config.Check(input, "testdata/settext/input.yaml", env); err != nil {
		t.Fatalf("the input is not a valid configuration: %v", err)
	}
	cases := []struct {
		name  string
		path  []string
		value any
	}{
		{"model_plain", []string{"agents", "helper", "model"}, "big"},
		{"model_quoted", []string{"agents", "writer", "model"}, "big"},
		{"model_needs_quotes", []string{"agents", "helper", "model"}, "123"},
		{"tools_flow", []string{"agents", "helper", "tools"}, []string{"current_time", "web_fetch", "my plugin/*"}},
		{"tools_block", []string{"agents", "writer", "tools"}, []string{"web_fetch", "current_time", "mcp:github/*"}},
		{"tools_empty", []string{"agents", "writer", "tools"}, []string{}},
		{"instructions_literal", []string{"agents", "writer", "instructions"}, "You write changelogs.\n\nOne line per change.\n"},
		{"instructions_plain_to_block", []string{"agents", "helper", "instructions"}, "Be brief.\nAnswer in English."},
		{"instructions_block_to_line", []string{"agents", "writer", "instructions"}, "Write short notes: nothing else."},
		{"instructions_indented_first_line", []string{"agents", "writer", "instructions"}, "  indented first\nthen not\n"},
		{"insert_model", []string{"agents", "reviewer", "model"}, "big"},
		{"insert_instructions", []string{"agents", "reviewer", "instructions"}, "Review carefully.\nBe kind."},
		{"insert_tools", []string{"agents", "reviewer", "tools"}, []string{"current_time"}},
		{"insert_over_merge", []string{"agents", "based", "model"}, "big"},
		{"empty_value", []string{"agents", "blank", "model"}, "big"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := config.SetValue(input, c.path, c.value)
			if err != nil {
				t.Fatalf("SetValue: %v", err)
			}
			golden := filepath.Join("testdata/settext", c.name+".golden.yaml")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("result differs from %s\n--- got ---\n%s--- want ---\n%s", golden, got, want)
			}
			if err := config.Check(got, golden, env); err != nil {
				t.Errorf("the result is not a valid configuration: %v", err)
			}
		})
	}
}

// SetValue refuses what it cannot write faithfully, and leaves the
// caller's data alone.
func TestSetValueRefuses(t *testing.T) {
	const src = `base: &b small
agents:
  a:
    model: *b
    tools: [x]
  f: {model: small}
  shared: &s
    model: small
  other: *s
`
	cases := []struct {
		name  string
		path  []string
		value any
		want  string
	}{
		{"missing parent", []string{"agents", "nobody", "model"}, "big", "agents.nobody is not in the file"},
		{"alias value", []string{"agents", "a", "model"}, "big", "written as an alias"},
		{"flow mapping", []string{"agents", "f", "model"}, "big", "flow mapping"},
		{"anchored elsewhere", []string{"agents", "shared", "model"}, "big", "would change more than this value"},
		{"string for a list", []string{"agents", "a", "tools"}, "x", "give a list"},
		{"unsupported type", []string{"agents", "a", "model"}, 1.5, "cannot write a value of type float64"},
		{"no path", nil, "x", "no key path"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(src)
			out, err := config.SetValue(data, c.path, c.value)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("SetValue = %q, %v; want an error containing %q", out, err, c.want)
			}
			if string(data) != src {
				t.Error("SetValue changed its input")
			}
		})
	}
}

// Lines SetValue adds use the file's line endings.
func TestSetValueKeepsCRLF(t *testing.T) {
	src := "agents:\r\n  a:\r\n    model: small # c\r\n  b:\r\n    rooms: [main]\r\n"
	cases := []struct {
		path  []string
		value any
		want  string
	}{
		{[]string{"agents", "a", "model"}, "x\ny", "agents:\r\n  a:\r\n    model: |- # c\r\n      x\r\n      y\r\n  b:\r\n    rooms: [main]\r\n"},
		{[]string{"agents", "b", "model"}, "big", "agents:\r\n  a:\r\n    model: small # c\r\n  b:\r\n    rooms: [main]\r\n    model: big\r\n"},
	}
	for _, c := range cases {
		got, err := config.SetValue([]byte(src), c.path, c.value)
		if err != nil {
			t.Fatalf("SetValue(%v): %v", c.path, err)
		}
		if string(got) != c.want {
			t.Errorf("SetValue(%v) = %q, want %q", c.path, got, c.want)
		}
	}
}

// Every agent of config.example.yaml, the file operators start from, can
// have each !config setting changed, and the result is still valid.
func TestSetValueOnTheExample(t *testing.T) {
	data, err := os.ReadFile("../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := fakeEnv(map[string]string{"MATRIX_REGISTRATION_SHARED_SECRET": "very-secret-value"})
	cfg, err := config.Parse(data, "../config.example.yaml", env)
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]any{
		"model":        "claude",
		"instructions": "First line.\n  Indented second line: with a colon # and a hash.\n",
		"tools":        []string{"current_time", "web_*"},
	}
	tried := 0
	for _, agent := range cfg.AgentNames() {
		if cfg.Agents[agent].IsTeam() {
			continue
		}
		tried++
		for key, value := range values {
			got, err := config.SetValue(data, []string{"agents", agent, key}, value)
			if err != nil {
				t.Errorf("agents.%s.%s: %v", agent, key, err)
				continue
			}
			if err := config.Check(got, "../config.example.yaml", env); err != nil {
				t.Errorf("agents.%s.%s: the result is not valid: %v", agent, key, err)
			}
		}
	}
	if tried < 2 {
		t.Errorf("%d agents in config.example.yaml, want several to try", tried)
	}
}
