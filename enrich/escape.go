package enrich

import "strings"

// The five replacements, the same as Python's html.escape(s, quote=True) so
// that the rendered blocks match MindRoom's byte for byte. (The standard
// library's html.EscapeString writes &#39; and &#34; instead.)
const (
	escAmp  = "&amp;"
	escLt   = "&lt;"
	escGt   = "&gt;"
	escQuot = "&quot;"
	escApos = "&#x27;"
)

// escapeExtra maps a byte to how many bytes its replacement adds (0 for a byte
// that is copied as is). Indexing a [256] table with a byte needs no bounds
// check, so the hot loops below are branch-light.
var escapeExtra = [256]uint8{
	'&':  uint8(len(escAmp) - 1),
	'<':  uint8(len(escLt) - 1),
	'>':  uint8(len(escGt) - 1),
	'"':  uint8(len(escQuot) - 1),
	'\'': uint8(len(escApos) - 1),
}

// escapedLen is the length of s once escaped, computed without building it.
func escapedLen(s string) int {
	n := len(s)
	for i := 0; i < len(s); i++ {
		n += int(escapeExtra[s[i]])
	}
	return n
}

// writeEscaped writes s to b with the five special characters replaced. Every
// other byte, including invalid UTF-8 and control characters, is copied
// unchanged; runs without special characters are copied in one write.
func writeEscaped(b *strings.Builder, s string) {
	last := 0
	for i := 0; i < len(s); i++ {
		if escapeExtra[s[i]] == 0 {
			continue
		}
		b.WriteString(s[last:i])
		switch s[i] {
		case '&':
			b.WriteString(escAmp)
		case '<':
			b.WriteString(escLt)
		case '>':
			b.WriteString(escGt)
		case '"':
			b.WriteString(escQuot)
		default:
			b.WriteString(escApos)
		}
		last = i + 1
	}
	b.WriteString(s[last:])
}
