package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/trace"
)

// turnPage is how many turns the conversations page lists at a time.
const turnPage = 50

func (c *console) overview(w http.ResponseWriter, r *http.Request) {
	var o *Overview
	if c.o.Status != nil {
		v := c.o.Status.Overview(r.Context())
		o = &v
	}
	c.render(w, http.StatusOK, sessionOf(r), page{Nav: "overview"}, overviewData{o})
}

type turnsData struct {
	Available bool
	Filter    trace.Filter
	Agents    []hooks.AgentName
	Outcomes  []string
	Turns     []trace.Summary
	Error     string
	// Rows is the URL of the list's live refresh; Older the next page's.
	Rows  safeURL
	Older safeURL
}

// turns shows the conversations page, or with part=rows only the list's
// rows (its live refresh).
func (c *console) turns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := &turnsData{Available: c.o.Turns != nil}
	d.Filter = trace.Filter{
		Agent: hooks.AgentName(strings.TrimSpace(q.Get("agent"))), RoomID: id.RoomID(strings.TrimSpace(q.Get("room"))),
		Sender: id.UserID(strings.TrimSpace(q.Get("person"))), Outcome: strings.TrimSpace(q.Get("outcome")),
		Limit: turnPage,
	}
	d.Filter.Before, _ = strconv.ParseInt(q.Get("before"), 10, 64)
	if d.Available {
		var err error
		d.Turns, err = c.o.Turns.List(r.Context(), d.Filter)
		if err != nil {
			zerolog.Ctx(r.Context()).Error().Err(err).Msg("Failed to list turns for the console")
			d.Error = "The turns could not be read: see the server's log."
		}
		if q.Get("part") != "rows" {
			d.Agents, err = c.o.Turns.Agents(r.Context())
			if err == nil {
				d.Outcomes, err = c.o.Turns.Outcomes(r.Context())
			}
			if err != nil {
				zerolog.Ctx(r.Context()).Error().Err(err).Msg("Failed to list turn facets for the console")
			}
		}
	}
	v := url.Values{}
	for k, s := range map[string]string{"agent": string(d.Filter.Agent), "room": string(d.Filter.RoomID), "person": string(d.Filter.Sender), "outcome": d.Filter.Outcome} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if d.Filter.Before > 0 {
		v.Set("before", strconv.FormatInt(d.Filter.Before, 10))
	}
	v.Set("part", "rows")
	d.Rows = safeURL("/turns?" + v.Encode())
	if n := len(d.Turns); n >= turnPage {
		v.Del("part")
		v.Set("before", strconv.FormatInt(d.Turns[n-1].ID, 10))
		d.Older = safeURL("/turns?" + v.Encode())
	}
	if q.Get("part") == "rows" {
		c.fragment(w, d.rows)
		return
	}
	c.render(w, http.StatusOK, sessionOf(r), page{Nav: "turns"}, d)
}

type turnData struct {
	T        *trace.Trace
	Timeline timeline
}

// turn is the turn inspector.
func (c *console) turn(w http.ResponseWriter, r *http.Request) {
	ss := sessionOf(r)
	if c.o.Turns == nil {
		c.errorPage(w, ss, http.StatusNotFound, "Turns are not available.")
		return
	}
	n, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		c.errorPage(w, ss, http.StatusNotFound, "There is no such turn.")
		return
	}
	t, err := c.o.Turns.Get(r.Context(), n)
	if errors.Is(err, trace.ErrNotFound) || (err == nil && t == nil) {
		c.errorPage(w, ss, http.StatusNotFound, fmt.Sprintf("Turn %d is not recorded (or was pruned).", n))
		return
	}
	if err != nil {
		zerolog.Ctx(r.Context()).Error().Err(err).Int64("turn", n).Msg("Failed to read a turn for the console")
		c.errorPage(w, ss, http.StatusInternalServerError, "The turn could not be read: see the server's log.")
		return
	}
	c.render(w, http.StatusOK, ss, page{Nav: "turns", Title: fmt.Sprintf("Turn %d", t.ID)}, &turnData{T: t, Timeline: newTimeline(t)})
}

