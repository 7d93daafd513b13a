package bot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/approval"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/buildinfo"
	tokens "github.com/hookroom/hookroom/usage"
)

// This file answers the operator console (package console) from the
// running bot: one small adapter per page.

// consoleHandler returns the console served at / on the HTTP listener; it
// answers 404 while no admin token is set.
func (b *Bot) consoleHandler() http.Handler {
	return console.New(console.Options{
		Token:      func() string { return b.w().cfg.HTTP.AdminToken.Reveal() },
		SessionTTL: b.w().cfg.HTTP.SessionTTL.Std(),
		PublicURL:  b.w().cfg.HTTP.PublicURL,
		Logs:       b.opts.Logs,
		Status:     consoleStatus{b},
		Turns:      b.traces,
		Hooks:      consoleHooks{b},
		Usage:      consoleUsage{b},
		Schedules:  consoleSchedules{b},
		Approvals:  consoleApprovals{b},
		Config:     consoleConfig{b},
	})
}

// reloadLog keeps the last reloads for the console's overview.
type reloadLog struct {
	mu   sync.Mutex
	last []console.Reload // newest first
}

const reloadsKept = 10

func (l *reloadLog) add(r console.Reload) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.last = append([]console.Reload{r}, l.last...)
	if len(l.last) > reloadsKept {
		l.last = l.last[:reloadsKept]
	}
}

func (l *reloadLog) list() []console.Reload {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.last)
}

// consoleStatus answers the overview.
type consoleStatus struct{ b *Bot }

