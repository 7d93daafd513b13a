package knowledge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/ledongthuc/pdf"
)

// maxPDFPages bounds the pages read of one PDF, and maxPageTreeDepth how
// deep its page tree may nest: a broken tree can be a cycle.
const (
	maxPDFPages      = 10000
	maxPageTreeDepth = 64
)

// pageList returns the pages of the page tree under root, in order, in
// one walk (pdf.Reader.Page walks the tree from its root for every page).
// A node with Kids is an inner node, any other a page.
func pageList(root pdf.Value) ([]pdf.Page, error) {
	var pages []pdf.Page
	nodes := 0
	var walk func(v pdf.Value, depth int) error
	walk = func(v pdf.Value, depth int) error {
		if nodes++; nodes > 2*maxPDFPages {
			return fmt.Errorf("more than %d pages", maxPDFPages)
		}
		if depth > maxPageTreeDepth {
			return fmt.Errorf("page tree deeper than %d", maxPageTreeDepth)
		}
		kids := v.Key("Kids")
		if kids.IsNull() {
			if v.Kind() == pdf.Dict {
				pages = append(pages, pdf.Page{V: v})
			}
			return nil
		}
		for i := range kids.Len() {
			if err := walk(kids.Index(i), depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root, 0); err != nil {
		return nil, err
	}
	if len(pages) == 0 {
		return nil, errors.New("no pages")
	}
	if len(pages) > maxPDFPages {
		return nil, fmt.Errorf("more than %d pages", maxPDFPages)
	}
	return pages, nil
}

// maxReasonBytes bounds the reason a PDF is skipped for (a panic's
// message can be long).
const maxReasonBytes = 200

// isPDF reports whether rel is read as a PDF: its text is extracted page
// by page, and its chunks' StartLine and EndLine are page numbers.
func isPDF(rel string) bool { return strings.EqualFold(path.Ext(rel), ".pdf") }

// pdfError is a PDF whose text could not be extracted. Reason is what
// Status lists for the file.
type pdfError struct {
	path, reason string
}

func (e *pdfError) Error() string { return "failed to read PDF file " + e.path + ": " + e.reason }

// errNoText is the reason for a PDF without any text.
const errNoText = "no text in the PDF (scanned or image-only?)"

// pdfPages returns the text of each page of the PDF data (named path in
// errors), page 1 first; a page without text is "". An encrypted PDF that
// needs a password, a broken one, one without any text and one beyond lim
// are a *pdfError; when ctx is done, reading stops with its error. The
// reader panics on some malformed files: every call into it runs under a
// recover that turns a panic into a *pdfError naming the file.
func pdfPages(ctx context.Context, path string, data []byte, lim pdfLimits) (pages []string, err error) {
	lim = lim.withDefaults()
	defer func() {
		switch r := recover(); {
		case r == nil:
		case r == errTooMuchText:
			pages, err = nil, &pdfError{path, fmt.Sprintf("too much text: more than max_file_bytes %d", lim.text)}
		case r == errCanceled:
			pages, err = nil, fmt.Errorf("failed to read PDF file %s: %w", path, ctx.Err())
		case r == errTooSlow:
			pages, err = nil, &pdfError{path, fmt.Sprintf("too slow: reading its pages took more than %v", lim.time)}
		default:
			pages, err = nil, &pdfError{path, shortReason(fmt.Sprintf("broken PDF: %v", r))}
		}
	}()
	data = normalizeHeader(data)
	r, err := pdf.NewReader(bytes.NewReader(data), int64(len(data)))
	switch {
	case errors.Is(err, pdf.ErrInvalidPassword):
		return nil, &pdfError{path, "encrypted PDF: it needs a password"}
	case err != nil && bytes.Contains(data, []byte("/Encrypt")):
		return nil, &pdfError{path, shortReason("encrypted PDF: " + err.Error())}
	case err != nil:
		return nil, &pdfError{path, shortReason("broken PDF: " + err.Error())}
	}
	list, err := pageList(r.Trailer().Key("Root").Key("Pages"))
	if err != nil {
		return nil, &pdfError{path, "broken PDF: " + err.Error()}
	}
	found := false
	budget := &pdfBudget{pdfLimits: lim, ctx: ctx, deadline: time.Now().Add(lim.time)}
	for _, p := range list {
		text := pageText(pageGlyphs(p, budget))
		if text != "" {
			found = true
		}
		pages = append(pages, text)
	}
	if !found {
		return nil, &pdfError{path, errNoText}
	}
	return pages, nil
}

// pdfLimits bound what reading one PDF may take; a zero field is its
// default.
type pdfLimits struct {
	// text bounds the glyphs drawn (max_file_bytes): beyond 4 per byte,
	// reading stops with "too much text". The extracted text is checked
	// against text exactly afterwards.
	text int64
	// stream is the largest content stream read, unpacked (16 MiB): a
	// bigger one (a huge drawing, or a compression bomb) is not read, so a
	// page without other content has no text.
	stream int64
	// time bounds the reading of the pages (2 minutes); a negative time
	// is already over.
	time time.Duration
}

func (l pdfLimits) withDefaults() pdfLimits {
	if l.text <= 0 {
		l.text = DefaultMaxFileBytes
	}
	if l.stream <= 0 {
		l.stream = 16 << 20
	}
	if l.time == 0 {
		l.time = 2 * time.Minute
	}
	return l
}

// pdfBudget is what is left of the limits while a PDF is read.
type pdfBudget struct {
	pdfLimits
	usedGlyphs int64
	ctx        context.Context
	deadline   time.Time
	ops        int
}

// tick is called at every operator of a content stream: it stops the
// reading once the time is over or the context is done (looking every 1024
// operators).
func (b *pdfBudget) tick() {
	if b.ops++; b.ops%1024 != 1 {
		return
	}
	if b.ctx.Err() != nil {
		panic(errCanceled)
	}
	if !time.Now().Before(b.deadline) {
		panic(errTooSlow)
	}
}

// Sentinel panics that stop reading a PDF beyond its limits.
var (
	errTooMuchText = errors.New("too much text")
	errTooSlow     = errors.New("too slow")
	errCanceled    = errors.New("canceled")
)

// normalizeHeader returns data with a header the reader accepts: it wants
// "%PDF-1.0" to "%PDF-1.7" followed by a line end, and refuses PDF 2.0
// (whose syntax it reads well enough) and a header followed by a space.
// data itself is never changed.
func normalizeHeader(data []byte) []byte {
	if len(data) < 9 || !bytes.HasPrefix(data, []byte("%PDF-")) {
		return data
	}
	version := data[5] == '1' && data[6] == '.' && data[7] >= '0' && data[7] <= '7'
	lineEnd := data[8] == '\r' || data[8] == '\n'
	if version && lineEnd {
		return data
	}
	if !lineEnd && data[8] != ' ' && data[8] != '\t' {
		return data // "%PDF-1.10"? not a header we know
	}
	out := bytes.Clone(data)
	copy(out[5:8], "1.7")
	out[8] = '\n'
	return out
}

func shortReason(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxReasonBytes {
		return s
	}
	cut := maxReasonBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// pageText lays a page's glyphs out as lines of text, in the order the
// page draws them: a glyph lower or higher than the last by half its size,
// or left of it, starts a new line; a gap wider than a fifth of the font
// size between two glyphs on a line is a space. Control characters are
// dropped, ligatures spelled out, and blank lines collapsed.
func pageText(glyphs []pdf.Text) string {
	var b strings.Builder
	var prev pdf.Text
	have := false
	for _, g := range glyphs {
		s := cleanGlyph(g.S)
		if s == "" {
			continue
		}
		size := math.Max(math.Abs(g.FontSize), 1)
		if have {
			switch {
			case math.Abs(g.Y-prev.Y) > size/2 || g.X < prev.X-size/2:
				b.WriteByte('\n')
			case g.X-(prev.X+prev.W) > size/5 && !strings.HasSuffix(prev.S, " ") && !strings.HasPrefix(s, " "):
				b.WriteByte(' ')
			}
		}
		b.WriteString(s)
		g.S = s
		prev, have = g, true
	}
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		l = strings.Join(strings.Fields(l), " ")
		if l == "" && (len(out) == 0 || out[len(out)-1] == "") {
			continue
		}
		out = append(out, l)
	}
	return strings.TrimSpace(strings.Join(out, "\n"))
}

var ligatures = strings.NewReplacer("\uFB00", "ff", "\uFB01", "fi", "\uFB02", "fl", "\uFB03", "ffi", "\uFB04", "ffl", "\uFB05", "st", "\uFB06", "st")

// cleanGlyph returns a glyph's text as valid UTF-8 without control
// characters (a tab is a space) and with ligatures spelled out.
func cleanGlyph(s string) string {
	s = strings.ToValidUTF8(s, "")
	s = strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return ' '
		case unicode.IsControl(r) || r == '\uFFFD':
			return -1
		}
		return r
	}, s)
	return ligatures.Replace(s)
}

