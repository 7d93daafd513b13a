package console

import (
	"fmt"
	"html/template"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hookroom/hookroom/trace"
)

// funcs are the templates' helpers. None of them returns template.HTML:
// everything a template prints is escaped by html/template.
var funcs = template.FuncMap{
	"rfc3339":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"utc":          func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"dur":          fmtDuration,
	"num":          fmtNumber,
	"matrixTo":     matrixTo,
	"effectClass":  effectClass,
	"outcomeClass": outcomeClass,
	"stateClass":   stateClass,
	"join":         func(s []string) string { return strings.Join(s, ", ") },
	"str":          func(v any) string { return fmt.Sprint(v) },
	"nav":          func() []navItem { return navItems },
}

type navItem struct{ Name, Path, Title string }

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
func fmtNumber(v any) string {
	var n int64
	switch x := v.(type) {
	case int:
		n = int64(x)
	case int64:
		n = x
	case uint64:
		n = int64(x)
	default:
		return fmt.Sprint(v)
	}
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
func matrixTo(room, event any) string {
	u := "https://matrix.to/#/" + url.PathEscape(fmt.Sprint(room))
	if e := fmt.Sprint(event); e != "" {
		u += "/" + url.PathEscape(e)
	}
	return u
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
// here and drawn by the template as SVG attributes (no style attributes:
// the CSP forbids them).
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

// point is one value of a chart.
type point struct {
	// Label is shown; Title is the tooltip.
	Label, Title string
	Value        int
}

// chart is a bar chart drawn by the template as SVG. The renderer (here)
// computes the geometry; every label reaches the page through html/template
// and is escaped there.
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
