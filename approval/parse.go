package approval

import (
	"strings"
	"unicode"
)

// Decision is a person's answer to an approval card.
type Decision int

// The answers.
const (
	NoDecision Decision = iota // not an answer
	Approve
	Deny
)

func (d Decision) String() string {
	switch d {
	case Approve:
		return "approve"
	case Deny:
		return "deny"
	}
	return "none"
}

// Reaction keys, without variation selectors or skin tones.
var reactionDecisions = map[string]Decision{
	"✅": Approve, "👍": Approve, "✔": Approve, "☑": Approve, "🆗": Approve,
	"❌": Deny, "👎": Deny, "✖": Deny, "⛔": Deny, "🚫": Deny, "❎": Deny,
}

// ParseReaction reads a reaction key on an approval card: ✅ 👍 ✔️ approve,
// ❌ 👎 ✖️ deny (with or without variation selectors and skin tones); any
// other key is NoDecision.
func ParseReaction(key string) Decision {
	return reactionDecisions[normalizeEmoji(strings.TrimSpace(key))]
}

func normalizeEmoji(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\uFE0F' || r == '\uFE0E': // variation selectors
			return -1
		case r >= 0x1F3FB && r <= 0x1F3FF: // skin tones
			return -1
		}
		return r
	}, s)
}

var replyWords = map[string]Decision{
	"approve": Approve, "approved": Approve, "yes": Approve, "y": Approve, "allow": Approve,
	"ok": Approve, "okay": Approve, "go": Approve, "lgtm": Approve,
	"deny": Deny, "denied": Deny, "no": Deny, "n": Deny, "reject": Deny, "refuse": Deny, "decline": Deny, "stop": Deny,
}

// ParseReply reads a text reply to an approval card: its first word
// ("approve", "yes", "ok", "deny", "no", "reject", …, any case, with
// trailing punctuation) or an approving or denying emoji decides; what
// follows is the reason ("no, not on prod" → Deny, "not on prod"). Quoted
// lines of a rich-reply fallback ("> …") are skipped. Any other text is
// NoDecision: it is a message like any other.
func ParseReply(body string) (Decision, string) {
	var lines []string
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), ">") {
			continue
		}
		lines = append(lines, line)
	}
	text := strings.TrimSpace(strings.Join(lines, "\n"))
	if text == "" {
		return NoDecision, ""
	}
	end := strings.IndexFunc(text, func(r rune) bool {
		return unicode.IsSpace(r) || r == ',' || r == ':' || r == '.' || r == '!' || r == ';' || r == '-'
	})
	word, rest := text, ""
	if end >= 0 {
		word, rest = text[:end], text[end:]
	}
	d, ok := replyWords[strings.ToLower(word)]
	if !ok {
		d = ParseReaction(word)
	}
	if d == NoDecision {
		return NoDecision, ""
	}
	reason := strings.TrimSpace(strings.TrimLeft(rest, " \t\n,:.!;-"))
	return d, reason
}