// splitPDF chunks a PDF's pages like a text file, page by page: a chunk
// never spans two pages, and its StartLine and EndLine are its page.
func splitPDF(base, path string, pages []string, size int) []Chunk {
	var out []Chunk
	for i, text := range pages {
		page := i + 1
		for part, c := range Split(base, path, text, false, size) {
			c.StartLine, c.EndLine = page, page
			c.ID = chunkID(c, part)
			out = append(out, c)
		}
	}
	return out
}

// affine is a PDF transformation matrix [a b c d e f]: (x, y) maps to
// (a*x + c*y + e, b*x + d*y + f).
type affine [6]float64

var identity = affine{1, 0, 0, 1, 0, 0}

// then returns the transformation m followed by n (m × n in the PDF
// specification's notation).
func (m affine) then(n affine) affine {
	return affine{
		m[0]*n[0] + m[1]*n[2], m[0]*n[1] + m[1]*n[3],
		m[2]*n[0] + m[3]*n[2], m[2]*n[1] + m[3]*n[3],
		m[4]*n[0] + m[5]*n[2] + n[4], m[4]*n[1] + m[5]*n[3] + n[5],
	}
}

func translate(x, y float64) affine { return affine{1, 0, 0, 1, x, y} }

// pdfFont is what the text walker needs of a font, read once per page.
type pdfFont struct {
	enc pdf.TextEncoding
	// twoByte: a composite (Type0) font, whose codes are two bytes; its
	// widths are cid, with dw for the codes cid lacks.
	twoByte bool
	first   int
	widths  []float64
	cid     map[int]float64
	dw      float64
}

