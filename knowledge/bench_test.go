package knowledge

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/internal/dbtest"
)

// benchCorpus writes files Markdown files of sections sections each, one
// chunk per section, of words drawn from a vocabulary of 5,000, and returns
// their total size.
func benchCorpus(b *testing.B, dir string, files, sections int) int64 {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("w%x", i*7919)
	}
	var total int64
	for f := range files {
		var sb strings.Builder
		for s := range sections {
			fmt.Fprintf(&sb, "## Section %d\n\n", s)
			for w := range 35 {
				if w > 0 {
					sb.WriteByte(' ')
				}
				sb.WriteString(vocab[r.IntN(len(vocab))])
			}
			sb.WriteString(".\n\n")
		}
		writeFile(b, dir, fmt.Sprintf("f%03d/doc%d.md", f%50, f), sb.String())
		total += int64(sb.Len())
	}
	return total
}

// BenchmarkSearch measures a three-word search over 10,000 chunks and
// reports its 95th percentile; BenchmarkIndex the indexing throughput.
func BenchmarkSearch(b *testing.B) {
	for _, d := range []dbtest.Dialect{dbtest.SQLite, dbtest.Postgres} {
		b.Run(d.Name, func(b *testing.B) {
			dir := b.TempDir()
			benchCorpus(b, dir, 500, 20)
			o := Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}, ChunkSize: 400}}}
			ix := New(d.Fresh(b), o, nil)
			if err := ix.Upgrade(b.Context()); err != nil {
				b.Fatal(err)
			}
			if _, err := ix.Reindex(b.Context(), "docs", false); err != nil {
				b.Fatal(err)
			}
			st, _ := ix.Status(b.Context())
			if st[0].Chunks != 10000 {
				b.Fatalf("%d chunks; want 10000", st[0].Chunks)
			}
			r := rand.New(rand.NewPCG(3, 4))
			var took []time.Duration
			b.ResetTimer()
			for b.Loop() {
				q := fmt.Sprintf("w%x w%x w%x", r.IntN(5000)*7919, r.IntN(5000)*7919, r.IntN(5000)*7919)
				t0 := time.Now()
				hits, err := ix.Search(b.Context(), nil, q, 5)
				took = append(took, time.Since(t0))
				if err != nil || len(hits) == 0 {
					b.Fatalf("Search(%q) = %d hits, %v", q, len(hits), err)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
		})
	}
}

func BenchmarkIndex(b *testing.B) {
	for _, d := range []dbtest.Dialect{dbtest.SQLite, dbtest.Postgres} {
		b.Run(d.Name, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "docs")
			size := benchCorpus(b, dir, 100, 20)
			o := Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}, ChunkSize: 400}}}
			ix := New(d.Fresh(b), o, nil)
			if err := ix.Upgrade(b.Context()); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			b.ResetTimer()
			for b.Loop() {
				rep, err := ix.Reindex(b.Context(), "docs", true)
				if err != nil || rep.Changed != 100 {
					b.Fatalf("Reindex = %+v, %v", rep, err)
				}
			}
		})
	}
}

// BenchmarkIndexPDF measures indexing PDFs (made by makePDF: uncompressed
// Helvetica text, 20 files of 10 pages of 40 lines): MB/s of PDF files,
// and text-MB/s of the text extracted.
func BenchmarkIndexPDF(b *testing.B) {
	for _, d := range []dbtest.Dialect{dbtest.SQLite, dbtest.Postgres} {
		b.Run(d.Name, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "docs")
			r := rand.New(rand.NewPCG(1, 2))
			var size int64
			for f := range 20 {
				pages := make([][]string, 10)
				for p := range pages {
					for range 40 {
						words := make([]string, 10)
						for w := range words {
							words[w] = fmt.Sprintf("w%x", r.IntN(5000)*7919)
						}
						pages[p] = append(pages[p], strings.Join(words, " "))
					}
				}
				data := makePDF(pages, pdfOptions{})
				writeFile(b, dir, fmt.Sprintf("doc%d.pdf", f), string(data))
				size += int64(len(data))
			}
			o := Options{Bases: map[string]BaseOptions{"docs": {Paths: []string{dir}, ChunkSize: 400}}}
			ix := New(d.Fresh(b), o, nil)
			if err := ix.Upgrade(b.Context()); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			var text int64
			b.ResetTimer()
			for b.Loop() {
				rep, err := ix.Reindex(b.Context(), "docs", true)
				if err != nil || rep.Changed != 20 || len(rep.Skipped) != 0 {
					b.Fatalf("Reindex = %+v, %v", rep, err)
				}
				text += rep.Bytes
			}
			b.ReportMetric(float64(text)/1e6/b.Elapsed().Seconds(), "text-MB/s")
		})
	}
}
