package matrixio

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"maunium.net/go/mautrix/id"
)

// paragraphs returns n numbered paragraphs of about size bytes each,
// separated by blank lines.
func paragraphs(n, size int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString("\n\n")
		}
		line := fmt.Sprintf("Paragraph %d: ", i)
		b.WriteString(line)
		b.WriteString(strings.Repeat("lorem ipsum ", (size-len(line))/12))
		b.WriteString("end.")
	}
	return b.String()
}

func TestSplitText(t *testing.T) {
	codeLines := make([]string, 3000)
	for i := range codeLines {
		codeLines[i] = fmt.Sprintf("    fmt.Println(%d, \"<tag> & more\")", i)
	}
	code := "Here is the code:\n\n```go\n" + strings.Join(codeLines, "\n") + "\n```\n\nThat was it."
	tests := []struct {
		name  string
		text  string
		opts  SendOptions
		edit  bool
		parts int // exact number of parts; 0: more than one
		// ends is what every part but the last ends with ("" to skip).
		ends string
		// fenced: a code fence was cut, so the parts are not a plain
		// split of the text.
		fenced bool
	}{
		{name: "short", text: "hello", parts: 1},
		{name: "empty", text: "", parts: 1},
		{name: "ascii paragraphs", text: paragraphs(150, 1000), ends: "\n\n"},
		{name: "ascii paragraphs in a thread", text: paragraphs(150, 1000), opts: SendOptions{ThreadRoot: "$root:example.org", ReplyTo: "$q:example.org"}, ends: "\n\n"},
		{name: "first part as an edit", text: paragraphs(150, 1000), edit: true, ends: "\n\n"},
		{name: "lines without blank lines", text: strings.Repeat("a line of text that goes on\n", 5000), ends: "\n"},
		{name: "multibyte", text: strings.Repeat("héllo wörld ✓ 日本語テキスト 🙂 ", 6000), ends: " "},
		{name: "single huge line without spaces", text: strings.Repeat("日本語🙂x", 30000)},
		{name: "single huge word edited", text: strings.Repeat("z", 150000), edit: true},
		{name: "html expansion", text: strings.Repeat("**<&>** ", 2500), ends: " "},
		{name: "code block", text: code, fenced: true},
		{name: "plain text option", text: strings.Repeat("<p>not html</p>\n", 8000), opts: SendOptions{PlainText: true}, ends: "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parts := SplitText(tt.text, tt.opts, tt.edit)
			switch {
			case tt.parts > 0 && len(parts) != tt.parts:
				t.Fatalf("%d parts, want %d", len(parts), tt.parts)
			case tt.parts == 0 && len(parts) < 2:
				t.Fatalf("%d part(s), want several (the whole content is %d bytes)", len(parts), contentSize(tt.text, tt.opts, tt.edit))
			}
			if again := SplitText(tt.text, tt.opts, tt.edit); !slices.Equal(parts, again) {
				t.Error("splitting the same text twice gave different parts")
			}
			if first, more := FirstPart(tt.text, tt.opts, tt.edit); first != parts[0] || more != (len(parts) > 1) {
				t.Errorf("FirstPart = %d bytes, more %v; SplitText's first part has %d bytes of %d parts", len(first), more, len(parts[0]), len(parts))
			}
			for i, p := range parts {
				if size := contentSize(p, tt.opts, tt.edit && i == 0); size > MaxContentBytes {
					t.Errorf("part %d: %d bytes of content, over %d", i, size, MaxContentBytes)
				}
				if !utf8.ValidString(p) {
					t.Errorf("part %d is not valid UTF-8", i)
				}
				if len(parts) > 1 && strings.TrimSpace(p) == "" {
					t.Errorf("part %d is blank", i)
				}
				if tt.ends != "" && i < len(parts)-1 && !strings.HasSuffix(p, tt.ends) {
					t.Errorf("part %d ends with %q, want a cut after %q", i, p[max(0, len(p)-12):], tt.ends)
				}
			}
			joined := strings.Join(parts, "")
			if tt.fenced {
				checkFences(t, parts)
				joined = strings.ReplaceAll(joined, "``````go\n", "")
			}
			if joined != tt.text {
				t.Errorf("joined parts (%d bytes) differ from the text (%d bytes)", len(joined), len(tt.text))
			}
		})
	}
}