// readFont reads a font's encoding and glyph widths.
func readFont(pf pdf.Font) *pdfFont {
	f := &pdfFont{enc: pf.Encoder()}
	if f.enc == nil {
		f.enc = nopEncoding{}
	}
	if pf.V.Key("Subtype").Name() != "Type0" {
		f.first, f.widths = pf.FirstChar(), pf.Widths()
		return f
	}
	f.twoByte, f.cid, f.dw = true, map[int]float64{}, 1000
	d := pf.V.Key("DescendantFonts").Index(0)
	if dw := d.Key("DW"); dw.Kind() == pdf.Integer || dw.Kind() == pdf.Real {
		f.dw = dw.Float64()
	}
	// W is [c [w w …] cFirst cLast w …].
	w := d.Key("W")
	for i := 0; i+1 < w.Len() && len(f.cid) < 1<<16; {
		c := int(w.Index(i).Int64())
		if next := w.Index(i + 1); next.Kind() == pdf.Array {
			for j := range min(next.Len(), 1<<16) {
				f.cid[c+j] = next.Index(j).Float64()
			}
			i += 2
			continue
		}
		if i+2 >= w.Len() {
			break
		}
		last, width := int(w.Index(i+1).Int64()), w.Index(i+2).Float64()
		for code := c; code <= last && code-c < 1<<16; code++ {
			f.cid[code] = width
		}
		i += 3
	}
	return f
}

