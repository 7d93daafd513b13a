package console

import (
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
)

func TestLogBuffer(t *testing.T) {
	b := NewLogBuffer(3)
	log := zerolog.New(b).With().Timestamp().Logger()
	log.Debug().Msg("one")
	log.Info().Str("agent", "helper").Str("text", "two words").Msg("two")
	log.Warn().Int("n", 3).Msg("three")
	log.Error().Err(errTest("boom")).Str("a", "x").Msg("four")
	_, _ = b.Write([]byte("not json\n"))

	for _, tc := range []struct {
		level string
		limit int
		want  []string
	}{
		{"", 0, []string{"not json", "four", "three"}},
		{"debug", 2, []string{"not json", "four"}},
		{"warn", 0, []string{"four", "three"}},
		{"error", 0, []string{"four"}},
	} {
		var got []string
		for _, l := range b.Lines(tc.level, tc.limit) {
			got = append(got, l.Message)
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("Lines(%q, %d) = %v, want %v", tc.level, tc.limit, got, tc.want)
		}
	}
	l := b.Lines("error", 1)[0]
	if l.Level != "error" || l.Fields != "error=boom a=x" || time.Since(l.Time) > time.Minute {
		t.Errorf("parsed %+v", l)
	}

	b = NewLogBuffer(0)
	log = zerolog.New(b)
	log.Info().Str("text", "two words").Str("empty", "").Bool("ok", true).Msg("m")
	if got := b.Lines("", 0)[0].Fields; got != `empty="" ok=true text="two words"` {
		t.Errorf("fields %s", got)
	}
}

type errTest string

func (e errTest) Error() string { return string(e) }

func TestQuantile(t *testing.T) {
	buckets := func(cum ...uint64) []uint64 {
		out := make([]uint64, len(hooks.LatencyBuckets))
		for i := range out {
			out[i] = cum[min(i, len(cum)-1)]
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		s        hooks.HookStats
		p50, p95 time.Duration
	}{
		{"no runs", hooks.HookStats{}, 0, 0},
		{"all fast", hooks.HookStats{Invocations: 10, Max: 100 * time.Microsecond, Buckets: buckets(10)}, 100 * time.Microsecond, 100 * time.Microsecond},
		{"spread", hooks.HookStats{Invocations: 100, Max: 4 * time.Millisecond, Buckets: buckets(0, 50, 90, 96, 100)}, 500 * time.Microsecond, 2500 * time.Microsecond},
		{"beyond the last bucket", hooks.HookStats{Invocations: 10, Max: time.Minute, Buckets: buckets(0)}, time.Minute, time.Minute},
	} {
		if p50, p95 := quantile(tc.s, 0.5), quantile(tc.s, 0.95); p50 != tc.p50 || p95 != tc.p95 {
			t.Errorf("%s: p50 %v p95 %v, want %v %v", tc.name, p50, p95, tc.p50, tc.p95)
		}
	}
}

// TestChartsEscapeLabels renders the charts with hostile labels: they come
// out as text.
func TestChartsEscapeLabels(t *testing.T) {
	evil := `<script>alert(1)</script>"><img src=x onerror=alert(1)>`
	for _, c := range []chart{
		barChart("per person", []point{{Label: evil, Title: evil, Value: 10}, {Label: "b", Value: 0}}),
		columnChart("per day "+evil, []point{{Label: evil, Title: evil, Value: 3}, {Label: "x", Value: 7}}),
		columnChart("empty", nil),
	} {
		var w htmlWriter
		c.figure(&w)
		out := w.b.String()
		if strings.Contains(out, "<script>") || strings.Contains(out, "<img") {
			t.Errorf("a label was not escaped:\n%s", out)
		}
		if len(c.Bars) > 0 && !strings.Contains(out, "&lt;script&gt;") {
			t.Errorf("a label is missing:\n%s", out)
		}
	}
	c := barChart("", []point{{Label: "a", Value: 100}, {Label: "b", Value: 50}})
	if c.Bars[0].W != 2*c.Bars[1].W || c.Bars[1].W == 0 {
		t.Errorf("bars %d and %d wide", c.Bars[0].W, c.Bars[1].W)
	}
}

func TestLocalPath(t *testing.T) {
	for in, want := range map[string]string{
		"/turns?agent=a": "/turns?agent=a", "/": "/", "": "/", "//evil": "/", "/\\evil": "/",
		"http://evil/": "/", "javascript:alert(1)": "/", "turns": "/", "/a\nb": "/",
	} {
		if got := localPath(in); got != want {
			t.Errorf("localPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestFormats(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "0", 420 * time.Microsecond: "0.42 ms", 12 * time.Millisecond: "12 ms",
		1250 * time.Millisecond: "1.25 s", 200 * time.Second: "3m20s",
	} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%v) = %q, want %q", d, got, want)
		}
	}
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -45900: "-45,900"} {
		if got := fmtNumber(n); got != want {
			t.Errorf("fmtNumber(%d) = %q, want %q", n, got, want)
		}
	}
	if got := matrixTo("!a:b.c", "$e"); got != "https://matrix.to/#/%21a:b.c/$e" {
		t.Errorf("matrixTo = %s", got)
	}
}

// TestHTMLWriter: text and attributes are escaped, links are built from
// escaped parts, and only markup writes as it is.
func TestHTMLWriter(t *testing.T) {
	var w htmlWriter
	w.markup("<p")
	w.attr("title", `a"b'c<d>&e+f`+"\x00")
	w.markup(">")
	w.text(`<script>alert("x")</script> & 'y' + z`)
	w.markup("</p>")
	for _, l := range []struct {
		u    safeURL
		text string
	}{
		{queryURL("/schedules?cancel=", `a b&c+d/é"><x`), `"><img src=x>`},
		{localURL("/turns/", "../x?y"), "t"},
		{matrixTo("!r o'om:x", `$e"v<`), "m"},
	} {
		w.markup("<a")
		w.href(l.u)
		w.markup(">")
		w.text(l.text)
		w.markup("</a>")
	}
	want := `<p title="a&#34;b&#39;c&lt;d&gt;&amp;e&#43;f` + "\uFFFD" + `">&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &#39;y&#39; &#43; z</p>` +
		`<a href="/schedules?cancel=a%20b%26c%2bd%2f%c3%a9%22%3e%3cx">&#34;&gt;&lt;img src=x&gt;</a>` +
		`<a href="/turns/..%2fx%3fy">t</a>` +
		`<a href="https://matrix.to/#/%21r%20o%27om:x/$e%22v%3C">m</a>`
	if got := w.b.String(); got != want {
		t.Errorf("wrote\n%s\nwant\n%s", got, want)
	}
	var tw htmlWriter
	tw.time(time.Time{})
	tw.time(time.Date(2025, 6, 1, 12, 0, 0, 0, time.FixedZone("x", 3600)))
	if got := tw.b.String(); got != `—<time datetime="2025-06-01T11:00:00Z">2025-06-01 11:00:00 UTC</time>` {
		t.Errorf("times %s", got)
	}
}
