package console

import (
	"strconv"
	"strings"
	"time"
)

// The pages' HTML, one content method per page (and a rows method per live
// list), in the order of the navigation. They write through htmlWriter:
// markup only for constants, everything else escaped.

// overviewData is the overview page's; a nil O is "not available".
type overviewData struct{ O *Overview }

func (d overviewData) content(w *htmlWriter, _ *page) {
	o := d.O
	if o == nil {
		w.notAvailable()
		return
	}
	w.markup("<section aria-labelledby=\"h-ready\">\n<h2 id=\"h-ready\">Readiness</h2>\n")
	if o.Ready {
		w.markup(`<p><span class="badge ok">ready</span></p>`)
	} else {
		w.markup("<p><span class=\"badge bad\">not ready</span></p>\n")
		if len(o.Reasons) > 0 {
			w.markup(`<ul class="reasons">`)
			for _, r := range o.Reasons {
				w.el("li", r)
			}
			w.markup("</ul>")
		}
	}
	w.markup("\n<p>Version ")
	w.code(or(o.Version, "unknown"))
	w.markup("</p>\n</section>\n\n")

	section(w, "h-accounts", "Accounts")
	if len(o.Accounts) > 0 {
		w.table("", []string{"Name", "User", "Device", "State", "Sync", "Model", "Rooms"}, len(o.Accounts), func(i int) {
			a := &o.Accounts[i]
			w.markup("<tr><td>")
			w.text(a.Name)
			if a.Router {
				w.markup(` <span class="badge info">router</span>`)
			}
			w.markup("</td>")
			w.tdCode(a.UserID)
			w.tdCode(a.DeviceID)
			w.markup("<td>")
			w.badge(stateClass(a.State), a.State)
			w.markup("</td>")
			w.td(a.Sync)
			w.td(a.Model)
			w.markup("<td>")
			w.itoa(int64(len(a.Rooms)))
			w.markup("</td></tr>")
		})
	} else {
		w.empty("No accounts yet.")
	}
	w.markup("\n</section>\n\n")

	section(w, "h-rooms", "Rooms")
	if len(o.Rooms) > 0 {
		w.table("", []string{"Room", "Name", "Agents", "Encrypted", "How"}, len(o.Rooms), func(i int) {
			r := &o.Rooms[i]
			w.markup("<tr><td><a")
			w.href(matrixTo(r.ID, ""))
			w.markup(` rel="noreferrer">`)
			w.text(or(r.Alias, r.ID))
			w.markup("</a></td>")
			w.td(r.Name)
			w.td(strings.Join(r.Agents, ", "))
			if r.Encrypted {
				w.markup(`<td><span class="badge ok">encrypted</span></td>`)
			} else {
				w.markup(`<td><span class="badge">plain</span></td>`)
			}
			if r.Invited {
				w.markup("<td>invited</td></tr>")
			} else {
				w.markup("<td>configured</td></tr>")
			}
		})
	} else {
		w.empty("No rooms.")
	}
	w.markup("\n</section>\n\n")

	section(w, "h-plugins", "Plugins")
	if len(o.Plugins) > 0 {
		w.table("", []string{"Plugin", "Kind", "State", "Restarts", "PID"}, len(o.Plugins), func(i int) {
			p := &o.Plugins[i]
			w.markup("<tr>")
			w.td(p.Name)
			w.td(p.Kind)
			w.markup("<td>")
			w.badge(stateClass(p.State), p.State)
			w.markup("</td><td>")
			w.itoa(int64(p.Restarts))
			w.markup("</td><td>")
			if p.PID != 0 {
				w.itoa(int64(p.PID))
			}
			w.markup("</td></tr>")
		})
	} else {
		w.empty("No plugins loaded.")
	}
	w.markup("\n</section>\n\n")

	section(w, "h-mcp", "MCP servers")
	if len(o.MCPServers) > 0 {
		w.table("", []string{"Server", "State", "Restarts", "Tools"}, len(o.MCPServers), func(i int) {
			m := &o.MCPServers[i]
			w.markup("<tr>")
			w.td(m.Name)
			w.markup("<td>")
			w.badge(stateClass(m.State), m.State)
			w.markup("</td><td>")
			w.itoa(int64(m.Restarts))
			w.markup("</td><td>")
			w.itoa(int64(m.Tools))
			w.markup("</td></tr>")
		})
	} else {
		w.empty("No MCP servers configured.")
	}
	w.markup("\n</section>\n\n")

	section(w, "h-reloads", "Last reloads")
	if len(o.Reloads) > 0 {
		w.markup(`<ol class="reloads">`)
		for _, r := range o.Reloads {
			w.markup("\n<li>")
			w.time(r.At)
			if r.OK {
				w.markup(` <span class="badge ok">ok</span> `)
				w.text(r.Summary)
			} else {
				w.markup(` <span class="badge bad">failed</span>`)
				codeList(w, "", r.Errors)
			}
			w.markup("</li>")
		}
		w.markup("\n</ol>")
	} else {
		w.empty("No reloads since the server started.")
	}
	w.markup("\n</section>")
}

