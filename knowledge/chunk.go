package knowledge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Chunk is a passage of a file in a base: what is indexed and what a
// search returns.
type Chunk struct {
	// ID is stable: a hash of the base, path, line range and text, so the
	// same passage keeps its id across re-indexing.
	ID   string `json:"id"`
	Base string `json:"base"`
	// Path is the file's slash-separated path from its base's folder
	// (prefixed with the folder's name when the base has several).
	Path string `json:"path"`
	// StartLine and EndLine are the chunk's first and last line, counted
	// from 1, inclusive; for a PDF, both are the chunk's page (from 1).
	StartLine int `json:"start_line"`
	EndLine   int `json:"end_line"`
	// Heading is the Markdown heading path the chunk is under, e.g.
	// "Install > Debian" ("" for text files and text before any heading).
	Heading string `json:"heading,omitempty"`
	// Text is the chunk's lines, verbatim, joined by "\n" (a line longer
	// than the chunk size is cut into several chunks of the same line).
	Text string `json:"text"`
}

// Citation is where the chunk comes from: "path:start-end" (lines), or
// "path:pN" for page N of a PDF ("path:pN-M" if a chunk ever spans pages).
func (c Chunk) Citation() string {
	if isPDF(c.Path) {
		if c.StartLine == c.EndLine {
			return c.Path + ":p" + strconv.Itoa(c.StartLine)
		}
		return c.Path + ":p" + strconv.Itoa(c.StartLine) + "-" + strconv.Itoa(c.EndLine)
	}
	return c.Path + ":" + strconv.Itoa(c.StartLine) + "-" + strconv.Itoa(c.EndLine)
}

// unit is a run of lines chunking keeps together when it can: a
// paragraph, a fenced code block, or a heading (lines are 0-based).
type unit struct {
	start, end int
	level      int // heading level 1-6, 0 for content
	title      string
}

