package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookroom/hookroom/trace"
)

// page is what the layout around every page needs.
type page struct {
	// Nav is the page's entry in the navigation.
	Nav   string
	Title string
	// CSRF is the session's token ("" when signed out).
	CSRF string
	// Flash is a one-line message from the last action.
	Flash string
}

// view is a page's content, inside the layout.
type view interface {
	content(w *htmlWriter, p *page)
}

// render writes the page nav (titled from titles unless p.Title is set)
// with v's content inside the layout. A page is built whole in memory and
// then written.
func (c *console) render(w http.ResponseWriter, status int, ss *session, p page, v view) {
	if p.Title == "" {
		p.Title = titles[p.Nav]
	}
	if ss != nil {
		p.CSRF = ss.csrf
	}
	h := &htmlWriter{}
	h.b.Grow(16 << 10)
	layout(h, &p, v)
	send(w, status, h)
}

// fragment writes only a list's rows (a live refresh) with rows.
func (c *console) fragment(w http.ResponseWriter, rows func(*htmlWriter)) {
	h := &htmlWriter{}
	rows(h)
	send(w, http.StatusOK, h)
}

func send(w http.ResponseWriter, status int, h *htmlWriter) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(h.b.Bytes())
}

// titles are the pages' titles, and the navigation's entries.
var titles = map[string]string{
	"overview":  "Overview",
	"turns":     "Conversations",
	"hooks":     "Hooks",
	"usage":     "Usage",
	"schedules": "Schedules",
	"approvals": "Approvals",
	"config":    "Configuration",
	"logs":      "Logs",
	"signin":    "Sign in",
	"error":     "Error",
}

type navItem struct {
	Name  string
	Path  safeURL
	Title string
}

var navItems = []navItem{
	{"overview", "/", "Overview"},
	{"turns", "/turns", "Conversations"},
	{"hooks", "/hooks", "Hooks"},
	{"usage", "/usage", "Usage"},
	{"schedules", "/schedules", "Schedules"},
	{"approvals", "/approvals", "Approvals"},
	{"config", "/config", "Configuration"},
	{"logs", "/logs", "Logs"},
}

const head = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false,"historyCacheSize":0}'>
<title>`

const scripts = ` · hookroom</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/assets/console.css">
<script src="/assets/htmx.min.js" defer></script>
<script src="/assets/console.js" defer></script>
</head>
<body`

// layout writes the whole page: the head, the navigation (signed in), the
// title, the flash message and v's content.
func layout(w *htmlWriter, p *page, v view) {
	w.markup(head)
	w.text(p.Title)
	w.markup(scripts)
	if p.CSRF != "" {
		// htmx sends the CSRF token with every request. The attribute is
		// single quoted around JSON; text escapes ' as well as ".
		w.markup(` hx-headers='{"X-CSRF-Token": "`)
		w.text(p.CSRF)
		w.markup(`"}'`)
	}
	w.markup(">\n<a class=\"skip\" href=\"#main\">Skip to content</a>\n<div class=\"shell")
	if p.CSRF == "" {
		w.markup(" bare")
	}
	w.markup(`">`)
	if p.CSRF != "" {
		w.markup("\n<nav class=\"side\" aria-label=\"Console\">\n<a class=\"brand\" href=\"/\">hookroom</a>\n<ul>")
		for _, n := range navItems {
			w.markup("\n<li><a")
			w.href(n.Path)
			if n.Name == p.Nav {
				w.markup(` aria-current="page"`)
			}
			w.markup(">")
			w.text(n.Title)
			w.markup("</a></li>")
		}
		w.markup("\n</ul>\n<form method=\"post\" action=\"/signout\" class=\"signout\">\n")
		w.hidden("csrf", p.CSRF)
		w.markup("\n<button type=\"submit\">Sign out</button>\n</form>\n</nav>")
	}
	w.markup("\n<main id=\"main\" tabindex=\"-1\">\n")
	w.el("h1", p.Title)
	w.markup("\n")
	if p.Flash != "" {
		w.markup(`<p class="flash" role="status">`)
		w.text(p.Flash)
		w.markup("</p>")
	}
	w.markup("\n")
	v.content(w, p)
	w.markup("\n</main>\n</div>\n</body>\n</html>")
}

// fmtDuration says d in the unit that suits it ("0.42 ms", "12 ms",
// "1.25 s", "3m20s").
func fmtDuration(d time.Duration) string {
	switch {
	case d <= 0:
		return "0"
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s"
	default:
		return d.Round(time.Second).String()
	}
}