// section opens a section headed by title, labelled by its heading id.
func section(w *htmlWriter, id, title string) {
	w.markup("<section")
	w.attr("aria-labelledby", id)
	w.markup(">\n<h2")
	w.attr("id", id)
	w.markup(">")
	w.text(title)
	w.markup("</h2>\n")
}

// codeList writes items as a list of code, if there are any.
func codeList(w *htmlWriter, class string, items []string) {
	if len(items) == 0 {
		return
	}
	w.markup("<ul")
	if class != "" {
		w.attr("class", class)
	}
	w.markup(">")
	for _, it := range items {
		w.markup("<li>")
		w.code(it)
		w.markup("</li>")
	}
	w.markup("</ul>")
}

// or is s, or else when s is empty.
func or(s, orElse string) string {
	if s == "" {
		return orElse
	}
	return s
}

func (d *turnsData) content(w *htmlWriter, _ *page) {
	if !d.Available {
		w.notAvailable()
		return
	}
	w.markup("<form method=\"get\" action=\"/turns\" class=\"filters\" role=\"search\">\n")
	w.markup(`<label>Agent <select name="agent"><option value="">any</option>`)
	for _, a := range d.Agents {
		option(w, string(a), string(d.Filter.Agent))
	}
	w.markup("</select></label>\n<label>Room <input name=\"room\"")
	w.attr("value", string(d.Filter.RoomID))
	w.markup(" placeholder=\"!room:server\"></label>\n<label>Person <input name=\"person\"")
	w.attr("value", string(d.Filter.Sender))
	w.markup(" placeholder=\"@person:server\"></label>\n")
	w.markup(`<label>Outcome <select name="outcome"><option value="">any</option>`)
	for _, o := range d.Outcomes {
		option(w, o, d.Filter.Outcome)
	}
	w.markup("</select></label>\n<button type=\"submit\">Filter</button> <a href=\"/turns\">Clear</a>\n</form>\n")
	w.tableStart("turns", "Started", "Agent", "Room", "Person", "Outcome", "Duration", "Tokens", "Hooks")
	liveBody(w, "turn-rows", d.Rows, "every 1s")
	d.rows(w)
	w.markup("\n")
	w.tableEnd()
	w.markup("\n")
	if d.Older != "" {
		w.markup(`<p class="pager"><a`)
		w.href(d.Older)
		w.markup(` rel="next">Older turns</a></p>`)
	}
}

// option writes a select's option v, selected when it is the current one.
func option(w *htmlWriter, v, current string) {
	w.markup("<option")
	w.attr("value", v)
	if v == current {
		w.markup(" selected")
	}
	w.markup(">")
	w.text(v)
	w.markup("</option>")
}