func (f *pdfFont) width(code int) float64 {
	if f.twoByte {
		if w, ok := f.cid[code]; ok {
			return w
		}
		return f.dw
	}
	if i := code - f.first; i >= 0 && i < len(f.widths) {
		return f.widths[i]
	}
	return 0
}

// textState is the part of the graphics state that places glyphs.
type textState struct {
	ctm                       affine
	tc, tw, th, tl, tfs, rise float64
	font                      *pdfFont
}

// Limits of the form XObjects (drawings reused by name, which may hold
// text) a page's walk enters: how deep one may draw another, and how many
// one page may draw at all.
const (
	maxFormDepth = 8
	maxForms     = 1000
)

// pageGlyphs returns the glyphs a page draws, in drawing order (form
// XObjects included), each with its position, size and width in points:
// what pdf.Page.Content does, but reading each font's encoding and widths
// once instead of at every glyph (which made a 1 MB file take a minute),
// reading composite fonts' two-byte codes and widths, and ignoring
// malformed operators instead of panicking.
func pageGlyphs(p pdf.Page, budget *pdfBudget) []pdf.Text {
	if p.V.IsNull() {
		return nil
	}
	w := &glyphWalker{budget: budget}
	w.walk(p.V.Key("Contents"), p.Resources(), identity, 0)
	return w.out
}

// glyphWalker collects the glyphs of one page.
type glyphWalker struct {
	out    []pdf.Text
	forms  int
	budget *pdfBudget
}

// tooBig reports whether a content stream, or one of an array of them,
// is bigger than limit unpacked. It unpacks only a stream that could be:
// one with more than one filter, or whose packed length times 1032 (the
// most Flate can gain) is more than limit.
func tooBig(contents pdf.Value, limit int64) bool {
	big := func(v pdf.Value) bool {
		if v.Kind() != pdf.Stream {
			return false
		}
		if n := v.Key("Length").Int64(); n > 0 && n <= limit/1032 && v.Key("Filter").Len() <= 1 {
			return false
		}
		rc := v.Reader()
		defer rc.Close()
		n, _ := io.Copy(io.Discard, io.LimitReader(rc, limit+1))
		return n > limit
	}
	if contents.Kind() != pdf.Array {
		return big(contents)
	}
	for i := range contents.Len() {
		if big(contents.Index(i)) {
			return true
		}
	}
	return false
}