// fmtNumber writes n with thousands separators.
func fmtNumber[T int | int64 | uint64](v T) string {
	n := int64(v)
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// matrixTo is the matrix.to link of a room or, with an event, of a message.
func matrixTo(room, event string) safeURL {
	u := "https://matrix.to/#/" + url.PathEscape(room)
	if event != "" {
		u += "/" + url.PathEscape(event)
	}
	return safeURL(u)
}

var effects = map[string]bool{
	trace.EffectUnchanged: true, trace.EffectChanged: true, trace.EffectSuppressed: true,
	trace.EffectClaimed: true, trace.EffectDeclined: true, trace.EffectApprovalRequired: true,
	trace.EffectFailed: true, trace.EffectTimedOut: true, trace.EffectAbandoned: true,
}

// effectClass is the badge class of a hook effect (one per effect).
func effectClass(e string) string {
	if effects[e] {
		return "fx-" + strings.ReplaceAll(e, "_", "-")
	}
	return "fx-unknown"
}

// outcomeClass is the badge class of a turn's outcome.
func outcomeClass(o string) string {
	switch o {
	case trace.OutcomeResponded:
		return "ok"
	case trace.OutcomeClaimed:
		return "info"
	case "error", "timeout", "failed":
		return "bad"
	default:
		return "warn"
	}
}

// stateClass is the badge class of an account's, plugin's or server's
// state.
func stateClass(s string) string {
	switch strings.ToLower(s) {
	case "ready", "running", "loaded", "ok", "connected", "scheduled", "active":
		return "ok"
	case "starting", "restarting", "pending", "backing off":
		return "warn"
	case "failed", "disabled", "closed", "crashed", "error", "stopped":
		return "bad"
	default:
		return ""
	}
}

// timeline is the turn inspector's picture of a turn: one row per stage
// (a bar from the start to the stage), model request and tool call (a bar
// over its time), on a scale of the turn's duration. Geometry is computed
// here and drawn by svg as SVG attributes (no style attributes: the CSP
// forbids them).
type timeline struct {
	Width, Height int
	Rows          []timelineRow
	Total         time.Duration
}

type timelineRow struct {
	Kind, Label    string
	Start, End     time.Duration
	Y, X, W, TextY int
}

const (
	tlLabel = 170 // width of the label column
	tlPlot  = 480 // width of the bars
	tlRow   = 22
)

func newTimeline(t *trace.Trace) timeline {
	tl := timeline{Width: tlLabel + tlPlot + 90, Total: t.Duration()}
	add := func(kind, label string, start, end time.Duration) {
		tl.Rows = append(tl.Rows, timelineRow{Kind: kind, Label: trace.Cut(label, 28), Start: start, End: end})
		tl.Total = max(tl.Total, end)
	}
	for _, s := range t.Stages {
		add("stage", s.Name, 0, s.At)
	}
	for _, m := range t.Models {
		add("model", "model "+m.Model, m.At, m.At+m.Latency)
	}
	for _, c := range t.Tools {
		add("tool", "tool "+c.Name, c.At, c.At+c.Duration)
	}
	scale := func(d time.Duration) int {
		if tl.Total <= 0 {
			return 0
		}
		return int(int64(d) * tlPlot / int64(tl.Total))
	}
	for i := range tl.Rows {
		r := &tl.Rows[i]
		r.Y = 4 + i*tlRow
		r.TextY = r.Y + 14
		r.X = tlLabel + scale(r.Start)
		r.W = max(2, scale(r.End)-scale(r.Start))
	}
	tl.Height = 8 + len(tl.Rows)*tlRow
	return tl
}

// svg writes the timeline, or says there is none.
func (tl *timeline) svg(w *htmlWriter) {
	if len(tl.Rows) == 0 {
		w.empty("No stages recorded.")
		return
	}
	w.markup(`<svg class="timeline"`)
	w.attr("viewBox", "0 0 "+strconv.Itoa(tl.Width)+" "+strconv.Itoa(tl.Height))
	w.intAttr("width", tl.Width)
	w.intAttr("height", tl.Height)
	w.markup(` role="img"`)
	w.attr("aria-label", "Stages of the turn over "+fmtDuration(tl.Total))
	w.markup(">")
	for _, r := range tl.Rows {
		w.markup("\n<g")
		w.attr("class", "tl-"+r.Kind)
		w.markup(">\n<title>")
		w.text(r.Label)
		w.markup(": ")
		w.dur(r.Start)
		w.markup(" → ")
		w.dur(r.End)
		w.markup("</title>\n<text class=\"label\" x=\"0\"")
		w.intAttr("y", r.TextY)
		w.markup(">")
		w.text(r.Label)
		w.markup("</text>\n<rect class=\"bar\"")
		w.intAttr("x", r.X)
		w.intAttr("y", r.Y)
		w.intAttr("width", r.W)
		w.markup(" height=\"16\"></rect>\n<text class=\"value\"")
		w.intAttr("x", r.X)
		w.intAttr("dx", r.W)
		w.intAttr("y", r.TextY)
		w.markup(">&#160;")
		w.dur(r.End)
		w.markup("</text>\n</g>")
	}
	w.markup("\n</svg>")
}

// point is one value of a chart.
type point struct {
	// Label is shown; Title is the tooltip.
	Label, Title string
	Value        int
}

// chart is a bar chart drawn by its svg method. The renderer (here)
// computes the geometry; every label reaches the page as escaped text.
type chart struct {
	Title         string
	Width, Height int
	Bars          []chartBar
	// Max is the largest value (the scale's top), MaxY where its label is.
	Max  int
	Axis bool
}

type chartBar struct {
	Label, Title, Value     string
	X, Y, W, H              int
	LabelX, LabelY          int
	ValueX, ValueY          int
	ShowLabel, LabelAtStart bool
}

// columnChart is a vertical bar per point (days along the x axis).
func columnChart(title string, pts []point) chart {
	const w, h, left, top, bottom = 720, 220, 56, 16, 28
	c := chart{Title: title, Width: w, Height: h, Axis: true}
	for _, p := range pts {
		c.Max = max(c.Max, p.Value)
	}
	if len(pts) == 0 {
		return c
	}
	plotH := h - top - bottom
	step := (w - left - 8) / len(pts)
	every := 1 + len(pts)/16
	for i, p := range pts {
		bh := 0
		if c.Max > 0 {
			bh = p.Value * plotH / c.Max
		}
		x := left + i*step
		c.Bars = append(c.Bars, chartBar{
			Label: p.Label, Title: p.Title + ": " + fmtNumber(p.Value) + " tokens", Value: fmtNumber(p.Value),
			X: x + step/8, Y: top + plotH - bh, W: max(1, step*3/4), H: bh,
			LabelX: x + step/2, LabelY: h - 10, ShowLabel: i%every == 0 || i == len(pts)-1,
		})
	}
	return c
}

// barChart is a horizontal bar per point (names down the y axis).
func barChart(title string, pts []point) chart {
	const w, label, plot, row = 720, 180, 430, 26
	c := chart{Title: title, Width: w, Height: 8 + row*len(pts)}
	for _, p := range pts {
		c.Max = max(c.Max, p.Value)
	}
	for i, p := range pts {
		bw := 0
		if c.Max > 0 {
			bw = p.Value * plot / c.Max
		}
		y := 4 + i*row
		c.Bars = append(c.Bars, chartBar{
			Label: trace.Cut(p.Label, 26), Title: p.Title + ": " + fmtNumber(p.Value) + " tokens", Value: fmtNumber(p.Value),
			X: label, Y: y, W: max(1, bw), H: row - 8,
			LabelX: 0, LabelY: y + 14, ShowLabel: true, LabelAtStart: true,
			ValueX: label + max(1, bw) + 6, ValueY: y + 14,
		})
	}
	return c
}

// figure writes the chart in a figure with its caption.
func (c *chart) figure(w *htmlWriter) {
	w.markup("<figure class=\"chart\">\n")
	w.el("figcaption", c.Title)
	if len(c.Bars) == 0 {
		w.markup("\n")
		w.empty("No usage in this period.")
		w.markup("\n</figure>")
		return
	}
	w.markup("\n<svg")
	w.attr("viewBox", "0 0 "+strconv.Itoa(c.Width)+" "+strconv.Itoa(c.Height))
	w.intAttr("width", c.Width)
	w.intAttr("height", c.Height)
	w.markup(` role="img"`)
	w.attr("aria-label", c.Title)
	w.markup(">")
	if c.Axis {
		w.markup("\n<text class=\"axis\" x=\"0\" y=\"20\">")
		w.num(c.Max)
		w.markup("</text>\n<text class=\"axis\" x=\"0\"")
		w.intAttr("y", c.Height)
		w.markup(` dy="-30">0</text>`)
	}
	for _, b := range c.Bars {
		w.markup("\n<g>\n")
		w.el("title", b.Title)
		w.markup("\n<rect class=\"bar\"")
		w.intAttr("x", b.X)
		w.intAttr("y", b.Y)
		w.intAttr("width", b.W)
		w.intAttr("height", b.H)
		w.markup("></rect>")
		if b.ShowLabel {
			w.markup(`<text class="label"`)
			w.intAttr("x", b.LabelX)
			w.intAttr("y", b.LabelY)
			if !b.LabelAtStart {
				w.markup(` text-anchor="middle"`)
			}
			w.markup(">")
			w.text(b.Label)
			w.markup("</text>")
		}
		if b.LabelAtStart {
			w.markup(`<text class="value"`)
			w.intAttr("x", b.ValueX)
			w.intAttr("y", b.ValueY)
			w.markup(">")
			w.text(b.Value)
			w.markup("</text>")
		}
		w.markup("\n</g>")
	}
	w.markup("\n</svg>\n</figure>")
}