// liveBody opens the <tbody> whose rows htmx reloads from rows every
// trigger ("every 2s").
func liveBody(w *htmlWriter, id string, rows safeURL, trigger string) {
	w.markup("<tbody")
	w.attr("id", id)
	w.attr("hx-get", string(rows))
	w.attr("hx-trigger", trigger)
	w.markup(" hx-swap=\"innerHTML\">\n")
}

// rows are the conversation list's rows, also its live refresh.
func (d *turnsData) rows(w *htmlWriter) {
	if d.Error != "" {
		w.markup(`<tr><td colspan="8" class="error">`)
		w.text(d.Error)
		w.markup("</td></tr>")
	}
	for i := range d.Turns {
		t := &d.Turns[i]
		w.markup("\n<tr><td><a")
		w.href(localURL("/turns/", strconv.FormatInt(t.ID, 10)))
		w.markup(">")
		w.time(t.Started)
		w.markup("</a></td>")
		w.td(string(t.Agent))
		w.tdCode(string(t.RoomID))
		w.tdCode(string(t.Sender))
		w.markup("<td>")
		w.badge(outcomeClass(t.Outcome), t.Outcome)
		if t.Replayed {
			w.markup(` <span class="badge info">replayed</span>`)
		}
		w.markup("</td><td>")
		w.dur(t.Duration)
		w.markup("</td><td>")
		w.num(t.Tokens)
		w.markup("</td><td>")
		w.itoa(int64(t.Hooks))
		if t.ChangedHooks > 0 {
			w.markup(` <span class="badge fx-changed">`)
			w.itoa(int64(t.ChangedHooks))
			w.markup(" changed</span>")
		}
		if t.FailedHooks > 0 {
			w.markup(` <span class="badge fx-failed">`)
			w.itoa(int64(t.FailedHooks))
			w.markup(" failed</span>")
		}
		w.markup("</td></tr>")
	}
	if len(d.Turns) == 0 {
		w.markup("\n")
		if d.Error == "" {
			f := d.Filter
			w.markup(`<tr><td colspan="8" class="empty">No turns`)
			if f.Agent != "" || f.RoomID != "" || f.Sender != "" || f.Outcome != "" {
				w.markup(" match this filter")
			} else {
				w.markup(" yet: they appear here as people talk to the agents")
			}
			w.markup(".</td></tr>")
		}
	}
}

