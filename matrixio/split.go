package matrixio

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/format"
	"maunium.net/go/mautrix/format/mdext"
	"maunium.net/go/mautrix/id"
)

// MaxContentBytes is the most JSON content one message sent by SendText or
// Edit may carry. Homeservers refuse events above 64 KiB of JSON (with their
// signatures, hashes and references), and in an encrypted room the content
// grows by a third as base64 ciphertext, so the budget stays well below.
const MaxContentBytes = 40 * 1024

// splitTarget stands for the event an edit replaces when its size is
// measured: longer than any real event id, so the estimate errs on the safe
// side.
const splitTarget = id.EventID("$splitsplitsplitsplitsplitsplitsplitsplitsplitsplitsplitsplit")

// SplitText cuts text into parts that each fit in one message event (at most
// MaxContentBytes of JSON content, rendered with opts as SendText renders
// it, formatted_body included). When edit is true the first part is sized
// for Edit instead, whose content holds m.new_content and a fallback body
// (which mautrix cuts short for a long text). A text that fits is returned
// as the only part.
//
// Parts end at the best boundary near the limit: after a blank line, else
// after a line break, else after a space, else between two characters
// (never inside a UTF-8 sequence). A fenced code block that a cut runs
// through is closed at the end of the part and opened again, with its info
// string, at the start of the next one; otherwise the parts joined give
// text back byte for byte. The result depends only on its arguments, so a
// replayed turn splits its reply the same way.
//
// Call it before sending a reply of unknown length; send the parts in
// order, each with its own transaction key.
func SplitText(text string, opts SendOptions, edit bool) []string {
	var parts []string
	for rest := text; rest != ""; {
		part, next := nextPart(rest, opts, edit && len(parts) == 0)
		parts = append(parts, part)
		rest = next
	}
	if len(parts) == 0 {
		parts = []string{text}
	}
	return parts
}

// FirstPart returns the first part SplitText would return, and whether
// more follow, without splitting the rest: what a streaming edit can show.
func FirstPart(text string, opts SendOptions, edit bool) (first string, more bool) {
	part, rest := nextPart(text, opts, edit)
	return part, rest != ""
}

// nextPart returns the first part of text and what is left after it (with
// a reopened code fence in front when the cut ran through one).
func nextPart(text string, opts SendOptions, edit bool) (part, rest string) {
	fits := func(s string) bool { return contentSize(s, opts, edit) <= MaxContentBytes }
	if len(text) <= MaxContentBytes && fits(text) {
		return text, ""
	}
	// The longest prefix that fits, to within 1/128 of it (a boundary is
	// picked below anyway), searched with the estimate; the part is
	// checked with the exact size below. The body alone is part of the
	// content, so no prefix longer than the budget can fit.
	lo, hi := 0, min(len(text), MaxContentBytes)
	for hi-lo > max(1, hi/128) {
		mid := cutUTF8(text, lo+(hi-lo)/2)
		if mid <= lo {
			break
		}
		if estimatedSize(text[:mid], opts, edit) <= MaxContentBytes {
			lo = mid
		} else {
			hi = mid
		}
	}
	for limit := lo; ; {
		cut := boundary(text, limit)
		if cut == 0 {
			// Nothing fits, not even one character (a pathological
			// expansion): take one character so the split ends.
			_, size := utf8.DecodeRuneInString(text)
			return text[:size], text[size:]
		}
		part, rest = text[:cut], text[cut:]
		if fence, open := openFence(part); open && len(fence.opener) < 1024 {
			if !strings.HasSuffix(part, "\n") {
				part += "\n"
			}
			part += fence.closer
			rest = fence.opener + "\n" + rest
		}
		if fits(part) {
			return part, rest
		}
		// Rendering is not quite monotonic (a closed fence, an entity):
		// step back and try again.
		limit = cutUTF8(text, cut-max(1, cut/16))
	}
}

