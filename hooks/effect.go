package hooks

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// What a successful hook run changed: every context type's describe
// compares the designated fields of the hook's copy after the run with
// before, the context the hook got its copy from (serial modes: the draft
// or state of the chain before the hook; collectors: the items the hook
// added, before being unused). With detail false only the Effect is
// computed, without allocating; with detail the Change text too
// (HookRun.Change).

// changeCut is about how many bytes of a value a Change shows.
const changeCut = 120

// cutQuote quotes s (strconv.Quote), cut to changeCut bytes on a UTF-8
// boundary; a cut value ends with "…" after the quotes.
func cutQuote(s string) string {
	if len(s) <= changeCut {
		return strconv.Quote(s)
	}
	i := changeCut
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return strconv.Quote(s[:i]) + "…"
}

// effect is the Effect of a run that changed its designated fields or not,
// setting suppress among them or not.
func effect(changed, suppressed bool) Effect {
	switch {
	case suppressed:
		return EffectSuppressed
	case changed:
		return EffectChanged
	}
	return EffectUnchanged
}

// changes builds a Change: entries joined by "; ".
type changes struct{ b strings.Builder }

func (c *changes) add(s string) {
	if c.b.Len() > 0 {
		c.b.WriteString("; ")
	}
	c.b.WriteString(s)
}

// text adds `name: "from" → "to"`.
func (c *changes) text(name, from, to string) {
	c.add(name + ": " + cutQuote(from) + " → " + cutQuote(to))
}

// flag adds `name: from → to`.
func (c *changes) flag(name string, from, to bool) {
	c.add(name + ": " + strconv.FormatBool(from) + " → " + strconv.FormatBool(to))
}

// value adds `name: "v"`.
func (c *changes) value(name, v string) { c.add(name + ": " + cutQuote(v)) }

func (c *changes) String() string { return c.b.String() }

// describeItems is a collector hook's Change: `+2 items: message_context
// "weather", message_context "time"`, the list cut after about changeCut
// bytes. block names the block an item goes to.
func describeItems(items []EnrichmentItem, block func(EnrichmentItem) string) string {
	var b strings.Builder
	b.WriteString("+")
	b.WriteString(strconv.Itoa(len(items)))
	if len(items) == 1 {
		b.WriteString(" item: ")
	} else {
		b.WriteString(" items: ")
	}
	start := b.Len()
	for i, it := range items {
		if b.Len()-start >= changeCut {
			b.WriteString(", …")
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(block(it))
		b.WriteString(" ")
		b.WriteString(cutQuote(it.Key))
	}
	return b.String()
}

// sameTrace reports whether two tool traces are equal.
func sameTrace(a, b []ToolTraceEntry) bool {
	return slices.EqualFunc(a, b, func(x, y ToolTraceEntry) bool {
		return x.Tool == y.Tool && x.Result == y.Result && x.Error == y.Error &&
			x.Blocked == y.Blocked && x.Duration == y.Duration && bytes.Equal(x.Args, y.Args)
	})
}

// describeTrace is a tool trace's Change entry.
func describeTrace(from, to []ToolTraceEntry) string {
	if len(from) == len(to) {
		return "tool_trace: " + strconv.Itoa(len(to)) + " entries edited"
	}
	return "tool_trace: " + strconv.Itoa(len(from)) + " → " + strconv.Itoa(len(to)) + " entries"
}