func (d *turnData) content(w *htmlWriter, _ *page) {
	t := d.T
	room := string(t.RoomID)
	w.markup("<dl class=\"facts\">\n<dt>Agent</dt>")
	w.el("dd", string(t.Agent))
	w.markup("\n<dt>Room</dt><dd><a")
	w.href(matrixTo(room, ""))
	w.markup(` rel="noreferrer">`)
	w.code(room)
	w.markup("</a></dd>\n<dt>Person</dt><dd>")
	w.code(string(t.Sender))
	w.markup("</dd>\n<dt>Message</dt><dd><a")
	w.href(matrixTo(room, string(t.EventID)))
	w.markup(` rel="noreferrer">`)
	w.code(string(t.EventID))
	w.markup("</a>")
	if t.ThreadID != "" {
		w.markup(" in thread ")
		w.code(string(t.ThreadID))
	}
	w.markup("</dd>\n<dt>Started</dt><dd>")
	w.time(t.Started)
	w.markup("</dd>\n<dt>Outcome</dt><dd>")
	w.badge(outcomeClass(t.Outcome), t.Outcome)
	if t.Detail != "" {
		w.markup(" ")
		w.text(t.Detail)
	}
	w.markup("</dd>\n<dt>Duration</dt><dd>")
	w.dur(t.Duration())
	w.markup("</dd>\n<dt>Tokens</dt><dd>")
	w.num(t.Tokens)
	w.markup("</dd>\n<dt>Replayed</dt><dd>")
	if t.Replayed {
		w.markup("yes, after a restart")
	} else {
		w.markup("no")
	}
	w.markup("</dd>\n")
	if t.CorrelationID != "" {
		w.markup("<dt>Correlation id</dt><dd>")
		w.code(t.CorrelationID)
		w.markup("</dd>")
	}
	w.markup("\n")
	if t.Dropped != 0 {
		w.markup("<dt>Dropped</dt><dd>")
		w.itoa(int64(t.Dropped))
		w.markup(" entries over the trace's limits</dd>")
	}
	w.markup("\n</dl>\n\n")

	section(w, "h-timeline", "Timeline")
	d.Timeline.svg(w)
	w.markup("\n</section>\n\n")

	w.markup("<section aria-labelledby=\"h-hooks\">\n<h2 id=\"h-hooks\">Hooks (")
	w.itoa(int64(len(t.Hooks)))
	w.markup(")</h2>\n")
	if len(t.Hooks) > 0 {
		w.table("hookruns", []string{"#", "Event", "Plugin / hook", "Mode", "At", "Duration", "Effect", "Change / error"}, len(t.Hooks), func(i int) {
			h := &t.Hooks[i]
			w.markup("<tr><td>")
			w.itoa(int64(i))
			w.markup("</td>")
			w.tdCode(h.Event)
			w.markup("<td>")
			w.text(h.Plugin)
			w.markup(" / ")
			w.text(h.Hook)
			w.markup("</td>")
			w.td(h.Mode)
			w.markup("<td>")
			w.dur(h.At)
			w.markup("</td><td>")
			w.dur(h.Duration)
			w.markup("</td><td>")
			w.badge(effectClass(h.Effect), h.Effect)
			w.markup("</td><td>")
			pre(w, "change", h.Change)
			pre(w, "error", h.Error)
			w.markup("</td></tr>")
		})
	} else {
		w.empty("No hook ran in this turn.")
	}
	w.markup("\n</section>\n\n")

	section(w, "h-models", "Model requests")
	if len(t.Models) > 0 {
		w.table("", []string{"Model", "Sent at", "Latency", "Prompt", "Completion", "Cached", "Finish"}, len(t.Models), func(i int) {
			m := &t.Models[i]
			w.markup("<tr>")
			w.td(m.Model)
			w.markup("<td>")
			w.dur(m.At)
			w.markup("</td><td>")
			w.dur(m.Latency)
			w.markup("</td><td>")
			w.num(m.PromptTokens)
			w.markup("</td><td>")
			w.num(m.CompletionTokens)
			w.markup("</td><td>")
			w.num(m.CachedTokens)
			w.markup("</td><td>")
			w.text(m.FinishReason)
			pre(w, "error", m.Error)
			w.markup("</td></tr>")
		})
	} else {
		w.empty("No model request.")
	}
	w.markup("\n</section>\n\n")

	section(w, "h-tools", "Tool calls")
	for i := range t.Tools {
		c := &t.Tools[i]
		w.markup("<article class=\"tool\">\n<h3>")
		w.code(c.Name)
		w.markup(" at ")
		w.dur(c.At)
		w.markup(", ")
		w.dur(c.Duration)
		if c.Declined {
			w.markup(` <span class="badge fx-declined">declined</span>`)
		}
		w.markup("</h3>\n")
		if c.Reason != "" {
			w.markup("<p>Reason: ")
			w.text(c.Reason)
			w.markup("</p>")
		}
		w.markup("\n<h4>Arguments</h4>")
		w.el("pre", c.Arguments)
		w.markup("\n")
		if c.Result != "" {
			w.markup("<h4>Result</h4>")
			w.el("pre", c.Result)
		}
		w.markup("\n")
		if c.Error != "" {
			w.markup("<h4>Error</h4>")
			pre(w, "error", c.Error)
		}
		w.markup("\n</article>")
	}
	if len(t.Tools) == 0 {
		w.empty("No tool call.")
	}
	w.markup("\n</section>\n\n")

	section(w, "h-approvals", "Approvals")
	if len(t.Approvals) > 0 {
		w.markup("<ul>")
		for _, a := range t.Approvals {
			w.markup("<li>")
			w.code(a.Tool)
			w.markup(" (")
			w.text(a.ID)
			w.markup("): ")
			w.text(a.Decision)
			if a.DecidedBy != "" {
				w.markup(" by ")
				w.code(string(a.DecidedBy))
			}
			w.markup(" at ")
			w.dur(a.At)
			w.markup("</li>")
		}
		w.markup("</ul>")
	} else {
		w.empty("No approval asked.")
	}
	w.markup("\n</section>\n\n")

	section(w, "h-delivery", "Delivery")
	if len(t.Delivery) > 0 {
		w.markup("<ol>")
		for _, dl := range t.Delivery {
			w.markup("<li>")
			w.text(dl.Kind)
			w.markup(" at ")
			w.dur(dl.At)
			if dl.EventID != "" {
				w.markup(": <a")
				w.href(matrixTo(room, string(dl.EventID)))
				w.markup(` rel="noreferrer">`)
				w.code(string(dl.EventID))
				w.markup("</a>")
			}
			w.markup("</li>")
		}
		w.markup("</ol>")
	} else {
		w.empty("Nothing was sent to the room.")
	}
	w.markup("\n</section>\n<p><a href=\"/turns\">All conversations</a></p>")
}