// walk interprets a content stream (or array of streams) drawn with the
// transformation ctm, its fonts and forms named in resources.
func (w *glyphWalker) walk(contents, resources pdf.Value, ctm affine, depth int) {
	if contents.IsNull() {
		return
	}
	if tooBig(contents, w.budget.stream) {
		return
	}
	fonts := map[string]*pdfFont{}
	fontNamed := func(name string) *pdfFont {
		if f, ok := fonts[name]; ok {
			return f
		}
		f := readFont(pdf.Font{V: resources.Key("Font").Key(name)})
		fonts[name] = f
		return f
	}
	g := textState{ctm: ctm, th: 1}
	var stack []textState
	tm, tlm := identity, identity
	show := func(raw string) {
		if g.font == nil {
			g.font = &pdfFont{enc: nopEncoding{}}
		}
		step := 1
		if g.font.twoByte {
			step = 2
		}
		for i := 0; i+step <= len(raw); i += step {
			code := int(raw[i])
			if step == 2 {
				code = code<<8 | int(raw[i+1])
			}
			w0 := g.font.width(code)
			trm := affine{g.tfs * g.th, 0, 0, g.tfs, 0, g.rise}.then(tm).then(g.ctm)
			if w.budget.usedGlyphs++; w.budget.usedGlyphs > 4*w.budget.text {
				panic(errTooMuchText)
			}
			w.out = append(w.out, pdf.Text{
				FontSize: math.Hypot(trm[2], trm[3]),
				X:        trm[4], Y: trm[5],
				W: w0 / 1000 * math.Hypot(trm[0], trm[1]),
				S: g.font.enc.Decode(raw[i : i+step]),
			})
			tx := w0/1000*g.tfs + g.tc
			if step == 1 && code == ' ' {
				tx += g.tw
			}
			tm = translate(tx*g.th, 0).then(tm)
		}
	}
	nextLine := func() {
		tlm = translate(0, -g.tl).then(tlm)
		tm = tlm
	}
	pdf.Interpret(contents, func(stk *pdf.Stack, op string) {
		w.budget.tick()
		n := stk.Len()
		args := make([]pdf.Value, n)
		for i := n - 1; i >= 0; i-- {
			args[i] = stk.Pop()
		}
		num := func(i int) float64 {
			if i < len(args) {
				return args[i].Float64()
			}
			return 0
		}
		matrix := func() affine {
			var m affine
			for i := range m {
				m[i] = num(i)
			}
			return m
		}
		switch op {
		case "Do":
			if n != 1 || depth >= maxFormDepth || w.forms >= maxForms {
				return
			}
			form := resources.Key("XObject").Key(args[0].Name())
			if form.Kind() != pdf.Stream || form.Key("Subtype").Name() != "Form" {
				return
			}
			w.forms++
			m := identity
			if fm := form.Key("Matrix"); fm.Len() == 6 {
				for i := range m {
					m[i] = fm.Index(i).Float64()
				}
			}
			res := form.Key("Resources")
			if res.IsNull() {
				res = resources
			}
			w.walk(form, res, m.then(g.ctm), depth+1)
		case "q":
			stack = append(stack, g)
		case "Q":
			if len(stack) > 0 {
				g, stack = stack[len(stack)-1], stack[:len(stack)-1]
			}
		case "cm":
			if n == 6 {
				g.ctm = matrix().then(g.ctm)
			}
		case "BT":
			tm, tlm = identity, identity
		case "Tc":
			g.tc = num(0)
		case "Tw":
			g.tw = num(0)
		case "Tz":
			g.th = num(0) / 100
		case "TL":
			g.tl = num(0)
		case "Ts":
			g.rise = num(0)
		case "Tf":
			if n == 2 {
				g.font, g.tfs = fontNamed(args[0].Name()), num(1)
			}
		case "Td", "TD":
			if op == "TD" {
				g.tl = -num(1)
			}
			tlm = translate(num(0), num(1)).then(tlm)
			tm = tlm
		case "Tm":
			if n == 6 {
				tm = matrix()
				tlm = tm
			}
		case "T*":
			nextLine()
		case "Tj":
			if n == 1 {
				show(args[0].RawString())
			}
		case "'":
			if n == 1 {
				nextLine()
				show(args[0].RawString())
			}
		case "\"":
			if n == 3 {
				g.tw, g.tc = num(0), num(1)
				nextLine()
				show(args[2].RawString())
			}
		case "TJ":
			if n == 1 {
				for i := range args[0].Len() {
					x := args[0].Index(i)
					if x.Kind() == pdf.String {
						show(x.RawString())
					} else {
						tm = translate(-x.Float64()/1000*g.tfs*g.th, 0).then(tm)
					}
				}
			}
		}
	})
}

// nopEncoding reads codes as Latin-1 (for a font without an encoding the
// reader understands).
type nopEncoding struct{}

func (nopEncoding) Decode(raw string) string {
	r := make([]rune, len(raw))
	for i := range len(raw) {
		r[i] = rune(raw[i])
	}
	return string(r)
}
