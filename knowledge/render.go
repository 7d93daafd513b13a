package knowledge

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
)

// EnrichmentKey is the key of the item Enrichment returns.
const EnrichmentKey = "knowledge"

// RenderHits renders hits for the model, one passage after another
// separated by a blank line, each headed by its citation, base and heading:
//
//	[handbook] guide/install.md:12-30 (Install > Debian)
//	…text…
//
// The passages are ordered by base, path and line, not by score, so the
// same hits always render to the same bytes.
func RenderHits(hits []Hit) string {
	sorted := slices.Clone(hits)
	slices.SortFunc(sorted, func(a, b Hit) int {
		return cmp.Or(strings.Compare(a.Base, b.Base), strings.Compare(a.Path, b.Path),
			cmp.Compare(a.StartLine, b.StartLine), cmp.Compare(a.EndLine, b.EndLine), strings.Compare(a.ID, b.ID))
	})
	var b strings.Builder
	for i, h := range sorted {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString("[" + h.Base + "] " + h.Citation())
		if h.Heading != "" {
			b.WriteString(" (" + h.Heading + ")")
		}
		b.WriteString("\n" + h.Text)
	}
	return b.String()
}

// Enrichment returns the message:enrich item for a person's message: the
// top chunks of bases for text, rendered by RenderHits under a line that
// tells the model to cite them (and how to cite a PDF's page, when a hit is
// one). ok is false when nothing matched (add no
// item then). The item is volatile and persisted with the turn, so a
// replayed history is byte-identical.
func (ix *Index) Enrichment(ctx context.Context, bases []string, text string, topK int) (item hooks.EnrichmentItem, ok bool, err error) {
	hits, err := ix.Search(ctx, bases, text, topK)
	if err != nil || len(hits) == 0 {
		return hooks.EnrichmentItem{}, false, err
	}
	cite := "path:start-end"
	if slices.ContainsFunc(hits, func(h Hit) bool { return isPDF(h.Path) }) {
		cite = "path:start-end (lines), or path:pN (page N of a PDF)"
	}
	return hooks.EnrichmentItem{
		Key:         EnrichmentKey,
		Text:        "Passages from the knowledge bases that may answer the message; cite them as " + cite + ".\n\n" + RenderHits(hits),
		CachePolicy: hooks.Volatile,
	}, true, nil
}

// ToolName is the name of the knowledge search tool.
const ToolName = "search_knowledge"

// ToolSpec describes the search_knowledge tool to the model.
func ToolSpec() agents.ToolSpec {
	return agents.ToolSpec{
		Name: ToolName,
		Description: "Search the knowledge bases (documentation and notes) for passages about a question or keywords. " +
			"Each result starts with its source as path:start-end (lines), or path:pN (page N of a PDF); cite it when you use the passage.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","description":"what to look for: a question or keywords"},` +
			`"limit":{"type":"integer","minimum":1,"maximum":20,"description":"how many passages to return"},` +
			`"base":{"type":"string","description":"search only this knowledge base"}},` +
			`"required":["query"],"additionalProperties":false}`),
	}
}

// toolArgs are the tool's arguments.
type toolArgs struct {
	Query string `json:"query"`
	Limit int    `json:"limit"`
	Base  string `json:"base"`
}

// Tool returns the search_knowledge tool for an agent that may search
// bases, returning topK passages unless the model asks for another number
// (at most 20).
func (ix *Index) Tool(bases []string, topK int) agents.Tool {
	bases = slices.Clone(bases)
	return agents.NewTool(ToolSpec(), func(ctx context.Context, args json.RawMessage) (string, error) {
		return ix.Call(ctx, bases, topK, args)
	})
}

// Call runs one search_knowledge call over bases: what the tool returns
// to the model.
func (ix *Index) Call(ctx context.Context, bases []string, topK int, args json.RawMessage) (string, error) {
	var a toolArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("invalid arguments: %w", err)
	}
	if strings.TrimSpace(a.Query) == "" {
		return "", errors.New("invalid arguments: query is required")
	}
	if len(bases) == 0 {
		return "", errors.New("no knowledge base is available to this agent")
	}
	search := bases
	if a.Base != "" {
		if !slices.Contains(bases, a.Base) {
			return "", fmt.Errorf("unknown knowledge base %q; available: %s", a.Base, strings.Join(bases, ", "))
		}
		search = []string{a.Base}
	}
	limit := topK
	if a.Limit > 0 {
		limit = a.Limit
	}
	limit = min(max(limit, 1), maxTopK)
	hits, err := ix.Search(ctx, search, a.Query, limit)
	if err != nil {
		return "", err
	}
	if len(hits) == 0 {
		return "No passage matched " + strconv.Quote(a.Query) + ".", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d passage(s), best first:", len(hits))
	for i, h := range hits {
		fmt.Fprintf(&b, "\n\n%d. [%s] %s", i+1, h.Base, h.Citation())
		if h.Heading != "" {
			b.WriteString(" (" + h.Heading + ")")
		}
		b.WriteString("\n" + h.Text)
	}
	return b.String(), nil
}