// pre writes s preformatted with class, if there is an s.
func pre(w *htmlWriter, class, s string) {
	if s != "" {
		w.markup("<pre")
		w.attr("class", class)
		w.markup(">")
		w.text(s)
		w.markup("</pre>")
	}
}

func (d *hooksData) content(w *htmlWriter, _ *page) {
	if !d.Available {
		w.notAvailable()
		return
	}
	w.markup(`<p class="hint">Every hook in service, in run order within its event. Statistics refresh every 2 seconds; p50 and p95 are bucket bounds of the run-time histogram.</p>` + "\n")
	w.tableStart("hooks", "Event", "#", "Plugin", "Hook", "Mode", "Priority", "Timeout", "Filters", "Source", "Runs", "Errors", "Timeouts", "p50", "p95")
	liveBody(w, "hook-rows", "/hooks?part=rows", "every 2s")
	d.rows(w)
	w.markup("\n")
	w.tableEnd()
}

// rows are the hooks table's rows, also its live refresh.
func (d *hooksData) rows(w *htmlWriter) {
	for i := range d.Rows {
		h := &d.Rows[i]
		w.markup("\n<tr>")
		w.tdCode(h.Event)
		w.markup("<td>")
		w.itoa(int64(h.Position))
		w.markup("</td>")
		w.td(h.Plugin)
		w.td(h.Hook)
		w.td(h.Mode)
		w.markup("<td>")
		w.itoa(int64(h.Priority))
		w.markup("</td><td>")
		w.dur(h.Timeout)
		w.markup("</td><td>")
		if len(h.Agents) > 0 {
			w.markup("agents: ")
			for i, a := range h.Agents {
				if i > 0 {
					w.markup(", ")
				}
				w.text(string(a))
			}
		}
		if len(h.Rooms) > 0 {
			w.markup(" rooms: ")
			for i, r := range h.Rooms {
				if i > 0 {
					w.markup(", ")
				}
				w.text(string(r))
			}
		}
		if len(h.Agents) == 0 && len(h.Rooms) == 0 {
			w.markup("all")
		}
		if h.Inline {
			w.markup(` <span class="badge">inline</span>`)
		}
		w.markup(` <span class="badge">`)
		w.text(h.FailurePolicy)
		w.markup("</span></td>")
		w.td(h.Source)
		w.markup("<td>")
		w.text(fmtNumber(h.Runs))
		w.markup("</td><td>")
		countBadge(w, "bad", h.Errors)
		w.markup("</td><td>")
		countBadge(w, "warn", h.Timeouts)
		w.markup("</td><td>")
		durOrDash(w, h.Runs, h.P50)
		w.markup("</td><td>")
		durOrDash(w, h.Runs, h.P95)
		w.markup("</td></tr>")
	}
	if len(d.Rows) == 0 {
		w.markup("\n" + `<tr><td colspan="14" class="empty">No hooks registered.</td></tr>`)
	}
}

