package console

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// htmlWriter builds a page. Its methods make the safe thing the easy one:
//
//   - text, attr and the helpers built on them escape what they are given
//     (& < > " ' and +, as html/template does), so backend data can only
//     ever be text, and attribute values are always quoted;
//   - href takes a safeURL, which only localURL, queryURL and matrixTo make
//     (or a constant path, or a query url.Values encoded, written in the
//     code): no string from the backend becomes a link by itself, and href
//     normalizes what it writes;
//   - markup writes its argument as it is. It is for the constant markup
//     written in this package only: never give it data.
//
// The pages never get a style attribute or an inline event handler (the
// CSP forbids both): no method writes one.
type htmlWriter struct {
	b bytes.Buffer
}

// markup writes s unescaped: s must be a constant written in the code.
func (w *htmlWriter) markup(s string) { w.b.WriteString(s) }

// text writes s escaped, as text or as the inside of a quoted attribute.
func (w *htmlWriter) text(s string) {
	last := 0
	for i := 0; i < len(s); i++ {
		var esc string
		switch s[i] {
		case '&':
			esc = "&amp;"
		case '<':
			esc = "&lt;"
		case '>':
			esc = "&gt;"
		case '"':
			esc = "&#34;"
		case '\'':
			esc = "&#39;"
		case '+':
			esc = "&#43;"
		case 0:
			esc = "\uFFFD"
		default:
			continue
		}
		w.b.WriteString(s[last:i])
		w.b.WriteString(esc)
		last = i + 1
	}
	w.b.WriteString(s[last:])
}

// itoa writes n in decimal.
func (w *htmlWriter) itoa(n int64) {
	var buf [20]byte
	w.b.Write(strconv.AppendInt(buf[:0], n, 10))
}

// num writes n with thousands separators.
func (w *htmlWriter) num(n int) { w.b.WriteString(fmtNumber(n)) }

// dur writes d in the unit that suits it (fmtDuration).
func (w *htmlWriter) dur(d time.Duration) { w.b.WriteString(fmtDuration(d)) }

// attr writes ` name="value"`, value escaped; name must be a constant.
func (w *htmlWriter) attr(name, value string) {
	w.b.WriteByte(' ')
	w.b.WriteString(name)
	w.b.WriteString(`="`)
	w.text(value)
	w.b.WriteByte('"')
}

// intAttr writes ` name="n"`.
func (w *htmlWriter) intAttr(name string, n int) {
	w.b.WriteByte(' ')
	w.b.WriteString(name)
	w.b.WriteString(`="`)
	w.itoa(int64(n))
	w.b.WriteByte('"')
}

// safeURL is a link the console made: a constant path, localURL, queryURL or
// matrixTo. Converting a backend string to it is the mistake to look for.
type safeURL string

// href writes ` href="u"`, u normalized (every byte a URL may not hold
// percent-encoded) and escaped.
func (w *htmlWriter) href(u safeURL) {
	w.b.WriteString(` href="`)
	w.text(normalizeURL(string(u)))
	w.b.WriteByte('"')
}

// localURL is path (a constant) followed by the escaped segment seg:
// localURL("/turns/", "12").
func localURL(path, seg string) safeURL { return safeURL(path + escapeURLPart(seg)) }

// queryURL is path (a constant ending in "?name=") followed by the escaped
// value v: queryURL("/schedules?cancel=", id).
func queryURL(path, v string) safeURL { return safeURL(path + escapeURLPart(v)) }

// el writes <tag>s</tag>, s escaped; tag must be a constant.
func (w *htmlWriter) el(tag, s string) {
	w.b.WriteByte('<')
	w.b.WriteString(tag)
	w.b.WriteByte('>')
	w.text(s)
	w.b.WriteString("</")
	w.b.WriteString(tag)
	w.b.WriteByte('>')
}

// code writes <code>s</code>.
func (w *htmlWriter) code(s string) { w.el("code", s) }

// td writes <td>s</td>.
func (w *htmlWriter) td(s string) { w.el("td", s) }