func (s consoleStatus) Overview(ctx context.Context) console.Overview {
	b := s.b
	a := adminBackend{b}
	o := console.Overview{Version: buildinfo.Read().String(), Reloads: b.ops.reloads.list()}
	o.Reasons = a.Ready(ctx)
	o.Ready = len(o.Reasons) == 0
	w := b.w()
	agentsIn := map[id.RoomID][]string{}
	for _, ag := range a.Agents() {
		acc := console.Account{Name: ag.Name, Router: ag.Router, UserID: ag.UserID, State: ag.State, Model: ag.Model, Rooms: ag.Rooms}
		if e, ok := w.accounts[id.UserID(ag.UserID)]; ok && e.account != nil {
			acc.DeviceID = string(e.account.DeviceID())
		}
		acc.Sync = "starting"
		if ag.State == "ready" {
			acc.Sync = "caught up"
		}
		o.Accounts = append(o.Accounts, acc)
		for _, r := range ag.Rooms {
			agentsIn[id.RoomID(r)] = append(agentsIn[id.RoomID(r)], ag.Name)
		}
	}
	configured := map[id.RoomID]bool{}
	for _, key := range w.cfg.RoomKeys() {
		rid, ok := w.rooms[key]
		if !ok {
			continue
		}
		configured[rid] = true
		rc := w.cfg.Rooms[key]
		o.Rooms = append(o.Rooms, console.Room{ID: string(rid), Alias: string(rc.FullAlias(w.cfg.Matrix.ServerName)),
			Name: rc.Name, Encrypted: b.knownEncrypted(ctx, rid), Agents: agentsIn[rid]})
	}
	for rid, names := range agentsIn {
		if !configured[rid] {
			o.Rooms = append(o.Rooms, console.Room{ID: string(rid), Agents: names, Invited: true,
				Encrypted: b.knownEncrypted(ctx, rid)})
		}
	}
	slices.SortFunc(o.Rooms, func(x, y console.Room) int {
		return cmp.Or(cmp.Compare(boolInt(x.Invited), boolInt(y.Invited)), cmp.Compare(x.ID, y.ID))
	})
	for _, p := range a.Plugins() {
		o.Plugins = append(o.Plugins, console.Plugin{Name: p.Name, Kind: p.Kind, State: p.State, Restarts: p.Restarts, PID: p.PID})
	}
	if set := w.mcp; set != nil {
		for _, name := range set.Names() {
			srv := set.Server(name)
			if srv == nil {
				continue
			}
			state := "running"
			switch {
			case srv.Disabled():
				state = "disabled"
			case !srv.Healthy():
				state = "restarting"
			}
			o.MCPServers = append(o.MCPServers, console.MCPServer{Name: name, State: state,
				Restarts: max(srv.Starts()-1, 0), Tools: len(srv.Tools())})
		}
	}
	return o
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

// knownEncrypted reports whether room is known to be encrypted (false
// when hookroom cannot tell), for the console's room list.
func (b *Bot) knownEncrypted(ctx context.Context, room id.RoomID) bool {
	enc, err := b.roomEncrypted(ctx, room)
	return err == nil && enc
}

// consoleHooks answers the hooks page from the registry in service.
type consoleHooks struct{ b *Bot }

func (h consoleHooks) Hooks() []hooks.HookInfo {
	if reg := h.b.w().reg; reg != nil {
		return reg.Hooks()
	}
	return nil
}

func (h consoleHooks) Stats() []hooks.HookStats {
	if reg := h.b.w().reg; reg != nil {
		return reg.Stats()
	}
	return nil
}

// consoleUsage answers the usage page from the usage store's day totals
// and the budgets of config.yaml.
type consoleUsage struct{ b *Bot }

func (u consoleUsage) Usage(ctx context.Context, days int) (console.UsageReport, error) {
	now := time.Now().UTC()
	first := tokens.DayStart(now).AddDate(0, 0, -(days - 1))
	totals, err := u.b.usage.Days(ctx, first)
	if err != nil {
		return console.UsageReport{}, err
	}
	var rep console.UsageReport
	perDay := map[time.Time]int{}
	byAgent, byPerson := map[string]int{}, map[string]int{}
	today := map[tokens.Scope]map[string]int{tokens.ScopeAgent: {}, tokens.ScopePerson: {}}
	for _, d := range totals {
		switch d.Kind {
		case tokens.ScopeAgent:
			perDay[d.Day] += int(d.Total) // each turn is counted once per agent
			byAgent[d.Name] += int(d.Total)
		case tokens.ScopePerson:
			byPerson[d.Name] += int(d.Total)
		}
		if d.Day.Equal(tokens.DayStart(now)) {
			today[d.Kind][d.Name] = int(d.Total)
		}
	}
	for day := first; !day.After(now); day = day.AddDate(0, 0, 1) {
		rep.Days = append(rep.Days, console.DayUsage{Day: day, Tokens: perDay[day]})
	}
	rep.ByAgent, rep.ByPerson = tallies(byAgent), tallies(byPerson)
	cfg := u.b.w().cfg
	for _, name := range cfg.AgentNames() {
		if limit := cfg.Agents[name].DailyTokens(cfg.Usage); limit > 0 {
			used := today[tokens.ScopeAgent][name]
			rep.Budgets = append(rep.Budgets, console.Budget{Scope: "agent", Name: name, Daily: limit, UsedToday: used, Left: max(limit-used, 0)})
		}
	}
	if limit := cfg.Usage.DailyTokensPerUser; limit > 0 {
		for _, t := range tallies(today[tokens.ScopePerson]) {
			rep.Budgets = append(rep.Budgets, console.Budget{Scope: "person", Name: t.Name, Daily: limit, UsedToday: t.Tokens, Left: max(limit-t.Tokens, 0)})
		}
	}
	return rep, nil
}

// tallies sorts m's totals, largest first.
func tallies(m map[string]int) []console.Tally {
	out := make([]console.Tally, 0, len(m))
	for name, n := range m {
		out = append(out, console.Tally{Name: name, Tokens: n})
	}
	slices.SortFunc(out, func(x, y console.Tally) int {
		return cmp.Or(cmp.Compare(y.Tokens, x.Tokens), cmp.Compare(x.Name, y.Name))
	})
	return out
}

// consoleSchedules answers the schedules page.
type consoleSchedules struct{ b *Bot }

func (s consoleSchedules) List(ctx context.Context) ([]console.Schedule, error) {
	tasks, err := s.b.sched.Active(ctx, "")
	if err != nil {
		return nil, err
	}
	out := make([]console.Schedule, len(tasks))
	for i, t := range tasks {
		out[i] = console.Schedule{ID: t.ID, RoomID: string(t.RoomID), Creator: string(t.CreatedBy), Spec: t.Spec.Desc,
			Text: t.Message, Next: t.NextRun, Status: string(t.State)}
	}
	return out, nil
}

func (s consoleSchedules) Cancel(ctx context.Context, taskID, by string) error {
	b := s.b
	ok, err := b.sched.Cancel(ctx, taskID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("schedule %s is not active", taskID)
	}
	b.schedRunner.Wake()
	zerolog.Ctx(ctx).Info().Str("task", taskID).Str("by", by).Msg("schedule cancelled in the console")
	return nil
}

// consoleApprovals answers the approvals page; a decision made there is
// applied as a person's answer would be (the room sees who decided).
type consoleApprovals struct{ b *Bot }

func (a consoleApprovals) Pending(ctx context.Context) ([]console.Approval, error) {
	list, err := a.b.approvals.Pending(ctx)
	if err != nil {
		return nil, err
	}
	cfg := a.b.w().cfg
	out := make([]console.Approval, len(list))
	for i, ap := range list {
		out[i] = console.Approval{ID: ap.ID, Tool: ap.Tool, Arguments: cfg.MaskSecrets(string(ap.Arguments)), Agent: string(ap.Agent),
			RoomID: string(ap.RoomID), Requester: string(ap.Requester), Deadline: ap.ExpiresAt}
	}
	return out, nil
}

func (a consoleApprovals) Decide(ctx context.Context, approvalID string, approve bool, by string) error {
	b := a.b
	ap, err := b.approvals.Get(ctx, approvalID)
	if err != nil {
		return err
	}
	if ap.Status != approval.Pending {
		return fmt.Errorf("approval %s was decided already (%s)", approvalID, ap.Status)
	}
	status := approval.Approved
	if !approve {
		status = approval.Denied
	}
	if time.Now().After(ap.ExpiresAt) {
		b.resolveApproval(ctx, b.w(), ap, approval.Expired, "", "nobody answered before the deadline")
		return fmt.Errorf("approval %s expired before the decision", approvalID)
	}
	zerolog.Ctx(ctx).Info().Str("approval", approvalID).Str("status", string(status)).Str("by", by).Msg("approval decided in the console")
	if _, ok := b.resolveApproval(ctx, b.w(), ap, status, "", "decided by the operator in the console"); !ok {
		return fmt.Errorf("approval %s was decided by someone else first", approvalID)
	}
	return nil
}

// consoleConfig answers the configuration editor: the file's text with its
// secrets masked, validated before anything is written, written
// atomically only if nobody changed it meanwhile, then reloaded.
type consoleConfig struct{ b *Bot }

func (c consoleConfig) path() string { return c.b.w().cfg.Path }

func (c consoleConfig) Load(ctx context.Context) (console.ConfigFile, error) {
	raw, err := os.ReadFile(c.path())
	if err != nil {
		return console.ConfigFile{}, fmt.Errorf("failed to read %s: %w", c.path(), err)
	}
	masked, err := config.MaskText(raw)
	if err != nil {
		return console.ConfigFile{}, fmt.Errorf("failed to mask the secrets of %s: %w", c.path(), err)
	}
	return console.ConfigFile{Path: c.path(), Text: string(masked), Version: config.Hash(raw)}, nil
}

// configEdit is an edit of config.yaml checked against the file on disk.
type configEdit struct {
	raw  []byte // the file as it is (at the edit's version)
	next []byte // the edit with its secrets put back, valid; nil when not
	// diff is between masked texts, so it shows no secret.
	diff     string
	problems []string
	stale    bool
}

// prepare reads the file, checks it is still at version and turns the
// edited (masked) text into the file's new content, validated.
func (c consoleConfig) prepare(text, version string) (configEdit, error) {
	raw, err := os.ReadFile(c.path())
	if err != nil {
		return configEdit{}, fmt.Errorf("failed to read %s: %w", c.path(), err)
	}
	e := configEdit{raw: raw}
	if config.Hash(raw) != version {
		e.stale, e.problems = true, []string{config.ErrStale.Error() + ": reload the page and make the edit again"}
		return e, nil
	}
	masked, err := config.MaskText(raw)
	if err != nil {
		return configEdit{}, fmt.Errorf("failed to mask the secrets of %s: %w", c.path(), err)
	}
	e.diff = config.DiffText(masked, []byte(text))
	next, err := config.Unmask([]byte(text), raw)
	if err == nil {
		err = config.Check(next, c.path(), c.b.opts.ConfigOptions...)
	}
	if err != nil {
		e.problems = errorLines(err, c.path())
		return e, nil
	}
	e.next = next
	return e, nil
}

// errorLines is err as one line per problem; a problem without a file
// names the configuration file.
func errorLines(err error, path string) []string {
	var out []string
	for _, e := range splitErrors(err) {
		var ce *config.Error
		if errors.As(e, &ce) && ce.File == "" {
			ce2 := *ce
			ce2.File = path
			out = append(out, ce2.Error())
			continue
		}
		out = append(out, e.Error())
	}
	return out
}

func (c consoleConfig) Preview(ctx context.Context, text, version string) (console.ConfigPreview, error) {
	e, err := c.prepare(text, version)
	if err != nil {
		return console.ConfigPreview{}, err
	}
	return console.ConfigPreview{Diff: e.diff, Errors: e.problems, Stale: e.stale}, nil
}

func (c consoleConfig) Save(ctx context.Context, text, version, who string) (console.ConfigSaved, error) {
	b := c.b
	e, err := c.prepare(text, version)
	if err != nil {
		return console.ConfigSaved{}, err
	}
	if len(e.problems) > 0 {
		return console.ConfigSaved{Errors: e.problems, Stale: e.stale}, nil
	}
	next, old := e.next, e.raw
	if err := config.WriteFile(c.path(), next, version); err != nil {
		if errors.Is(err, config.ErrStale) {
			return console.ConfigSaved{Stale: true, Errors: []string{err.Error()}}, nil
		}
		return console.ConfigSaved{}, err
	}
	log := zerolog.Ctx(ctx)
	log.Info().Str("path", c.path()).Str("by", who).Msg("configuration saved in the console")
	res := console.ConfigSaved{Saved: true}
	rep, err := b.Reload(context.WithoutCancel(ctx), false)
	if err != nil {
		// What the file check cannot see (a tool or plugin that does not
		// load) failed the reload: the previous file goes back, so that
		// config.yaml on disk stays the configuration in service.
		for _, e := range splitErrors(err) {
			res.ReloadErrors = append(res.ReloadErrors, e.Error())
		}
		if werr := config.WriteFile(c.path(), old, config.Hash(next)); werr != nil {
			log.Error().Err(werr).Msg("failed to put the previous config.yaml back after a failed reload")
		} else {
			res.Saved = false
			res.Errors = append([]string{"the edit did not load, so config.yaml was left as it was"}, res.ReloadErrors...)
		}
		return res, nil
	}
	res.ReloadOK, res.Summary = true, rep.Summary()
	return res, nil
}