type hookRow struct {
	hooks.HookInfo
	Runs, Errors, Timeouts uint64
	P50, P95               time.Duration
	HasStats               bool
}

type hooksData struct {
	Available bool
	Rows      []hookRow
}

// hooks lists every hook with its statistics, or with part=rows only the
// table's rows (its live refresh).
func (c *console) hooks(w http.ResponseWriter, r *http.Request) {
	d := &hooksData{Available: c.o.Hooks != nil}
	if d.Available {
		type key struct{ event, plugin, hook string }
		stats := map[key]hooks.HookStats{}
		for _, s := range c.o.Hooks.Stats() {
			stats[key{s.Event, s.Plugin, s.Hook}] = s
		}
		for _, h := range c.o.Hooks.Hooks() {
			row := hookRow{HookInfo: h}
			if s, ok := stats[key{h.Event, h.Plugin, h.Hook}]; ok {
				row.HasStats = true
				row.Runs, row.Errors, row.Timeouts = s.Invocations, s.Errors+s.Panics, s.Timeouts
				row.P50, row.P95 = quantile(s, 0.50), quantile(s, 0.95)
			}
			d.Rows = append(d.Rows, row)
		}
	}
	if r.URL.Query().Get("part") == "rows" {
		c.fragment(w, d.rows)
		return
	}
	c.render(w, http.StatusOK, sessionOf(r), page{Nav: "hooks"}, d)
}

// quantile estimates the q-quantile of a hook's run time from its
// histogram: the upper bound of the bucket it falls in, at most the longest
// run.
func quantile(s hooks.HookStats, q float64) time.Duration {
	if s.Invocations == 0 {
		return 0
	}
	target := uint64(q*float64(s.Invocations) + 0.999999)
	if target < 1 {
		target = 1
	}
	for i, n := range s.Buckets {
		if n >= target && i < len(hooks.LatencyBuckets) {
			return min(hooks.LatencyBuckets[i], s.Max)
		}
	}
	return s.Max
}

type usageData struct {
	Available bool
	Days      int
	Report    UsageReport
	Error     string
	PerDay    chart
	PerAgent  chart
	PerPerson chart
}

// usage shows the token usage of the last 14 (or 30) days.
func (c *console) usage(w http.ResponseWriter, r *http.Request) {
	d := &usageData{Available: c.o.Usage != nil, Days: 14}
	if r.URL.Query().Get("days") == "30" {
		d.Days = 30
	}
	if d.Available {
		rep, err := c.o.Usage.Usage(r.Context(), d.Days)
		if err != nil {
			zerolog.Ctx(r.Context()).Error().Err(err).Msg("Failed to read usage for the console")
			d.Error = "The usage could not be read: see the server's log."
		}
		d.Report = rep
		days := make([]point, len(rep.Days))
		for i, u := range rep.Days {
			days[i] = point{Label: u.Day.UTC().Format("01-02"), Title: u.Day.UTC().Format("2006-01-02"), Value: u.Tokens}
		}
		d.PerDay = columnChart("Tokens per day", days)
		d.PerAgent = barChart("Tokens per agent", tallies(rep.ByAgent))
		d.PerPerson = barChart("Tokens per person", tallies(rep.ByPerson))
	}
	c.render(w, http.StatusOK, sessionOf(r), page{Nav: "usage"}, d)
}

func tallies(ts []Tally) []point {
	out := make([]point, len(ts))
	for i, t := range ts {
		out[i] = point{Label: t.Name, Title: t.Name, Value: t.Tokens}
	}
	return out
}

type schedulesData struct {
	Available bool
	List      []Schedule
	Error     string
	// Confirm is the schedule whose cancellation the page asks to confirm.
	Confirm *Schedule
}

