package knowledge

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// dumpChunks renders chunks for a golden file.
func dumpChunks(chunks []Chunk) string {
	var b strings.Builder
	for i, c := range chunks {
		fmt.Fprintf(&b, "=== chunk %d %s heading=%q id=%s\n%s\n", i, c.Citation(), c.Heading, c.ID, c.Text)
	}
	return b.String()
}

// The fixtures chunk as their golden files say, and every chunk's text is
// exactly its line range of the file.
func TestSplitGolden(t *testing.T) {
	for _, name := range []string{"guide.md", "notes.txt"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata", name))
			if err != nil {
				t.Fatal(err)
			}
			chunks := Split("docs", name, string(raw), isMarkdown(name), 300)
			got := dumpChunks(chunks)
			golden := filepath.Join("testdata", name+".golden")
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
				t.Errorf("chunks differ from %s (go test -run TestSplitGolden -update rewrites it):\n%s", golden, got)
			}
			lines := splitLines(string(raw))
			for _, c := range chunks {
				span := strings.Join(lines[c.StartLine-1:c.EndLine], "\n")
				if c.StartLine == c.EndLine && len(span) > 300 {
					if !strings.Contains(span, c.Text) {
						t.Errorf("piece of %s is not in its line", c.Citation())
					}
				} else if span != c.Text {
					t.Errorf("%s: text %q is not its lines %q", c.Citation(), c.Text, span)
				}
				if !utf8.ValidString(c.Text) {
					t.Errorf("%s: invalid UTF-8", c.Citation())
				}
			}
		})
	}
}

func TestSplit(t *testing.T) {
	type want struct {
		start, end int
		heading    string
	}
	cases := []struct {
		name     string
		markdown bool
		size     int
		content  string
		want     []want
	}{
		{"empty", true, 300, "", nil},
		{"blank lines only", true, 300, "\n\n  \n", nil},
		{"one paragraph, CRLF", false, 300, "a\r\nb\r\n", []want{{1, 2, ""}}},
		{"paragraphs fit together", false, 300, "a\n\nb\n", []want{{1, 3, ""}}},
		{"paragraphs split by size", false, 5, "aaa\n\nbbb\n", []want{{1, 1, ""}, {3, 3, ""}}},
		{"long paragraph split by lines", false, 7, "aaa\nbbb\nccc\n", []want{{1, 2, ""}, {3, 3, ""}}},
		{"text has no headings", false, 300, "# not a heading\ntext\n", []want{{1, 2, ""}}},
		{"heading starts a chunk", true, 300, "intro\n# A\nbody\n", []want{{1, 1, ""}, {2, 3, "A"}}},
		{"headings only chunk merges into the next", true, 300, "# A\n\n## B\n\nbody\n", []want{{1, 5, "A > B"}}},
		{"deeper heading resets", true, 300, "# A\n## B\nx\n## C\ny\n# D\nz\n", []want{{1, 3, "A > B"}, {4, 5, "A > C"}, {6, 7, "D"}}},
		{"skipped level", true, 300, "# A\n### C\nx\n", []want{{1, 3, "A > C"}}},
		{"heading in a fence is code", true, 300, "# A\n```\n# not\n```\n", []want{{1, 4, "A"}}},
		{"tilde fence with blank lines stays one unit", true, 12, "~~~\na\n\nb\n~~~\n", []want{{1, 5, ""}}},
		{"unclosed fence runs to the end", true, 300, "```go\nx\n\n", []want{{1, 2, ""}}},
		{"setext heading", true, 300, "Title\n=====\ntext\n", []want{{1, 3, "Title"}}},
		{"setext needs a one-line paragraph", true, 300, "a\nb\n---\n", []want{{1, 3, ""}}},
		{"heading-only file", true, 300, "# A\n## B\n", []want{{1, 2, "A > B"}}},
		{"#hashtag is no heading", true, 300, "#tag\n", []want{{1, 1, ""}}},
		{"headings join a unit split by lines", true, 12, "# A\naaaa\nbbbb\ncccc\n", []want{{1, 2, "A"}, {3, 4, "A"}}},
		{"long line cut", false, 4, "abcdefghij\n", []want{{1, 1, ""}, {1, 1, ""}, {1, 1, ""}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Split("b", "f", tc.content, tc.markdown, tc.size)
			if len(got) != len(tc.want) {
				t.Fatalf("%d chunks; want %d:\n%s", len(got), len(tc.want), dumpChunks(got))
			}
			ids := map[string]bool{}
			for i, w := range tc.want {
				c := got[i]
				if c.StartLine != w.start || c.EndLine != w.end || c.Heading != w.heading {
					t.Errorf("chunk %d: lines %d-%d heading %q; want %d-%d %q", i, c.StartLine, c.EndLine, c.Heading, w.start, w.end, w.heading)
				}
				if ids[c.ID] {
					t.Errorf("chunk %d: duplicate id %s", i, c.ID)
				}
				ids[c.ID] = true
			}
		})
	}
}

// Chunk ids are stable across runs and depend on the base, path, range and
// text.
func TestChunkIDs(t *testing.T) {
	a := Split("b", "f.md", "# A\ntext\n", true, 300)[0]
	if again := Split("b", "f.md", "# A\ntext\n", true, 300)[0]; again.ID != a.ID {
		t.Fatal("same input, different id")
	}
	for _, other := range []Chunk{
		Split("c", "f.md", "# A\ntext\n", true, 300)[0],
		Split("b", "g.md", "# A\ntext\n", true, 300)[0],
		Split("b", "f.md", "\n# A\ntext\n", true, 300)[0],
		Split("b", "f.md", "# A\ntext!\n", true, 300)[0],
	} {
		if other.ID == a.ID {
			t.Errorf("%+v has the id of %+v", other, a)
		}
	}
}
