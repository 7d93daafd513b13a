package matrixio

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

var update = flag.Bool("update", false, "rewrite testdata/render/*.json from the current output")

// TestRenderGolden pins the exact JSON content SendText and Edit put on the
// wire: Markdown rendering, HTML escaping, relations, mentions and extra
// fields.
func TestRenderGolden(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		opts    SendOptions
		editOf  id.EventID // non-empty: render as an edit of this event
		wantFmt bool       // expect formatted_body
	}{
		{name: "plain", text: "just words"},
		{name: "markdown", text: "**bold** and _italic_\n\n- one\n- two\n\n`code` and [link](https://example.org)", wantFmt: true},
		{name: "code_block", text: "```go\nfmt.Println(\"<hi>\")\n```", wantFmt: true},
		{name: "raw_html_escaped", text: "<script>alert(1)</script> **x**", wantFmt: true},
		{name: "table", text: "| a | b |\n|---|---|\n| 1 | 2 |", wantFmt: true},
		{name: "plain_text_option", text: "**not bold**", opts: SendOptions{PlainText: true}},
		{name: "notice", text: "status", opts: SendOptions{Notice: true}},
		{name: "thread_fallback_root", text: "in thread", opts: SendOptions{ThreadRoot: "$root"}},
		{name: "thread_fallback_latest", text: "in thread", opts: SendOptions{ThreadRoot: "$root", ThreadFallback: "$latest"}},
		{name: "thread_real_reply", text: "answer", opts: SendOptions{ThreadRoot: "$root", ReplyTo: "$question"}},
		{name: "plain_reply", text: "answer", opts: SendOptions{ReplyTo: "$question"}},
		{name: "mentions", text: "hi [Alice](https://matrix.to/#/@alice:example.org)", opts: SendOptions{Mentions: []id.UserID{"@zed:example.org", "@bob:example.org"}}, wantFmt: true},
		{name: "mention_room", text: "everyone", opts: SendOptions{MentionRoom: true}},
		{name: "extra_fields", text: "hi", opts: SendOptions{Extra: map[string]any{"io.hookroom.agent": "helper", "body": "cannot override"}}},
		{name: "edit", text: "new **text**", editOf: "$orig", wantFmt: true},
		{name: "edit_extra", text: "done", editOf: "$orig", opts: SendOptions{Extra: map[string]any{"io.hookroom.stream": "final"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var content *event.Content
			if tt.editOf != "" {
				content = editContent(tt.editOf, tt.text, tt.opts)
			} else {
				content = textContent(tt.text, tt.opts)
			}
			// Re-encode through a generic value without HTML escaping so the
			// golden files stay readable (keys sorted).
			wire, err := json.Marshal(content)
			if err != nil {
				t.Fatal(err)
			}
			var generic any
			if err := json.Unmarshal(wire, &generic); err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(generic); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			path := filepath.Join("testdata", "render", tt.name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("missing golden file (run with -update): %v", err)
			}
			if string(got) != string(want) {
				t.Errorf("content differs from %s\n--- got\n%s\n--- want\n%s", path, got, want)
			}

			// Independent checks on the decoded content, so a wrong golden
			// file cannot hide a wrong rendering.
			var decoded map[string]any
			if err := json.Unmarshal(got, &decoded); err != nil {
				t.Fatal(err)
			}
			_, hasFmt := decoded["formatted_body"]
			if hasFmt != tt.wantFmt {
				t.Errorf("formatted_body present = %v, want %v", hasFmt, tt.wantFmt)
			}
			if tt.editOf == "" {
				if decoded["body"] != tt.text {
					t.Errorf("body = %q, want the original text %q", decoded["body"], tt.text)
				}
			} else {
				nc, _ := decoded["m.new_content"].(map[string]any)
				if nc["body"] != tt.text {
					t.Errorf("m.new_content.body = %q, want %q", nc["body"], tt.text)
				}
			}
			if _, ok := decoded["m.mentions"]; !ok {
				t.Error("m.mentions missing: every message must say whom it pings")
			}
		})
	}
}