// Flash messages of the actions, by the code their redirect carries (a
// fixed set: a link cannot make the console say anything else).
var flashes = map[string]string{
	"cancelled": "The schedule was cancelled.",
	"approved":  "The call was approved.",
	"denied":    "The call was denied.",
}

func (c *console) schedules(w http.ResponseWriter, r *http.Request) {
	d := &schedulesData{Available: c.o.Schedules != nil}
	if d.Available {
		var err error
		d.List, err = c.o.Schedules.List(r.Context())
		if err != nil {
			zerolog.Ctx(r.Context()).Error().Err(err).Msg("Failed to list schedules for the console")
			d.Error = "The schedules could not be read: see the server's log."
		}
		if id := r.URL.Query().Get("cancel"); id != "" {
			for i := range d.List {
				if d.List[i].ID == id {
					d.Confirm = &d.List[i]
				}
			}
		}
	}
	c.render(w, http.StatusOK, sessionOf(r), page{Nav: "schedules", Flash: flashes[r.URL.Query().Get("done")]}, d)
}

// cancelSchedule cancels a schedule (after the confirmation page).
func (c *console) cancelSchedule(w http.ResponseWriter, r *http.Request) {
	ss := sessionOf(r)
	if c.o.Schedules == nil {
		c.errorPage(w, ss, http.StatusNotFound, "Schedules are not available.")
		return
	}
	id := r.PostFormValue("id")
	if err := c.o.Schedules.Cancel(r.Context(), id, Operator); err != nil {
		zerolog.Ctx(r.Context()).Warn().Err(err).Str("schedule", id).Msg("Console failed to cancel a schedule")
		c.errorPage(w, ss, http.StatusUnprocessableEntity, "The schedule could not be cancelled: "+err.Error())
		return
	}
	zerolog.Ctx(r.Context()).Info().Str("schedule", id).Msg("Schedule cancelled in the console")
	http.Redirect(w, r, "/schedules?done=cancelled", http.StatusSeeOther)
}

type approvalsData struct {
	Available bool
	List      []Approval
	Error     string
}

func (c *console) approvals(w http.ResponseWriter, r *http.Request) {
	d := &approvalsData{Available: c.o.Approvals != nil}
	if d.Available {
		var err error
		d.List, err = c.o.Approvals.Pending(r.Context())
		if err != nil {
			zerolog.Ctx(r.Context()).Error().Err(err).Msg("Failed to list approvals for the console")
			d.Error = "The approvals could not be read: see the server's log."
		}
	}
	c.render(w, http.StatusOK, sessionOf(r), page{Nav: "approvals", Flash: flashes[r.URL.Query().Get("done")]}, d)
}

// decide approves or denies a pending tool call.
func (c *console) decide(w http.ResponseWriter, r *http.Request) {
	ss := sessionOf(r)
	if c.o.Approvals == nil {
		c.errorPage(w, ss, http.StatusNotFound, "Approvals are not available.")
		return
	}
	id, decision := r.PostFormValue("id"), r.PostFormValue("decision")
	if decision != "approve" && decision != "deny" {
		c.errorPage(w, ss, http.StatusBadRequest, "Approve or deny.")
		return
	}
	if err := c.o.Approvals.Decide(r.Context(), id, decision == "approve", Operator); err != nil {
		zerolog.Ctx(r.Context()).Warn().Err(err).Str("approval", id).Msg("Console failed to decide an approval")
		c.errorPage(w, ss, http.StatusUnprocessableEntity, "The decision could not be recorded: "+err.Error())
		return
	}
	zerolog.Ctx(r.Context()).Info().Str("approval", id).Str("decision", decision).Msg("Approval decided in the console")
	done := "approved"
	if decision == "deny" {
		done = "denied"
	}
	http.Redirect(w, r, "/approvals?done="+done, http.StatusSeeOther)
}

type configData struct {
	Available bool
	File      ConfigFile
	Error     string
	// Text and Version are the editor's content and base.
	Text, Version string
	Preview       *ConfigPreview
	Diff          []diffLine
	Saved         *ConfigSaved
}