// countBadge writes n in a badge of class, or 0.
func countBadge(w *htmlWriter, class string, n uint64) {
	if n == 0 {
		w.markup("0")
		return
	}
	w.badge(class, fmtNumber(n))
}

// durOrDash writes d, or — when nothing ran.
func durOrDash(w *htmlWriter, runs uint64, d time.Duration) {
	if runs == 0 {
		w.markup("—")
		return
	}
	w.dur(d)
}

func (d *usageData) content(w *htmlWriter, _ *page) {
	if !d.Available {
		w.notAvailable()
		return
	}
	w.markup("<nav class=\"tabs\" aria-label=\"Period\">\n")
	tab(w, "/usage?days=14", "Last 14 days", d.Days == 14)
	w.markup("\n")
	tab(w, "/usage?days=30", "Last 30 days", d.Days == 30)
	w.markup("\n</nav>\n")
	w.alert(d.Error)
	w.markup("\n")
	d.PerDay.figure(w)
	w.markup("\n<div class=\"charts\">\n")
	d.PerAgent.figure(w)
	w.markup("\n")
	d.PerPerson.figure(w)
	w.markup("\n</div>\n")
	section(w, "h-budgets", "Budgets today")
	if b := d.Report.Budgets; len(b) > 0 {
		w.table("", []string{"Scope", "Name", "Daily", "Used today", "Left"}, len(b), func(i int) {
			w.markup("<tr>")
			w.td(b[i].Scope)
			w.td(b[i].Name)
			w.markup("<td>")
			w.num(b[i].Daily)
			w.markup("</td><td>")
			w.num(b[i].UsedToday)
			w.markup("</td><td>")
			if b[i].Left <= 0 {
				w.badge("bad", fmtNumber(b[i].Left))
			} else {
				w.num(b[i].Left)
			}
			w.markup("</td></tr>")
		})
	} else {
		w.empty("No budgets configured.")
	}
	w.markup("\n</section>")
}

// tab writes a link of a tab bar, marked when it is the current page.
func tab(w *htmlWriter, u safeURL, label string, current bool) {
	w.markup("<a")
	w.href(u)
	if current {
		w.markup(` aria-current="page"`)
	}
	w.markup(">")
	w.text(label)
	w.markup("</a>")
}

func (d *schedulesData) content(w *htmlWriter, p *page) {
	if !d.Available {
		w.notAvailable()
		return
	}
	w.alert(d.Error)
	w.markup("\n")
	if s := d.Confirm; s != nil {
		w.markup("<form method=\"post\" action=\"/schedules\" class=\"confirm\">\n")
		w.hidden("csrf", p.CSRF)
		w.markup("\n")
		w.hidden("id", s.ID)
		w.markup("\n<p>Cancel schedule ")
		w.code(s.ID)
		w.markup(" (")
		w.text(s.Spec)
		w.markup(") in ")
		w.code(s.RoomID)
		w.markup(", created by ")
		w.code(s.Creator)
		w.markup("? It will not run again.</p>\n")
		w.markup(`<button type="submit" class="danger">Yes, cancel it</button> <a href="/schedules">Keep it</a>` + "\n</form>")
	}
	w.markup("\n")
	if len(d.List) > 0 {
		w.markup("<div class=\"scroll\"><table>\n<thead><tr>")
		w.ths("Id", "Room", "Creator", "When", "Task", "Next run", "Status")
		w.markup(`<th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>` + "\n<tbody>")
		for i := range d.List {
			s := &d.List[i]
			w.markup("\n<tr>")
			w.tdCode(s.ID)
			w.tdCode(s.RoomID)
			w.tdCode(s.Creator)
			w.td(s.Spec)
			w.td(s.Text)
			w.markup("<td>")
			w.time(s.Next)
			w.markup("</td><td>")
			w.badge(stateClass(s.Status), s.Status)
			w.markup(`</td><td><a class="button"`)
			w.href(queryURL("/schedules?cancel=", s.ID))
			w.markup(">Cancel</a></td></tr>")
		}
		w.markup("\n")
		w.tableEnd()
	} else if d.Error == "" {
		w.markup(`<p class="empty">No schedules. People create them in their rooms (<code>!schedule</code>).</p>`)
	}
}