// checkFences checks that every part has balanced code fences and that the
// parts after the first continue the block with its info string.
func checkFences(t *testing.T, parts []string) {
	t.Helper()
	for i, p := range parts {
		if _, open := openFence(p); open {
			t.Errorf("part %d leaves a code block open", i)
		}
		if i > 0 && i < len(parts)-1 && !strings.HasPrefix(p, "```go\n") {
			t.Errorf("part %d does not reopen the code block: %q", i, p[:min(len(p), 20)])
		}
		if i < len(parts)-1 && !strings.HasSuffix(p, "\n```") {
			t.Errorf("part %d does not close the code block: %q", i, p[max(0, len(p)-20):])
		}
	}
}

func TestOpenFence(t *testing.T) {
	tests := []struct {
		text   string
		open   bool
		opener string
	}{
		{"no code", false, ""},
		{"```\ncode", true, "```"},
		{"```python\ncode\n```\n", false, ""},
		{"~~~~ sh\ncode\n~~~\nstill", true, "~~~~ sh"},
		{"~~~~ sh\ncode\n~~~~~\nafter", false, ""},
		{"```js\n~~~\n", true, "```js"},
		{"    ```\nindented code, not a fence", false, ""},
		{"``` a`b\nnot a fence", false, ""},
		{"``\nnot a fence", false, ""},
	}
	for _, tt := range tests {
		f, open := openFence(tt.text)
		if open != tt.open || f.opener != tt.opener {
			t.Errorf("openFence(%q) = %q, %v; want %q, %v", tt.text, f.opener, open, tt.opener, tt.open)
		}
	}
}

func TestCutUTF8(t *testing.T) {
	s := "aé🙂b" // 1 + 2 + 4 + 1 bytes
	for n, want := range []int{0, 1, 1, 3, 3, 3, 3, 7, 8, 8} {
		if got := cutUTF8(s, n); got != want {
			t.Errorf("cutUTF8(%q, %d) = %d, want %d", s, n, got, want)
		}
	}
}

// The estimate nextPart searches with renders as SendText does: the same
// size, except for the mentions of users linked with pills, which it
// leaves out (the part is then checked with the exact size).
func TestEstimatedSize(t *testing.T) {
	for _, tc := range []struct {
		name  string
		text  string
		opts  SendOptions
		pills int
	}{
		{name: "plain words", text: "hello there"},
		{name: "empty", text: ""},
		{name: "markdown", text: "# Title\n\nSome **bold**, _italic_, ~~struck~~ and `code`.\n\n- a\n- b\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"},
		{name: "raw html is escaped", text: "<script>alert(1)</script> & <b>not bold</b>"},
		{name: "code block", text: "```go\nfmt.Println(\"<tag> & more\")\n```\n"},
		{name: "spoiler", text: "||hidden|| text"},
		{name: "hard line breaks", text: "one\ntwo\nthree"},
		{name: "notice in a thread", text: "**done**", opts: SendOptions{Notice: true, ThreadRoot: "$root:example.org", Mentions: []id.UserID{"@a:example.org"}}},
		{name: "plain text option", text: "<p>not html</p>", opts: SendOptions{PlainText: true}},
		{name: "a pill", text: "ask [Alice](https://matrix.to/#/@alice:example.org) about it", pills: 1},
		{name: "long paragraphs", text: paragraphs(20, 500)},
		{name: "trailing space", text: strings.Repeat("All work and no play. ", 50)},
		{name: "leading and trailing blank lines", text: "\n\n  indented words \n\n"},
		{name: "quotes and apostrophes", text: `"quoted" and it's fine`},
		{name: "an entity typed", text: "fish &amp; chips"},
		{name: "escaped markdown", text: `\*not emphasis\* and 2 < 3`},
		{name: "a bare url", text: "see https://example.org/a_b?c=d&e=f"},
		{name: "multibyte", text: "héllo wörld ✓ 日本語テキスト 🙂"},
	} {
		for _, edit := range []bool{false, true} {
			exact, estimate := contentSize(tc.text, tc.opts, edit), estimatedSize(tc.text, tc.opts, edit)
			switch {
			case tc.pills == 0 && estimate != exact:
				t.Errorf("%s (edit %v): estimated %d bytes, SendText's content has %d", tc.name, edit, estimate, exact)
			case tc.pills > 0 && (estimate >= exact || exact-estimate > 100*tc.pills):
				t.Errorf("%s (edit %v): estimated %d bytes, SendText's content has %d: want a little less (the pills' mentions)", tc.name, edit, estimate, exact)
			}
		}
	}
}

// BenchmarkSplitText splits a 150 kB Markdown reply into the parts a turn
// sends (what a long answer costs before its first part goes out).
func BenchmarkSplitText(b *testing.B) {
	text := paragraphs(150, 1000)
	for b.Loop() {
		SplitText(text, SendOptions{}, false)
	}
}