// splitLines splits content into lines without their line endings ("\n"
// or "\r\n"); a final line ending starts no extra line.
func splitLines(content string) []string {
	content = strings.TrimSuffix(content, "\n")
	if content == "" {
		return nil
	}
	lines := strings.Split(content, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

func isBlank(s string) bool { return strings.TrimSpace(s) == "" }

// Split splits a file's content into chunks of at most size bytes (except
// a chunk holding only headings, which is never cut): Markdown by headings,
// then paragraphs and fenced code blocks, then lines; text by paragraphs,
// then lines. base and path name the chunks and go into their ids.
func Split(base, path, content string, markdown bool, size int) []Chunk {
	if size <= 0 {
		size = DefaultChunkSize
	}
	lines := splitLines(content)
	var units []unit
	if markdown {
		units = markdownUnits(lines)
	} else {
		units = paragraphUnits(lines)
	}
	s := splitter{base: base, path: path, lines: lines, size: size, parts: map[[2]int]int{}}
	s.offsets = make([]int, len(lines)+1)
	for i, l := range lines {
		s.offsets[i+1] = s.offsets[i] + len(l) + 1
	}
	s.group(units)
	return s.out
}

// paragraphUnits: runs of non-blank lines.
func paragraphUnits(lines []string) []unit {
	var units []unit
	open := false
	for i, l := range lines {
		switch {
		case isBlank(l):
			open = false
		case open:
			units[len(units)-1].end = i
		default:
			units = append(units, unit{start: i, end: i})
			open = true
		}
	}
	return units
}

// markdownUnits: ATX and setext headings, fenced code blocks (a heading
// inside one is code), and paragraphs.
func markdownUnits(lines []string) []unit {
	var units []unit
	para := -1 // index in units of the open paragraph
	fence := ""
	for i, l := range lines {
		if fence != "" {
			units[len(units)-1].end = i
			if closesFence(l, fence) {
				fence = ""
			}
			continue
		}
		if f := opensFence(l); f != "" {
			units = append(units, unit{start: i, end: i})
			para, fence = -1, f
			continue
		}
		if isBlank(l) {
			para = -1
			continue
		}
		if level, title, ok := atxHeading(l); ok {
			units = append(units, unit{start: i, end: i, level: level, title: title})
			para = -1
			continue
		}
		if level, ok := setextUnderline(l); ok && para >= 0 && units[para].start == units[para].end {
			u := &units[para]
			u.end, u.level, u.title = i, level, strings.TrimSpace(lines[u.start])
			para = -1
			continue
		}
		if para >= 0 {
			units[para].end = i
			continue
		}
		units = append(units, unit{start: i, end: i})
		para = len(units) - 1
	}
	return units
}

// opensFence returns the fence a line opens (``` or ~~~, 3 or more, up to
// 3 spaces of indent), or "".
func opensFence(l string) string {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 || len(t) < 3 || (t[0] != '`' && t[0] != '~') {
		return ""
	}
	n := 0
	for n < len(t) && t[n] == t[0] {
		n++
	}
	if n < 3 || (t[0] == '`' && strings.ContainsRune(t[n:], '`')) {
		return ""
	}
	return t[:n]
}

func closesFence(l, fence string) bool {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 {
		return false
	}
	t = strings.TrimRight(t, " \t")
	return len(t) >= len(fence) && strings.Trim(t, fence[:1]) == ""
}

// atxHeading parses "# Title", "## Title ##" (up to 3 spaces of indent).
func atxHeading(l string) (int, string, bool) {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 {
		return 0, "", false
	}
	n := 0
	for n < len(t) && t[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(t) && t[n] != ' ' && t[n] != '\t') {
		return 0, "", false
	}
	title := strings.TrimSpace(t[n:])
	if trimmed := strings.TrimRight(title, "#"); trimmed == "" || strings.HasSuffix(trimmed, " ") || strings.HasSuffix(trimmed, "\t") {
		title = strings.TrimSpace(trimmed)
	}
	return n, title, true
}

// setextUnderline parses "===" (level 1) and "---" (level 2).
func setextUnderline(l string) (int, bool) {
	t := strings.TrimLeft(l, " ")
	if len(l)-len(t) > 3 {
		return 0, false
	}
	t = strings.TrimRight(t, " \t")
	switch {
	case t == "":
		return 0, false
	case strings.Trim(t, "=") == "":
		return 1, true
	case strings.Trim(t, "-") == "":
		return 2, true
	}
	return 0, false
}

// splitter groups units into chunks.
type splitter struct {
	base, path string
	lines      []string
	offsets    []int // offsets[i]: where line i starts in the text joined by "\n"
	size       int
	headings   [6]string
	parts      map[[2]int]int // chunks per line range so far, for ids
	out        []Chunk

	// The chunk being built: lines start..end (open), holding content or
	// only headings.
	open       bool
	start, end int
	content    bool
	heading    string
}

// span is the byte length of lines start..end joined by "\n".
func (s *splitter) span(start, end int) int { return s.offsets[end+1] - s.offsets[start] - 1 }

func (s *splitter) headingPath() string {
	var parts []string
	for _, h := range s.headings {
		if h != "" {
			parts = append(parts, h)
		}
	}
	return strings.Join(parts, " > ")
}

func (s *splitter) group(units []unit) {
	for _, u := range units {
		if u.level > 0 {
			if s.content {
				s.flush()
			}
			s.headings[u.level-1] = u.title
			for i := u.level; i < len(s.headings); i++ {
				s.headings[i] = ""
			}
			s.add(u.start, u.end)
			continue
		}
		if s.span(u.start, u.end) > s.size {
			// Headings waiting for content go with the unit's first lines.
			start := -1
			if s.open && !s.content {
				start = s.start
				s.open = false
			}
			s.flush()
			s.splitUnit(u, start)
			continue
		}
		if s.open && s.span(s.start, u.end) > s.size {
			s.flush()
		}
		if !s.content {
			s.heading, s.content = s.headingPath(), true
		}
		s.add(u.start, u.end)
	}
	s.flush()
}

func (s *splitter) add(start, end int) {
	if !s.open {
		s.open, s.start = true, start
	}
	s.end = end
}

// flush emits the open chunk.
func (s *splitter) flush() {
	if !s.open {
		return
	}
	heading := s.heading
	if !s.content {
		heading = s.headingPath()
	}
	s.emit(s.start, s.end, heading, "")
	s.open, s.content, s.heading = false, false, ""
}

// splitUnit emits a unit too big for one chunk by lines, and a line too
// big for one chunk in pieces cut at character boundaries. start, when not
// -1, is the first line of headings that go before the unit.
func (s *splitter) splitUnit(u unit, start int) {
	heading := s.headingPath()
	if start >= 0 && s.span(start, u.start) > s.size {
		s.emit(start, u.start-1, heading, "")
		start = -1
	}
	for i := u.start; i <= u.end; i++ {
		if start >= 0 && i > u.start && s.span(start, i) > s.size {
			s.emit(start, i-1, heading, "")
			start = -1
		}
		if len(s.lines[i]) > s.size {
			if start >= 0 {
				s.emit(start, i-1, heading, "")
				start = -1
			}
			for rest := s.lines[i]; rest != ""; {
				cut := min(len(rest), s.size)
				for cut < len(rest) && cut > 0 && !utf8.RuneStart(rest[cut]) {
					cut--
				}
				s.emit(i, i, heading, rest[:cut])
				rest = rest[cut:]
			}
			continue
		}
		if start < 0 {
			start = i
		}
	}
	if start >= 0 {
		s.emit(start, u.end, heading, "")
	}
}

// emit appends the chunk of lines start..end (0-based; trailing and leading
// blank lines dropped), or of text when it is a piece of one line.
func (s *splitter) emit(start, end int, heading, text string) {
	if text == "" {
		for start < end && isBlank(s.lines[start]) {
			start++
		}
		for end > start && isBlank(s.lines[end]) {
			end--
		}
		text = strings.Join(s.lines[start:end+1], "\n")
		if isBlank(text) {
			return
		}
	}
	key := [2]int{start, end}
	part := s.parts[key]
	s.parts[key] = part + 1
	c := Chunk{Base: s.base, Path: s.path, StartLine: start + 1, EndLine: end + 1, Heading: heading, Text: text}
	c.ID = chunkID(c, part)
	s.out = append(s.out, c)
}

// chunkID hashes what identifies a chunk; part tells apart the pieces of
// one long line.
func chunkID(c Chunk, part int) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%d\x00", c.Base, c.Path, c.StartLine, c.EndLine, part)
	h.Write([]byte(c.Text))
	return hex.EncodeToString(h.Sum(nil)[:16])
}