func (d *approvalsData) content(w *htmlWriter, p *page) {
	if !d.Available {
		w.notAvailable()
		return
	}
	w.alert(d.Error)
	w.markup("\n")
	for i := range d.List {
		a := &d.List[i]
		w.markup("<article class=\"approval\">\n<h2>")
		w.code(a.Tool)
		w.markup(" for ")
		w.text(a.Agent)
		w.markup("</h2>\n<dl class=\"facts\">\n<dt>Room</dt><dd>")
		w.code(a.RoomID)
		w.markup("</dd>\n<dt>Asked by</dt><dd>")
		w.code(a.Requester)
		w.markup("</dd>\n<dt>Deadline</dt><dd>")
		w.time(a.Deadline)
		w.markup(" (denied when it passes)</dd>\n</dl>\n<h3>Arguments</h3>\n")
		w.el("pre", a.Arguments)
		w.markup("\n<form method=\"post\" action=\"/approvals\" class=\"decide\">\n")
		w.hidden("csrf", p.CSRF)
		w.markup("\n")
		w.hidden("id", a.ID)
		w.markup("\n" + `<button type="submit" name="decision" value="approve">Approve</button>` +
			"\n" + `<button type="submit" name="decision" value="deny" class="danger">Deny</button>` +
			"\n</form>\n</article>")
	}
	if len(d.List) == 0 {
		w.markup("\n")
		if d.Error == "" {
			w.empty("No tool call is waiting for approval.")
		}
	}
}

func (d *configData) content(w *htmlWriter, p *page) {
	if !d.Available {
		w.notAvailable()
		return
	}
	w.alert(d.Error)
	w.markup("\n")
	if s := d.Saved; s != nil {
		switch {
		case s.Stale:
			w.markup(`<p class="error" role="alert">config.yaml changed on disk since this page was loaded: nothing was written. Your edit is below; <a href="/config">load the current file</a> and make it again.</p>`)
		case len(s.Errors) > 0:
			w.markup(`<div class="error" role="alert"><p>The edit is not valid: nothing was written.</p>`)
			codeList(w, "", s.Errors)
			w.markup("</div>")
		case s.Saved:
			w.markup(`<div class="flash" role="status"><p>Saved. `)
			if s.ReloadOK {
				w.markup("The reload put it in service")
				if s.Summary != "" {
					w.markup(": ")
					w.text(s.Summary)
				}
				w.markup(".")
			} else {
				w.markup("The reload failed; the previous configuration stays in service.")
			}
			w.markup("</p>")
			codeList(w, "", s.ReloadErrors)
			w.markup("</div>")
		}
	}
	w.markup("\n")
	if pv := d.Preview; pv != nil {
		w.markup("<section aria-labelledby=\"h-preview\" class=\"preview\">\n<h2 id=\"h-preview\">Preview (nothing written)</h2>\n")
		if pv.Stale {
			w.markup(`<p class="error">config.yaml changed on disk since this page was loaded: saving this edit would be refused.</p>`)
		}
		w.markup("\n")
		if len(pv.Errors) > 0 {
			codeList(w, "error", pv.Errors)
		} else {
			w.markup(`<p><span class="badge ok">valid</span></p>`)
		}
		w.markup("\n")
		if len(d.Diff) > 0 {
			w.markup(`<pre class="diff">`)
			for _, l := range d.Diff {
				w.markup("<span")
				w.attr("class", l.Class)
				w.markup(">")
				w.text(l.Text)
				w.markup("</span>\n")
			}
			w.markup("</pre>")
		} else {
			w.empty("No change.")
		}
		w.markup("\n</section>")
	}
	w.markup("\n<form method=\"post\" action=\"/config\" class=\"editor\">\n")
	w.hidden("csrf", p.CSRF)
	w.markup("\n")
	w.hidden("version", d.Version)
	w.markup("\n<label for=\"config-text\">")
	if d.File.Path != "" {
		w.code(d.File.Path)
	} else {
		w.markup("config.yaml")
	}
	w.markup(" (secrets masked)</label>\n")
	w.markup(`<textarea id="config-text" name="text" rows="30" spellcheck="false" autocomplete="off">`)
	w.text(d.Text)
	w.markup("</textarea>\n<p>\n" +
		`<button type="submit" name="action" value="preview">Preview</button>` + "\n" +
		`<button type="submit" name="action" value="save">Save and reload</button>` + "\n</p>\n</form>")
}

