package knowledge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.md")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "x", "docs"), filepath.Join(dir, "y", "docs")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name string
		o    Options
		want string // "" for valid
	}{
		{"zero value", Options{}, ""},
		{"one base", Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}, Include: []string{"**/*.md"}, ChunkSize: 800}}}, ""},
		{"bad name", Options{Bases: map[string]BaseOptions{"My Docs": {Paths: []string{dir}}}}, "bases.My Docs: the name must be"},
		{"no paths", Options{Bases: map[string]BaseOptions{"docs": {}}}, "bases.docs.paths: a base needs at least one folder"},
		{"missing folder", Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{filepath.Join(dir, "nope")}}}}, "bases.docs.paths[0]: folder " + filepath.Join(dir, "nope") + " does not exist"},
		{"a file", Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{file}}}}, "is not a folder"},
		{"same folder names", Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{a, b}}}}, "bases.docs.paths[1]: " + b + " has the same folder name as " + a},
		{"bad include", Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}, Include: []string{"[a-"}}}}, `bases.docs.include[0]: bad pattern "[a-": unclosed [`},
		{"empty exclude", Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}, Exclude: []string{""}}}}, "bases.docs.exclude[0]: empty pattern"},
		{"chunk size", Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}, ChunkSize: 10}}}, "bases.docs.chunk_size: 10 is out of range"},
		{"negative", Options{MaxFileBytes: -1, Debounce: -1}, "max_file_bytes: must not be negative\ndebounce: must not be negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate = %v; want %q", err, tc.want)
			}
		})
	}
}

func TestValidateAgent(t *testing.T) {
	o := Options{Bases: map[string]BaseOptions{"docs": {}}}
	if err := o.ValidateAgent(AgentOptions{}); err != nil {
		t.Fatalf("zero value: %v", err)
	}
	if err := o.ValidateAgent(AgentOptions{Bases: []string{"docs"}, AutoEnrich: true, TopK: 5}); err != nil {
		t.Fatal(err)
	}
	err := o.ValidateAgent(AgentOptions{Bases: []string{"wiki"}, TopK: 50})
	if err == nil || !strings.Contains(err.Error(), `bases[0]: no knowledge base "wiki" (known: [docs])`) || !strings.Contains(err.Error(), "top_k: 50 is out of range") {
		t.Fatalf("ValidateAgent = %v", err)
	}
	if err := o.ValidateAgent(AgentOptions{AutoEnrich: true}); err == nil {
		t.Fatal("auto_enrich without bases accepted")
	}
	if (AgentOptions{}).Limit() != DefaultTopK || (AgentOptions{TopK: 7}).Limit() != 7 {
		t.Fatal("Limit")
	}
}

func TestFilter(t *testing.T) {
	cases := []struct {
		include, exclude []string
		path             string
		want             bool
	}{
		{nil, nil, "a.md", true},
		{nil, nil, "deep/a.TXT", true},
		{nil, nil, "a.pdf", true},
		{nil, nil, "a.docx", false},
		{nil, nil, ".hidden.md", false},
		{[]string{"*.rst"}, nil, "x/y/a.rst", true},
		{[]string{"*.rst"}, nil, "a.md", false},
		{[]string{"docs/*.md"}, nil, "docs/a.md", true},
		{[]string{"docs/*.md"}, nil, "docs/sub/a.md", false},
		{[]string{"docs/**/*.md"}, nil, "docs/sub/a.md", true},
		{[]string{"docs/**/*.md"}, nil, "docs/a.md", true},
		{[]string{"**"}, nil, "any/thing.bin", true},
		{[]string{"note?.txt"}, nil, "note1.txt", true},
		{[]string{"note[0-9].txt"}, nil, "notea.txt", false},
		{[]string{"note[!0-9].txt"}, nil, "notea.txt", true},
		{nil, []string{"*.md"}, "a.md", false},
		{nil, []string{"drafts/**"}, "drafts/a.md", false},
		{nil, []string{"/top.md"}, "top.md", false},
	}
	for _, tc := range cases {
		f, err := newFilter(BaseOptions{Include: tc.include, Exclude: tc.exclude})
		if err != nil {
			t.Fatal(err)
		}
		if got := f.file(tc.path); got != tc.want {
			t.Errorf("include %v exclude %v: file(%q) = %v; want %v", tc.include, tc.exclude, tc.path, got, tc.want)
		}
	}
	f, _ := newFilter(BaseOptions{Exclude: []string{"node_modules"}})
	if !f.skipDir("web/node_modules") || !f.skipDir(".git") || f.skipDir("web") {
		t.Error("skipDir")
	}
}