type diffLine struct{ Class, Text string }

func (c *console) config(w http.ResponseWriter, r *http.Request) {
	d := &configData{Available: c.o.Config != nil}
	if d.Available {
		f, err := c.o.Config.Load(r.Context())
		if err != nil {
			zerolog.Ctx(r.Context()).Error().Err(err).Msg("Failed to load config.yaml for the console")
			d.Error = "config.yaml could not be read: " + err.Error()
		}
		d.File, d.Text, d.Version = f, f.Text, f.Version
	}
	c.render(w, http.StatusOK, sessionOf(r), page{Nav: "config"}, d)
}

// configPost previews (action=preview) or saves (action=save) an edit.
func (c *console) configPost(w http.ResponseWriter, r *http.Request) {
	ss := sessionOf(r)
	if c.o.Config == nil {
		c.errorPage(w, ss, http.StatusNotFound, "The configuration is not available.")
		return
	}
	log := zerolog.Ctx(r.Context())
	text := strings.ReplaceAll(r.PostFormValue("text"), "\r\n", "\n")
	d := &configData{Available: true, Text: text, Version: r.PostFormValue("version")}
	if f, err := c.o.Config.Load(r.Context()); err == nil {
		d.File = f
	}
	status := http.StatusOK
	switch r.PostFormValue("action") {
	case "preview":
		p, err := c.o.Config.Preview(r.Context(), text, d.Version)
		if err != nil {
			log.Error().Err(err).Msg("Failed to preview a config edit in the console")
			d.Error = "The edit could not be checked: " + err.Error()
			break
		}
		d.Preview, d.Diff = &p, diffLines(p.Diff)
	case "save":
		s, err := c.o.Config.Save(r.Context(), text, d.Version, Operator)
		if err != nil {
			log.Error().Err(err).Msg("Failed to save a config edit in the console")
			d.Error = "The edit could not be saved: " + err.Error()
			status = http.StatusInternalServerError
			break
		}
		d.Saved = &s
		if !s.Saved {
			status = http.StatusUnprocessableEntity
			break
		}
		log.Info().Bool("reload_ok", s.ReloadOK).Str("summary", s.Summary).Msg("config.yaml saved in the console")
		if f, err := c.o.Config.Load(r.Context()); err == nil {
			d.File, d.Text, d.Version = f, f.Text, f.Version
		}
	default:
		c.errorPage(w, ss, http.StatusBadRequest, "Preview or save.")
		return
	}
	c.render(w, status, ss, page{Nav: "config"}, d)
}

// diffLines splits a unified diff into lines classed for display.
func diffLines(diff string) []diffLine {
	if diff == "" {
		return nil
	}
	var out []diffLine
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		class := ""
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
			class = "file"
		case strings.HasPrefix(l, "@@"):
			class = "hunk"
		case strings.HasPrefix(l, "+"):
			class = "add"
		case strings.HasPrefix(l, "-"):
			class = "del"
		}
		out = append(out, diffLine{Class: class, Text: l})
	}
	return out
}

type logsData struct {
	Available bool
	Level     string
	Levels    []string
	Lines     []LogLine
	Rows      safeURL
}

// logsShown is the most lines the logs page shows.
const logsShown = 500

// logs shows the recent log lines, newest first, or with part=rows only the
// list (its live refresh).
func (c *console) logs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := &logsData{Available: c.o.Logs != nil, Level: "debug", Levels: []string{"debug", "info", "warn", "error"}}
	if l := q.Get("level"); slices.Contains(d.Levels, l) {
		d.Level = l
	}
	if d.Available {
		d.Lines = c.o.Logs.Lines(d.Level, logsShown)
	}
	d.Rows = safeURL("/logs?" + url.Values{"level": {d.Level}, "part": {"rows"}}.Encode())
	if q.Get("part") == "rows" {
		c.fragment(w, d.rows)
		return
	}
	c.render(w, http.StatusOK, sessionOf(r), page{Nav: "logs"}, d)
}