func (d *logsData) content(w *htmlWriter, _ *page) {
	if !d.Available {
		w.notAvailable()
		return
	}
	w.markup("<nav class=\"tabs\" aria-label=\"Level\">\n")
	for _, l := range d.Levels {
		label := l
		if l != "error" {
			label += " and up"
		}
		tab(w, queryURL("/logs?level=", l), label, l == d.Level)
		w.markup(" ")
	}
	w.markup("\n</nav>\n")
	w.tableStart("logs", "Time", "Level", "Message", "Fields")
	liveBody(w, "log-rows", d.Rows, "every 2s")
	d.rows(w)
	w.markup("\n")
	w.tableEnd()
}

// rows are the log lines' rows, also their live refresh.
func (d *logsData) rows(w *htmlWriter) {
	for _, l := range d.Lines {
		w.markup("\n<tr")
		w.attr("class", "lv-"+l.Level)
		w.markup("><td>")
		w.time(l.Time)
		w.markup(`</td><td><span class="badge lv">`)
		w.text(l.Level)
		w.markup("</span></td>")
		w.td(l.Message)
		w.tdCode(l.Fields)
		w.markup("</tr>")
	}
	if len(d.Lines) == 0 {
		w.markup("\n" + `<tr><td colspan="4" class="empty">No log lines at this level yet.</td></tr>`)
	}
}

func (d *signinData) content(w *htmlWriter, _ *page) {
	w.markup("\n<form method=\"post\" action=\"/signin\" class=\"signin\">\n")
	w.hidden("csrf", d.CSRF)
	w.markup("\n")
	w.hidden("next", d.Next)
	w.markup("\n")
	w.alert(d.Error)
	w.markup("\n<label for=\"token\">Admin token</label>\n" +
		`<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>` + "\n" +
		`<button type="submit">Sign in</button>` + "\n" +
		`<p class="hint">The admin token is <code>http.admin_token</code> in config.yaml. Sessions live in the server's memory: a restart signs everyone out.</p>` +
		"\n</form>\n")
}

func (d *errorData) content(w *htmlWriter, p *page) {
	w.markup("\n<p class=\"error\" role=\"alert\">")
	w.itoa(int64(d.Status))
	w.markup(" ")
	w.text(d.Text)
	w.markup(": ")
	w.text(d.Message)
	w.markup("</p>\n\n<p>")
	if p.CSRF != "" {
		w.markup(`<a href="/">Back to the overview</a>`)
	} else {
		w.markup(`<a href="/signin">Sign in</a>`)
	}
	w.markup("</p>")
}