// tdCode writes <td><code>s</code></td>.
func (w *htmlWriter) tdCode(s string) {
	w.markup("<td>")
	w.code(s)
	w.markup("</td>")
}

// badge writes <span class="badge class">s</span>.
func (w *htmlWriter) badge(class, s string) {
	w.markup(`<span class="badge `)
	w.text(class)
	w.markup(`">`)
	w.text(s)
	w.markup("</span>")
}

// hidden writes a hidden form field.
func (w *htmlWriter) hidden(name, value string) {
	w.markup(`<input type="hidden"`)
	w.attr("name", name)
	w.attr("value", value)
	w.markup(">")
}

// time writes t as a <time> element (console.js shows it in the reader's
// zone), or — when t is zero.
func (w *htmlWriter) time(t time.Time) {
	if t.IsZero() {
		w.markup("—")
		return
	}
	t = t.UTC()
	var buf [64]byte
	w.markup(`<time datetime="`)
	w.b.Write(t.AppendFormat(buf[:0], time.RFC3339))
	w.markup(`">`)
	w.b.Write(t.AppendFormat(buf[:0], "2006-01-02 15:04:05 UTC"))
	w.markup("</time>")
}

// alert writes msg as an error the screen reader announces, if there is
// one.
func (w *htmlWriter) alert(msg string) {
	if msg != "" {
		w.markup(`<p class="error" role="alert">`)
		w.text(msg)
		w.markup("</p>")
	}
}

// empty writes msg (a constant) as the note of an empty list.
func (w *htmlWriter) empty(msg string) {
	w.markup(`<p class="empty">`)
	w.text(msg)
	w.markup("</p>")
}

// notAvailable is the page of a backend the server does not provide.
func (w *htmlWriter) notAvailable() {
	w.empty("Not available: this server does not provide it.")
}

// tableStart opens a scrolling table with its head, up to <tbody>.
func (w *htmlWriter) tableStart(class string, cols ...string) {
	w.markup(`<div class="scroll"><table`)
	if class != "" {
		w.attr("class", class)
	}
	w.markup(">\n<thead><tr>")
	w.ths(cols...)
	w.markup("</tr></thead>\n")
}

// ths writes a header cell per column.
func (w *htmlWriter) ths(cols ...string) {
	for _, c := range cols {
		w.markup(`<th scope="col">`)
		w.text(c)
		w.markup("</th>")
	}
}

// tableEnd closes what tableStart opened, after the rows.
func (w *htmlWriter) tableEnd() { w.markup("</tbody></table></div>") }

// table writes a scrolling table of n rows, row(i) writing each <tr>.
func (w *htmlWriter) table(class string, cols []string, n int, row func(i int)) {
	w.tableStart(class, cols...)
	w.markup("<tbody>")
	for i := range n {
		w.markup("\n")
		row(i)
	}
	w.markup("\n")
	w.tableEnd()
}

// escapeURLPart percent-encodes every byte of s but the unreserved ones
// (RFC 3986), for a path segment or a query value.
func escapeURLPart(s string) string { return processURL(s, false) }

// normalizeURL percent-encodes the bytes a URL may not hold, keeping its
// reserved characters and escapes.
func normalizeURL(s string) string { return processURL(s, true) }

// processURL is html/template's URL escaper (norm false) and normalizer
// (norm true), so that links come out as they always have.
func processURL(s string, norm bool) string {
	var b strings.Builder
	written := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '!', '#', '$', '&', '*', '+', ',', '/', ':', ';', '=', '?', '@', '[', ']':
			if norm {
				continue
			}
		case '-', '.', '_', '~':
			continue
		case '%':
			if norm && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
				continue
			}
		default:
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				continue
			}
		}
		if written == 0 {
			b.Grow(len(s) + 16)
		}
		b.WriteString(s[written:i])
		b.WriteByte('%')
		b.WriteByte(lowerHex[c>>4])
		b.WriteByte(lowerHex[c&15])
		written = i + 1
	}
	if written == 0 {
		return s
	}
	b.WriteString(s[written:])
	return b.String()
}

const lowerHex = "0123456789abcdef"

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}
