package enrich

import (
	"strings"
	"unicode"

	"github.com/hookroom/hookroom/hooks"
)

// KeyMatrixMessageTarget is the key of the item that tells the model where its
// reply will be delivered (room, thread). The runtime owns it: it renders that
// item itself into the transient block, and Build drops any hook item that
// uses the key so a plugin cannot redirect or impersonate it.
const KeyMatrixMessageTarget = "matrix_message_target"

// ReservedKeys returns the item keys that belong to the runtime. Build drops
// hook items with one of these keys. The slice is a fresh copy on every call.
func ReservedKeys() []string {
	return []string{KeyMatrixMessageTarget}
}

// IsReserved reports whether key is one of ReservedKeys. The hook engine may
// use it to reject such items early; Build applies it regardless.
func IsReserved(key string) bool {
	switch key {
	case KeyMatrixMessageTarget:
		return true
	}
	return false
}

// Turn is what the enrichment of one turn produces for the model call. Only
// Prompt is stored; the other fields are rebuilt on every run.
type Turn struct {
	// Prompt is the model-facing user turn: the user's text with the
	// persisted message-context block appended. It is what session history
	// stores, so replaying history sends the model byte-identical prompts.
	Prompt string
	// Transient is a transient-context block (or "") sent to the model as a
	// separate user message immediately before Prompt. It is never stored.
	Transient string
	// System is a system-context block (or "") appended to the agent's system
	// prompt for this run only. It is never stored.
	System string
	// SystemStable is how many leading bytes of System are rendered from
	// Stable items only (the whole block when every item is Stable, 0 when
	// none is): that prefix is the same on every turn that collects the
	// same stable items, so a provider may cache the prompt up to its end.
	SystemStable int
}

// Build splits and renders the items collected for one turn:
//
//   - Items whose key is empty or reserved (IsReserved) are dropped, from
//     both message and system.
//   - message items with Transient=false are persisted: rendered in
//     collector order by RenderMessage and appended to the user text as
//     TrimRight(userText) + "\n\n" + block, where TrimRight removes trailing
//     whitespace as Python's str.rstrip() does (Unicode White_Space plus the
//     separators U+001C–U+001F). Without persisted items Prompt is userText
//     unchanged, untrimmed. Empty userText with items gives "\n\n" + block.
//   - message items with Transient=true are rendered by RenderMessage (in
//     collector order) as the first part of the transient block, followed by
//     the non-empty extraTransient parts in order, exactly as
//     RenderTransient(block, extraTransient...) would; Transient is "" when
//     there is nothing to send.
//   - system items are rendered by RenderSystem (stable first, each group
//     sorted by key); their Transient flag is ignored because the system
//     block is never stored anyway. SystemStable ends after the last Stable
//     item (or covers the whole block when all are Stable).
//
// Build is a pure function: it neither modifies its arguments nor keeps
// them, and the same arguments always give the same Turn. extraTransient
// parts are inserted verbatim; the runtime uses them for context it renders
// itself (its matrix_message_target item, memory lookups, …).
func Build(userText string, message, system []hooks.EnrichmentItem, extraTransient ...string) Turn {
	sys, stable := renderSystem(system, selectKept)
	return Turn{
		Prompt:       buildPrompt(userText, message),
		Transient:    renderTransient(message, selectTransient, extraTransient),
		System:       sys,
		SystemStable: stable,
	}
}

// buildPrompt appends the persisted message block to the trimmed user text
// with a single allocation.
func buildPrompt(userText string, items []hooks.EnrichmentItem) string {
	itemsLen, count := messageItemsLen(items, selectPersisted)
	if count == 0 {
		return userText
	}
	head := strings.TrimRightFunc(userText, isPySpace)
	var b strings.Builder
	b.Grow(len(head) + len(promptSep) + len(messageOpen) + itemsLen + len(messageClose))
	b.WriteString(head)
	b.WriteString(promptSep)
	b.WriteString(messageOpen)
	writeMessageItems(&b, items, selectPersisted)
	b.WriteString(messageClose)
	return b.String()
}

// promptSep separates the user's text from the persisted block.
const promptSep = "\n\n"

// isPySpace reports whether Python's str.isspace() is true for r: the
// Unicode White_Space characters that unicode.IsSpace covers plus the ASCII
// information separators U+001C–U+001F.
func isPySpace(r rune) bool {
	return unicode.IsSpace(r) || (r >= 0x1c && r <= 0x1f)
}
