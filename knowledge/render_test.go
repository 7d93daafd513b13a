package knowledge

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

func TestRenderHitsIsByteStable(t *testing.T) {
	hits := []Hit{
		{Chunk: Chunk{ID: "3", Base: "wiki", Path: "a.md", StartLine: 1, EndLine: 2, Text: "wiki a"}, Score: 9},
		{Chunk: Chunk{ID: "2", Base: "docs", Path: "b.md", StartLine: 10, EndLine: 12, Heading: "B > C", Text: "docs b10"}, Score: 5},
		{Chunk: Chunk{ID: "1", Base: "docs", Path: "b.md", StartLine: 2, EndLine: 4, Text: "docs b2"}, Score: 7},
	}
	want := "[docs] b.md:2-4\ndocs b2\n\n[docs] b.md:10-12 (B > C)\ndocs b10\n\n[wiki] a.md:1-2\nwiki a"
	if got := RenderHits(hits); got != want {
		t.Fatalf("RenderHits =\n%s\nwant\n%s", got, want)
	}
	reordered := []Hit{hits[2], hits[0], hits[1]}
	reordered[0].Score = 1 // another search, other scores
	if got := RenderHits(reordered); got != want {
		t.Fatalf("another order renders differently:\n%s", got)
	}
	if RenderHits(nil) != "" {
		t.Fatal("no hits should render as nothing")
	}
}

func toolIndex(t *testing.T) *Index {
	t.Helper()
	dir, other := t.TempDir(), t.TempDir()
	writeFile(t, dir, "guide.md", install)
	writePDF(t, dir, "manual.pdf", [][]string{{"Contents"}, {"The bilby burrows."}}, pdfOptions{})
	writeFile(t, other, "faq.md", "# FAQ\n\nThe quokka smiles.\n")
	ix, _ := newIndex(t, dbtest.SQLite, dir, nil, func(o *Options) { o.Bases["faq"] = BaseOptions{Paths: []string{other}} })
	if _, err := ix.ReindexAll(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestTool(t *testing.T) {
	ix := toolIndex(t)
	tool := ix.Tool([]string{"docs", "faq"}, 3)
	if err := agents.ValidateToolSpec(tool.Spec()); err != nil || tool.Spec().Name != "search_knowledge" {
		t.Fatalf("spec %+v: %v", tool.Spec(), err)
	}
	cases := []struct {
		name, args, want, err string
	}{
		{"both bases", `{"query":"quokka"}`, "2 passage(s), best first:\n\n1. [", ""},
		{"one base", `{"query":"quokka","base":"faq"}`, "1 passage(s), best first:\n\n1. [faq] faq.md:1-3 (FAQ)\n# FAQ\n\nThe quokka smiles.", ""},
		{"limit", `{"query":"quokka","limit":1}`, "1 passage(s)", ""},
		{"a PDF page", `{"query":"bilby"}`, "1 passage(s), best first:\n\n1. [docs] manual.pdf:p2\nThe bilby burrows.", ""},
		{"nothing", `{"query":"giraffe"}`, `No passage matched "giraffe".`, ""},
		{"base not allowed", `{"query":"x","base":"secret"}`, "", `unknown knowledge base "secret"; available: docs, faq`},
		{"no query", `{"limit":2}`, "", "query is required"},
		{"bad json", `{"query":`, "", "invalid arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tool.Call(t.Context(), json.RawMessage(tc.args))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Call = %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || !strings.HasPrefix(got, tc.want) {
				t.Fatalf("Call = %q, %v; want it to start with %q", got, err, tc.want)
			}
		})
	}
	if _, err := ix.Call(t.Context(), nil, 3, json.RawMessage(`{"query":"x"}`)); err == nil {
		t.Fatal("an agent without bases searched")
	}
}

func TestEnrichment(t *testing.T) {
	ix := toolIndex(t)
	item, ok, err := ix.Enrichment(t.Context(), []string{"docs"}, "which package for Debian?", 2)
	if err != nil || !ok {
		t.Fatalf("Enrichment = %v, %v", ok, err)
	}
	want := "Passages from the knowledge bases that may answer the message; cite them as path:start-end.\n\n" +
		"[docs] guide.md:5-7 (Install > Debian)\n## Debian\n\nUse the quokka package from the archive."
	if item.Key != EnrichmentKey || item.CachePolicy != hooks.Volatile || item.Transient || item.Text != want {
		t.Fatalf("item %+v", item)
	}
	again, _, _ := ix.Enrichment(t.Context(), []string{"docs"}, "which package for Debian?", 2)
	if again != item {
		t.Fatal("the same message enriched differently")
	}
	item, ok, err = ix.Enrichment(t.Context(), []string{"docs"}, "bilby or quokka package?", 2)
	want = "Passages from the knowledge bases that may answer the message; cite them as path:start-end (lines), or path:pN (page N of a PDF).\n\n" +
		"[docs] guide.md:5-7 (Install > Debian)\n## Debian\n\nUse the quokka package from the archive.\n\n" +
		"[docs] manual.pdf:p2\nThe bilby burrows."
	if err != nil || !ok || item.Text != want {
		t.Fatalf("item with a PDF page %+v, %v; want text %q", item, err, want)
	}
	if _, ok, err := ix.Enrichment(t.Context(), []string{"docs"}, "giraffes", 2); ok || err != nil {
		t.Fatalf("Enrichment of an unmatched message = %v, %v; want no item", ok, err)
	}
}
