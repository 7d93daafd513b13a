package knowledge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ledongthuc/pdf"

	"github.com/hookroom/hookroom/internal/dbtest"
)

// pdfOptions shape a PDF made by makePDF.
type pdfOptions struct {
	// encrypted adds a standard security handler whose user password is
	// not empty, so the file cannot be read without one.
	encrypted bool
	// content replaces the pages' content streams.
	content []string
	// form adds a form XObject /X1 drawing this content stream (moved
	// 100 points down), which the pages' content may draw ("/X1 Do"); with
	// formDrawsItself the form can draw itself too.
	form            string
	formDrawsItself bool
	// kids replaces the page tree's list of pages ("4 0 R 6 0 R …").
	kids string
	// header replaces the first line, "%PDF-1.4\n".
	header string
	// widths gives the font a width of 500/1000 em for every character
	// (else it has none, like a standard font without metrics).
	widths bool
}

// makePDF returns a minimal valid PDF 1.4 with one page per element of
// pages, each drawing its lines of text in Type1 Helvetica, one below the
// other (a page without lines draws a filled rectangle: image-only). The
// xref table's offsets are computed, so the file is well formed.
func makePDF(pages [][]string, o pdfOptions) []byte {
	var objs []string
	objs = append(objs, "<< /Type /Catalog /Pages 2 0 R >>")
	var kids []string
	for i := range pages {
		kids = append(kids, fmt.Sprintf("%d 0 R", 4+2*i))
	}
	if o.kids != "" {
		kids = []string{o.kids}
	}
	objs = append(objs, fmt.Sprintf("<< /Type /Pages /Kids [%s] /Count %d >>", strings.Join(kids, " "), len(pages)))
	if o.widths {
		objs = append(objs, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /FirstChar 32 /LastChar 126 /Widths ["+strings.Repeat("500 ", 95)+"] >>")
	} else {
		objs = append(objs, "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
	}
	formNum := 4 + 2*len(pages)
	xobjects := ""
	if o.form != "" {
		xobjects = fmt.Sprintf(" /XObject << /X1 %d 0 R >>", formNum)
	}
	for i, lines := range pages {
		var content string
		switch {
		case i < len(o.content):
			content = o.content[i]
		case len(lines) == 0:
			content = "0.5 g 72 72 400 600 re f"
		default:
			var b strings.Builder
			b.WriteString("BT /F1 12 Tf 72 720 Td")
			for j, l := range lines {
				if j > 0 {
					b.WriteString(" 0 -16 Td")
				}
				l = strings.NewReplacer(`\`, `\\`, `(`, `\(`, `)`, `\)`).Replace(l)
				fmt.Fprintf(&b, " (%s) Tj", l)
			}
			b.WriteString(" ET")
			content = b.String()
		}
		objs = append(objs,
			fmt.Sprintf("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >>%s >> /Contents %d 0 R >>", xobjects, 5+2*i),
			fmt.Sprintf("<< /Length %d >>\nstream\n%s\nendstream", len(content)+1, content))
	}
	if o.form != "" {
		self := ""
		if o.formDrawsItself {
			self = xobjects
		}
		objs = append(objs, fmt.Sprintf("<< /Type /XObject /Subtype /Form /BBox [0 0 612 792] /Matrix [1 0 0 1 0 -100] /Resources << /Font << /F1 3 0 R >>%s >> /Length %d >>\nstream\n%s\nendstream",
			self, len(o.form)+1, o.form))
	}
	trailer := fmt.Sprintf("/Size %d /Root 1 0 R", len(objs)+1)
	if o.encrypted {
		objs = append(objs, "<< /Filter /Standard /V 2 /R 3 /Length 128 /P -4 /O <"+strings.Repeat("ab", 32)+"> /U <"+strings.Repeat("cd", 32)+"> >>")
		trailer = fmt.Sprintf("/Size %d /Root 1 0 R /Encrypt %d 0 R /ID [<%s> <%s>]", len(objs)+1, len(objs), strings.Repeat("01", 16), strings.Repeat("01", 16))
	}
	var b bytes.Buffer
	if o.header == "" {
		o.header = "%PDF-1.4\n"
	}
	b.WriteString(o.header)
	offsets := make([]int, len(objs))
	for i, obj := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, obj)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n", trailer, xref)
	return b.Bytes()
}

func TestPDFPages(t *testing.T) {
	twoPages := makePDF([][]string{{"Chapter one", "The wombat digs burrows."}, {"Chapter two", "The numbat eats termites."}}, pdfOptions{})
	cases := []struct {
		name   string
		data   []byte
		pages  []string
		reason string
	}{
		{"two pages", twoPages, []string{"Chapter one\nThe wombat digs burrows.", "Chapter two\nThe numbat eats termites."}, ""},
		{"an image-only page among text", makePDF([][]string{{"cover"}, nil, {"end"}}, pdfOptions{}), []string{"cover", "", "end"}, ""},
		{"image only", makePDF([][]string{nil, nil}, pdfOptions{}), nil, errNoText},
		{"truncated", twoPages[:len(twoPages)/2], nil, "broken PDF: not a PDF file: missing %%EOF"},
		{"garbage", []byte("%PDF-1.4\n" + strings.Repeat("garbage ", 30) + "\n%%EOF\n"), nil, "broken PDF: malformed PDF file: missing final startxref"},
		{"not a PDF at all", []byte("\x89PNG\r\n\x1a\n"), nil, "broken PDF: not a PDF file: invalid header"},
		{"encrypted", makePDF([][]string{{"secret"}}, pdfOptions{encrypted: true}), nil, "encrypted PDF: it needs a password"},
		// The reader panics on "end" without "begin" in a content stream.
		{"a panic in the reader", makePDF([][]string{{"x"}}, pdfOptions{content: []string{"BT end ET"}}), nil, "broken PDF: mismatched begin/end"},
		{"malformed operators are ignored", makePDF([][]string{{"x"}}, pdfOptions{content: []string{"BT /F1 Tf 1 Tm Td (fine) Tj (a) (b) Tj ET"}}), []string{"fine"}, ""},
		{"leading and next-line operators", makePDF([][]string{{"x"}}, pdfOptions{content: []string{"BT /F1 10 Tf 14 TL 72 700 Td (alpha) Tj T* (beta) Tj (gamma) ' 0 1 (delta) \" ET"}}), []string{"alpha\nbeta\ngamma\ndelta"}, ""},
		{"text matrices", makePDF([][]string{{"x"}}, pdfOptions{content: []string{"BT /F1 10 Tf 1 0 0 1 72 700 Tm (left) Tj 1 0 0 1 300 700 Tm (right) Tj 1 0 0 1 72 680 Tm (below) Tj ET"}}), []string{"left right\nbelow"}, ""},
		{"a scaled page", makePDF([][]string{{"x"}}, pdfOptions{content: []string{"q 2 0 0 2 0 0 cm BT /F1 10 Tf 36 350 Td (big) Tj 0 -12 Td (text) Tj ET Q"}}), []string{"big\ntext"}, ""},
		{"text in a form XObject", makePDF([][]string{{"x"}}, pdfOptions{form: "BT /F1 10 Tf 72 700 Td (in a form) Tj ET", content: []string{"BT /F1 10 Tf 72 700 Td (page) Tj ET /X1 Do /X2 Do"}}), []string{"page\nin a form"}, ""},
		{"a form that draws itself", makePDF([][]string{{"x"}}, pdfOptions{form: "/X1 Do BT /F1 10 Tf 72 700 Td (deep) Tj ET", formDrawsItself: true, content: []string{"/X1 Do"}}), []string{strings.Repeat("deep\n", maxFormDepth-1) + "deep"}, ""},
		{"a form that draws itself twice", makePDF([][]string{{"x"}}, pdfOptions{form: "/X1 Do /X1 Do /X1 Do", formDrawsItself: true, content: []string{"BT /F1 10 Tf (end) Tj ET /X1 Do"}}), []string{"end"}, ""},
		{"widths: runs that continue a word", makePDF([][]string{{"x"}}, pdfOptions{widths: true, content: []string{"BT /F1 10 Tf 72 700 Td (wom) Tj (bat) Tj [(dig) -300 (ging)] TJ ET"}}), []string{"wombatdig ging"}, ""},
		{"PDF 2.0", makePDF([][]string{{"version two"}}, pdfOptions{header: "%PDF-2.0\n"}), []string{"version two"}, ""},
		{"a header followed by a comment", makePDF([][]string{{"commented"}}, pdfOptions{header: "%PDF-1.4 %\xe2\xe3\xcf\xd3\n"}), []string{"commented"}, ""},
		{"a page tree that is a cycle", makePDF([][]string{{"x"}}, pdfOptions{kids: "4 0 R 2 0 R"}), nil, "broken PDF: page tree deeper than 64"},
		{"pages in another order", makePDF([][]string{{"one"}, {"two"}}, pdfOptions{kids: "6 0 R 4 0 R"}), []string{"two", "one"}, ""},
		{"a broken xref offset", bytes.Replace(twoPages, []byte("startxref\n"), []byte("startxref\n9"), 1), nil, "broken PDF: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pages, err := pdfPages(t.Context(), "dir/f.pdf", c.data, pdfLimits{})
			if c.reason == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(pages, c.pages) {
					t.Fatalf("pages %q; want %q", pages, c.pages)
				}
				return
			}
			pe, ok := err.(*pdfError)
			if !ok || !strings.HasPrefix(pe.reason, c.reason) {
				t.Fatalf("error %v (%T); want a *pdfError with reason %q…", err, err, c.reason)
			}
			if !strings.HasPrefix(err.Error(), "failed to read PDF file dir/f.pdf: ") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func TestPDFLimits(t *testing.T) {
	twoPages := makePDF([][]string{{"Chapter one", "The wombat digs burrows."}, {"Chapter two", "The numbat eats termites."}}, pdfOptions{})
	bigPage := "BT /F1 10 Tf 72 700 Td (" + strings.Repeat("drawn ", 300) + ") Tj ET"
	cases := []struct {
		name   string
		data   []byte
		lim    pdfLimits
		pages  []string
		reason string
	}{
		{"within", twoPages, pdfLimits{text: 100, stream: 100, time: time.Minute}, []string{"Chapter one\nThe wombat digs burrows.", "Chapter two\nThe numbat eats termites."}, ""},
		{"too much text", twoPages, pdfLimits{text: 10}, nil, "too much text: more than max_file_bytes 10"},
		{"a content stream too big is not read", makePDF([][]string{{"x"}, {"small page"}}, pdfOptions{content: []string{bigPage}}), pdfLimits{stream: 1000}, []string{"", "small page"}, ""},
		{"too slow", twoPages, pdfLimits{time: -time.Second}, nil, "too slow: reading its pages took more than -1s"},
	}
	t.Run("canceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := pdfPages(ctx, "f.pdf", twoPages, pdfLimits{}); !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "f.pdf") {
			t.Fatalf("error %v; want context.Canceled naming the file", err)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pages, err := pdfPages(t.Context(), "f.pdf", c.data, c.lim)
			if c.reason == "" {
				if err != nil || !slices.Equal(pages, c.pages) {
					t.Fatalf("pages %q, %v; want %q", pages, err, c.pages)
				}
				return
			}
			if pe, ok := err.(*pdfError); !ok || pe.reason != c.reason {
				t.Fatalf("error %v; want reason %q", err, c.reason)
			}
		})
	}
}

func TestPageText(t *testing.T) {
	g := func(x, y, w float64, s string) pdf.Text { return pdf.Text{FontSize: 10, X: x, Y: y, W: w, S: s} }
	cases := []struct {
		name   string
		glyphs []pdf.Text
		want   string
	}{
		{"glyphs with widths", []pdf.Text{g(0, 100, 5, "a"), g(5, 100, 5, "b"), g(20, 100, 5, "c")}, "ab c"},
		{"a new line below", []pdf.Text{g(0, 100, 5, "a"), g(0, 88, 5, "b")}, "a\nb"},
		{"back to the left margin", []pdf.Text{g(300, 100, 5, "a"), g(0, 101, 5, "b")}, "a\nb"},
		{"no widths: runs at one place", []pdf.Text{g(0, 100, 0, "a"), g(0, 100, 0, "b"), g(30, 100, 0, "c")}, "ab c"},
		{"no double space", []pdf.Text{g(0, 100, 5, "a "), g(20, 100, 5, "b")}, "a b"},
		{"ligatures and control characters", []pdf.Text{g(0, 100, 5, "\uFB01"), g(5, 100, 5, "le\x00\x07")}, "file"},
		{"blank lines collapse", []pdf.Text{g(0, 100, 5, "a"), g(0, 80, 5, " "), g(0, 60, 5, " "), g(0, 40, 5, "b")}, "a\n\nb"},
		{"nothing", []pdf.Text{g(0, 100, 5, "\x00")}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := pageText(c.glyphs); got != c.want {
				t.Fatalf("got %q; want %q", got, c.want)
			}
		})
	}
}

func TestPDFCitation(t *testing.T) {
	cases := []struct {
		path       string
		start, end int
		want       string
	}{
		{"manual.pdf", 3, 3, "manual.pdf:p3"},
		{"a/Manual.PDF", 3, 4, "a/Manual.PDF:p3-4"},
		{"notes.txt", 3, 4, "notes.txt:3-4"},
		{"pdf.md", 1, 1, "pdf.md:1-1"},
	}
	for _, c := range cases {
		if got := (Chunk{Path: c.path, StartLine: c.start, EndLine: c.end}).Citation(); got != c.want {
			t.Errorf("%s %d-%d: %q; want %q", c.path, c.start, c.end, got, c.want)
		}
	}
}

func TestSplitPDFKeepsChunksOnTheirPage(t *testing.T) {
	long := strings.Repeat("echidna spines are modified hairs. ", 20)
	chunks := splitPDF("docs", "m.pdf", []string{"one", "", long + "\n\n" + long}, 300)
	if len(chunks) < 3 || chunks[0].Citation() != "m.pdf:p1" {
		t.Fatalf("chunks %+v", chunks)
	}
	ids := map[string]bool{}
	for _, c := range chunks[1:] {
		if c.Citation() != "m.pdf:p3" || len(c.Text) > 300 {
			t.Errorf("chunk %s of %d bytes; want page 3, at most 300 bytes", c.Citation(), len(c.Text))
		}
		if ids[c.ID] {
			t.Errorf("duplicate id %s", c.ID)
		}
		ids[c.ID] = true
	}
}

func writePDF(t *testing.T, dir, rel string, pages [][]string, o pdfOptions) {
	t.Helper()
	writeFile(t, dir, rel, string(makePDF(pages, o)))
}

func TestReindexPDF(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		writePDF(t, dir, "manual.pdf", [][]string{{"Setup", "Install the wombat package first."}, {"Feeding", "Numbats eat termites every day."}}, pdfOptions{})
		writePDF(t, dir, "scan.pdf", [][]string{nil}, pdfOptions{})
		writePDF(t, dir, "locked.pdf", [][]string{{"wombat secrets"}}, pdfOptions{encrypted: true})
		writeFile(t, dir, "broken.pdf", string(makePDF([][]string{{"wombat"}}, pdfOptions{})[:200]))
		writeFile(t, dir, "notes.md", "# Notes\n\nThe wombat is a marsupial.\n")
		ix, db := newIndex(t, d, dir, nil, func(o *Options) { o.MaxFileBytes = 300 }) // smaller than the PDFs: max_pdf_bytes applies
		rep := reindex(t, ix, "docs", false)
		if rep.Files != 2 || rep.Changed != 2 || rep.Chunks != 3 || len(rep.Skipped) != 3 {
			t.Fatalf("report %+v; want manual.pdf (2 chunks) and notes.md indexed, 3 skipped", rep)
		}
		if hits := search(t, ix, "termites", 5); len(hits) != 1 || hits[0].Citation() != "manual.pdf:p2" || hits[0].Text != "Feeding\nNumbats eat termites every day." {
			t.Fatalf("hits %+v; want manual.pdf:p2", hits)
		}
		if got := citations(search(t, ix, "wombat", 5)); len(got) != 2 || !slices.Contains(got, "manual.pdf:p1") || !slices.Contains(got, "notes.md:1-3") {
			t.Fatalf("hits %v; want manual.pdf:p1 and notes.md:1-3 only", got)
		}
		st, err := ix.Status(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{
			"broken.pdf": "broken PDF: not a PDF file: missing %%EOF",
			"locked.pdf": "encrypted PDF: it needs a password",
			"scan.pdf":   errNoText,
		}
		if len(st) != 1 || st[0].Files != 2 || len(st[0].Skipped) != len(want) {
			t.Fatalf("status %+v", st)
		}
		for _, s := range st[0].Skipped {
			if s.Error != want[s.Path] {
				t.Errorf("skipped %s: %q; want %q", s.Path, s.Error, want[s.Path])
			}
		}

		// Nothing changed: nothing is read or reported again.
		if rep := reindex(t, ix, "docs", false); rep.Changed != 0 || rep.Unchanged != 5 || len(rep.Skipped) != 0 {
			t.Fatalf("second reindex %+v; want 5 unchanged", rep)
		}

		// An edited PDF is indexed again; the old text is gone.
		writePDF(t, dir, "manual.pdf", [][]string{{"Setup", "Install the wombat package first."}, {"Feeding", "Numbats eat ants as well."}, {"Sleep", "Koalas sleep all day."}}, pdfOptions{})
		rep = reindex(t, ix, "docs", false)
		if rep.Changed != 1 || rep.Chunks != 3 {
			t.Fatalf("after the edit %+v; want manual.pdf re-chunked into 3", rep)
		}
		if hits := search(t, ix, "termites", 5); len(hits) != 0 {
			t.Fatalf("old text still found: %v", citations(hits))
		}
		if got := citations(search(t, ix, "koalas", 5)); !slices.Equal(got, []string{"manual.pdf:p3"}) {
			t.Fatalf("hits %v; want manual.pdf:p3", got)
		}

		// A fixed PDF is indexed; a deleted one disappears (rows and
		// full-text entries).
		writePDF(t, dir, "broken.pdf", [][]string{{"The dingo howls."}}, pdfOptions{})
		if err := os.Remove(filepath.Join(dir, "manual.pdf")); err != nil {
			t.Fatal(err)
		}
		rep = reindex(t, ix, "docs", false)
		if rep.Changed != 1 || rep.Removed != 1 || rep.Files != 2 {
			t.Fatalf("after fix and delete %+v; want broken.pdf indexed, manual.pdf removed", rep)
		}
		if got := citations(search(t, ix, "koalas wombat dingo", 5)); !slices.Equal(got, []string{"broken.pdf:p1", "notes.md:1-3"}) && !slices.Equal(got, []string{"notes.md:1-3", "broken.pdf:p1"}) {
			t.Fatalf("hits %v; want broken.pdf:p1 and notes.md:1-3", got)
		}
		if n := count(t, db, `SELECT COUNT(*) FROM knowledge_chunk WHERE path='manual.pdf'`) + count(t, db, `SELECT COUNT(*) FROM knowledge_file WHERE path='manual.pdf'`); n != 0 {
			t.Fatalf("%d rows of manual.pdf left", n)
		}
	})
}

func TestReindexPDFLimits(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		dir := t.TempDir()
		big := makePDF([][]string{{"quoll " + strings.Repeat("spots ", 400)}}, pdfOptions{})
		writeFile(t, dir, "big.pdf", string(big))
		writePDF(t, dir, "wordy.pdf", [][]string{{strings.Repeat("quoll ", 40)}, {strings.Repeat("quoll ", 40)}}, pdfOptions{})
		writePDF(t, dir, "ok.pdf", [][]string{{"the quoll is a carnivore"}}, pdfOptions{})
		ix, _ := newIndex(t, d, dir, nil, func(o *Options) { o.MaxPDFBytes = int64(len(big) - 1); o.MaxFileBytes = 300 })
		rep := reindex(t, ix, "docs", false)
		want := map[string]string{
			"big.pdf":   fmt.Sprintf("too big: %d bytes, more than max_pdf_bytes %d", len(big), len(big)-1),
			"wordy.pdf": "too much text: 478 bytes extracted, more than max_file_bytes 300",
		}
		if rep.Files != 1 || len(rep.Skipped) != 2 {
			t.Fatalf("report %+v; want ok.pdf indexed, 2 skipped", rep)
		}
		for _, s := range rep.Skipped {
			if s.Error != want[s.Path] {
				t.Errorf("skipped %s: %q; want %q", s.Path, s.Error, want[s.Path])
			}
		}
		if got := citations(search(t, ix, "quoll", 5)); !slices.Equal(got, []string{"ok.pdf:p1"}) {
			t.Fatalf("hits %v; want ok.pdf:p1", got)
		}
	})
}