// contentSize is the size of the JSON content SendText (or, for edit, Edit)
// sends for text with opts.
func contentSize(text string, opts SendOptions, edit bool) int {
	return sizeOf(renderText(text, opts), opts, edit)
}

// estimatedSize is contentSize without the step that costs most and weighs
// least: mautrix parses the HTML it rendered back into text to find the
// users linked with pills, which takes four times as long as rendering and
// adds a few dozen bytes per pill to m.mentions. Without those mentions it
// renders the same way.
func estimatedSize(text string, opts SendOptions, edit bool) int {
	if opts.PlainText {
		return contentSize(text, opts, edit)
	}
	var buf strings.Builder
	if err := markdown.Convert([]byte(text), &buf); err != nil {
		return contentSize(text, opts, edit)
	}
	// mautrix sends formatted_body when the HTML, parsed back to text, is not
	// the HTML itself: when it has a tag or an entity.
	content := event.MessageEventContent{Body: text}
	if html := format.UnwrapSingleParagraph(buf.String()); strings.ContainsAny(html, "<&") {
		content.FormattedBody, content.Format = html, event.FormatHTML
	}
	return sizeOf(finishContent(content, opts), opts, edit)
}

// markdown renders as format.RenderMarkdown(text, true, false) does: its
// extensions and options, raw HTML escaped (TestEstimatedSize compares).
var markdown = goldmark.New(format.Extensions, format.HTMLOptions, goldmark.WithExtensions(mdext.EscapeHTML))

// sizeOf is the size of the JSON content of msg sent as a message (or, for
// edit, as an edit).
func sizeOf(msg *event.MessageEventContent, opts SendOptions, edit bool) int {
	var content any
	if edit {
		content = editContentOf(splitTarget, msg, opts)
	} else {
		content = textContentOf(msg, opts)
	}
	raw, err := json.Marshal(content)
	if err != nil {
		return MaxContentBytes + 1
	}
	return len(raw)
}

// cutUTF8 returns the largest n' <= n at which s can be cut without
// splitting a UTF-8 sequence.
func cutUTF8(s string, n int) int {
	if n >= len(s) {
		return len(s)
	}
	if n <= 0 {
		return 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// boundary returns where to end a part of at most limit bytes of s: after
// the last blank line, line break or space in the second half of the
// limit, in that order of preference, else at limit itself (on a character
// boundary).
func boundary(s string, limit int) int {
	limit = cutUTF8(s, limit)
	if limit <= 0 {
		return 0
	}
	head, floor := s[:limit], limit/2
	for _, sep := range []string{"\n\n", "\n", " "} {
		if i := strings.LastIndex(head, sep); i >= 0 && i+len(sep) > floor {
			return i + len(sep)
		}
	}
	return limit
}

// fence is an open fenced code block: the line that opened it and the
// line that closes it.
type fence struct {
	opener string
	closer string
}

// openFence reports the fenced code block (``` or ~~~, CommonMark) that is
// still open at the end of s.
func openFence(s string) (fence, bool) {
	var (
		cur  fence
		char byte
		n    int
	)
	for line := range strings.Lines(s) {
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimLeft(line, " ")
		if len(line)-len(trimmed) > 3 || len(trimmed) < 3 || (trimmed[0] != '`' && trimmed[0] != '~') {
			continue
		}
		c := trimmed[0]
		run := len(trimmed) - len(strings.TrimLeft(trimmed, string(c)))
		if run < 3 {
			continue
		}
		if n == 0 {
			if c == '`' && strings.Contains(trimmed[run:], "`") {
				continue // not a fence: backticks in the info string
			}
			char, n = c, run
			cur = fence{opener: line, closer: strings.Repeat(string(c), run)}
			continue
		}
		if c == char && run >= n && strings.TrimSpace(trimmed[run:]) == "" {
			n, cur = 0, fence{}
		}
	}
	return cur, n > 0
}
