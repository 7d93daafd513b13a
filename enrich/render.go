package enrich

import (
	"slices"
	"strings"

	"github.com/hookroom/hookroom/hooks"
)

// Tag names of the three blocks. They are part of the model-facing prompt and
// of persisted history: changing one changes every replayed prompt.
const (
	messageOpen    = "<hookroom_message_context>\n"
	messageClose   = "\n</hookroom_message_context>"
	systemOpen     = "<hookroom_system_context>\n"
	systemClose    = "\n</hookroom_system_context>"
	transientOpen  = "<hookroom_transient_context>\n"
	transientClose = "\n</hookroom_transient_context>"

	itemKeyOpen    = `<item key="`
	itemPolicyOpen = `" cache_policy="`
	itemTextOpen   = "\">\n"
	itemClose      = "\n</item>"

	itemSep      = "\n"
	transientSep = "\n\n"
)

// RenderMessage renders items as a message-context block, the block that is
// appended to the user turn. Items keep the given order (the collector's merge
// order); nothing is sorted, filtered or deduplicated. It returns "" when
// items is empty, otherwise
//
//	<hookroom_message_context>
//	<item key="K" cache_policy="P">
//	TEXT
//	</item>
//	<item …>
//	…
//	</item>
//	</hookroom_message_context>
//
// with no trailing newline. K, P and TEXT are escaped as described in the
// package documentation; an empty cache policy is written as "volatile", any
// other policy verbatim. The result depends only on items, byte for byte.
//
// RenderMessage does not drop empty or reserved keys (Build does), so the
// runtime can render its own reserved items, e.g. a matrix_message_target item
// destined for the transient block.
func RenderMessage(items []hooks.EnrichmentItem) string {
	return renderMessage(items, selectAll)
}

// RenderSystem renders items as a system-context block, the block appended to
// the system prompt of one run. It has the same item layout as RenderMessage
// under the tag hookroom_system_context, but the items are reordered so that
// the block is the same whenever the same items are collected, whatever order
// the hooks finished in: first every Stable item sorted by key, then every
// other item (Volatile, empty, or an unknown policy) sorted by key. Keys are
// compared byte-wise, which for UTF-8 is code-point order; items with equal
// keys keep their given order. It returns "" when items is empty. items itself
// is not modified. Like RenderMessage it drops nothing.
func RenderSystem(items []hooks.EnrichmentItem) string {
	block, _ := renderSystem(items, selectAll)
	return block
}

// RenderTransient wraps the non-empty parts, joined by a blank line, in a
// transient-context block:
//
//	<hookroom_transient_context>
//	PART
//
//	PART
//	</hookroom_transient_context>
//
// It returns "" when there is no non-empty part. Parts are inserted verbatim
// (they are usually already-rendered blocks such as RenderMessage output);
// only empty strings are skipped, whitespace-only parts are kept.
func RenderTransient(parts ...string) string {
	return renderTransient(nil, selectAll, parts)
}

// selector picks which items of a slice a renderer uses.
type selector uint8

const (
	// selectAll uses every item as given (the public Render functions).
	selectAll selector = iota
	// selectKept drops empty and reserved keys (system items in Build).
	selectKept
	// selectPersisted keeps non-transient items with a usable key.
	selectPersisted
	// selectTransient keeps transient items with a usable key.
	selectTransient
)

func (s selector) match(it *hooks.EnrichmentItem) bool {
	switch s {
	case selectAll:
		return true
	case selectKept:
		return usableKey(it.Key)
	case selectPersisted:
		return !it.Transient && usableKey(it.Key)
	case selectTransient:
		return it.Transient && usableKey(it.Key)
	}
	return false
}

func usableKey(key string) bool {
	return key != "" && !IsReserved(key)
}

// policyText is the cache policy as it appears in the cache_policy attribute.
func policyText(p hooks.CachePolicy) string {
	if p == "" {
		return string(hooks.Volatile)
	}
	return string(p)
}

// itemLen is the exact length of the rendered item.
func itemLen(it *hooks.EnrichmentItem) int {
	return len(itemKeyOpen) + escapedLen(it.Key) +
		len(itemPolicyOpen) + escapedLen(policyText(it.CachePolicy)) +
		len(itemTextOpen) + escapedLen(it.Text) + len(itemClose)
}

func writeItem(b *strings.Builder, it *hooks.EnrichmentItem) {
	b.WriteString(itemKeyOpen)
	writeEscaped(b, it.Key)
	b.WriteString(itemPolicyOpen)
	writeEscaped(b, policyText(it.CachePolicy))
	b.WriteString(itemTextOpen)
	writeEscaped(b, it.Text)
	b.WriteString(itemClose)
}

// messageItemsLen returns the length of the selected items joined by newlines
// (without the block tags) and how many were selected.
func messageItemsLen(items []hooks.EnrichmentItem, sel selector) (n, count int) {
	for i := range items {
		if sel.match(&items[i]) {
			n += itemLen(&items[i])
			count++
		}
	}
	if count > 1 {
		n += (count - 1) * len(itemSep)
	}
	return n, count
}

// writeMessageItems writes the selected items joined by newlines.
func writeMessageItems(b *strings.Builder, items []hooks.EnrichmentItem, sel selector) {
	first := true
	for i := range items {
		if !sel.match(&items[i]) {
			continue
		}
		if !first {
			b.WriteString(itemSep)
		}
		first = false
		writeItem(b, &items[i])
	}
}

func renderMessage(items []hooks.EnrichmentItem, sel selector) string {
	n, count := messageItemsLen(items, sel)
	if count == 0 {
		return ""
	}
	var b strings.Builder
	b.Grow(len(messageOpen) + n + len(messageClose))
	b.WriteString(messageOpen)
	writeMessageItems(&b, items, sel)
	b.WriteString(messageClose)
	return b.String()
}

// orderBufLen is how many items renderSystem orders without a heap allocation.
const orderBufLen = 32

// renderSystem renders the system block and says how many of its leading
// bytes come from Stable items only (see Turn.SystemStable).
func renderSystem(items []hooks.EnrichmentItem, sel selector) (string, int) {
	var buf [orderBufLen]int
	order := buf[:0]
	for i := range items {
		if sel.match(&items[i]) {
			order = append(order, i)
		}
	}
	if len(order) == 0 {
		return "", 0
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return compareSystem(&items[a], &items[b])
	})

	n := len(systemOpen) + len(systemClose) + (len(order)-1)*len(itemSep)
	for _, i := range order {
		n += itemLen(&items[i])
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(systemOpen)
	stable, allStable := 0, true
	for k, i := range order {
		if k > 0 {
			b.WriteString(itemSep)
		}
		writeItem(&b, &items[i])
		if items[i].CachePolicy == hooks.Stable {
			stable = b.Len() // stable items come first
		} else {
			allStable = false
		}
	}
	b.WriteString(systemClose)
	if allStable {
		stable = b.Len()
	}
	return b.String(), stable
}

// compareSystem orders system items: Stable before everything else, then by
// key. It is used with a stable sort, so equal keys keep collector order.
func compareSystem(a, b *hooks.EnrichmentItem) int {
	as, bs := a.CachePolicy == hooks.Stable, b.CachePolicy == hooks.Stable
	if as != bs {
		if as {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Key, b.Key)
}

// renderTransient renders the transient block whose first part is the
// message-context block of the selected items (if any are selected), followed
// by the non-empty extra parts. It builds the result with one allocation.
func renderTransient(items []hooks.EnrichmentItem, sel selector, extra []string) string {
	n, parts := 0, 0
	itemsLen, count := 0, 0
	if len(items) > 0 {
		itemsLen, count = messageItemsLen(items, sel)
		if count > 0 {
			n += len(messageOpen) + itemsLen + len(messageClose)
			parts++
		}
	}
	for _, p := range extra {
		if p != "" {
			n += len(p)
			parts++
		}
	}
	if parts == 0 {
		return ""
	}
	n += len(transientOpen) + len(transientClose) + (parts-1)*len(transientSep)

	var b strings.Builder
	b.Grow(n)
	b.WriteString(transientOpen)
	first := true
	if count > 0 {
		b.WriteString(messageOpen)
		writeMessageItems(&b, items, sel)
		b.WriteString(messageClose)
		first = false
	}
	for _, p := range extra {
		if p == "" {
			continue
		}
		if !first {
			b.WriteString(transientSep)
		}
		first = false
		b.WriteString(p)
	}
	b.WriteString(transientClose)
	return b.String()
}
