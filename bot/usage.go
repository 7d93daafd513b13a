package bot

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	tokens "github.com/hookroom/hookroom/usage" // "usage" is the CLI text in main.go
)

// spent takes note of what the turn's model calls used (res is never nil,
// also after a failed run), to be recorded when the turn ends.
func (t *turn) spent(res *agents.RunResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.used, t.modelCalls = res.Usage, res.ModelCalls
}

// tokenUsage is what the turn's model calls used, for its hooks.
func (t *turn) tokenUsage() hooks.TokenUsage {
	t.mu.Lock()
	u, calls := t.used, t.modelCalls
	t.mu.Unlock()
	if calls == 0 && u.IsZero() {
		return hooks.TokenUsage{}
	}
	total := u.TotalTokens
	if total == 0 {
		total = u.PromptTokens + u.CompletionTokens
	}
	return hooks.TokenUsage{
		Model: t.w.providerModel(t.agent), InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CachedTokens: u.CachedTokens, TotalTokens: total, ModelCalls: calls,
	}
}

// providerModel is the model id the agent's provider is asked for ("gpt-4o-mini"),
// or the name of its models entry when the provider takes none (echo).
func (w *world) providerModel(agent hooks.AgentName) string {
	name := w.cfg.Agents[string(agent)].Model
	return cmpOr(w.specs[name].Model, name)
}

// handled marks the turn's message handled and records what its model
// calls used, in one transaction: the one ctx carries (AppendTurn's), or a
// new one. A turn that called no model records nothing.
func (t *turn) handled(ctx context.Context) error {
	u := t.tokenUsage()
	if u.ModelCalls == 0 {
		return t.b.track.MarkHandled(ctx, t.ev.ID)
	}
	rec := tokens.Turn{
		SourceEventID: t.ev.ID, Agent: t.agent, RoomID: t.env.RoomID, ThreadID: t.env.ResolvedThreadID,
		Requester: t.env.RequesterID, Model: u.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedTokens: u.CachedTokens, TotalTokens: u.TotalTokens, ModelCalls: u.ModelCalls,
	}
	return t.b.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		if err := t.b.usage.Record(ctx, rec); err != nil {
			return err
		}
		return t.b.track.MarkHandled(ctx, t.ev.ID)
	})
}

// budgets are the daily token budgets that apply to a turn of agent.
func (w *world) budgets(agent hooks.AgentName) tokens.Budgets {
	cfg := w.cfg
	return tokens.Budgets{PerUser: cfg.Usage.DailyTokensPerUser, PerAgent: cfg.Agents[string(agent)].DailyTokens(cfg.Usage)}
}

// overBudget ends the turn before any model call when a daily token budget
// is used up: the person is told in the thread when it resets, the message
// is marked handled and message:cancelled fires (over_budget). It reports
// whether the turn ended. When the budget cannot be checked (the database
// failing), the turn goes on.
func (t *turn) overBudget(ctx context.Context) bool {
	now := time.Now()
	ex, err := t.b.usage.Check(ctx, now, t.agent, t.env.RequesterID, t.w.budgets(t.agent))
	if err != nil {
		t.log.Error().Err(err).Msg("failed to check the daily token budgets; answering anyway")
		return false
	}
	if ex == nil {
		return false
	}
	t.log.Info().Str("budget", string(ex.Scope)).Int64("limit", ex.Limit).Int64("used", ex.Used).Msg("daily token budget used up; not calling the model")
	opts := t.sendOptions("budget")
	opts.Notice = true
	notice := budgetNotice(ex, t.w.displayName(t.agent), now)
	t.mu.Lock()
	evID := t.reply // what the last run posted (replays)
	t.mu.Unlock()
	if evID != "" {
		opts.TxnKey = t.editOptions("budget").TxnKey
		_, err = t.acct.Edit(context.WithoutCancel(ctx), t.env.RoomID, evID, notice, opts)
	} else {
		evID, err = t.sendNew(context.WithoutCancel(ctx), 0, notice, opts)
	}
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to tell the person about the used-up budget")
	} else {
		t.mu.Lock()
		t.reply = evID
		t.mu.Unlock()
	}
	t.endCancelled(hooks.CancelOverBudget, fmt.Sprintf("daily %s token budget used up: %d of %d", ex.Scope, ex.Used, ex.Limit))
	return true
}

// budgetNotice is what a person whose turn a used-up budget stopped reads.
func budgetNotice(ex *tokens.Exceeded, agent string, now time.Time) string {
	resets := "It resets at 00:00 UTC (" + untilText(ex.Resets.Sub(now)) + ")."
	if ex.Scope == tokens.ScopeAgent {
		return fmt.Sprintf("⏳ %s has used up its daily budget of %s tokens, so it cannot answer today. %s",
			agent, groupDigits(ex.Limit), resets)
	}
	return fmt.Sprintf("⏳ You have used up your daily budget of %s tokens (%s used today), so the agents cannot answer you until it resets. %s",
		groupDigits(ex.Limit), groupDigits(ex.Used), resets)
}

// untilText says how long d is from now, roughly: "in 4 h 05 min".
func untilText(d time.Duration) string {
	d = d.Round(time.Minute)
	switch {
	case d < time.Minute:
		return "in less than a minute"
	case d < time.Hour:
		return fmt.Sprintf("in %d min", int(d.Minutes()))
	default:
		return fmt.Sprintf("in %d h %02d min", int(d.Hours()), int(d.Minutes())%60)
	}
}

// groupDigits writes n with thousands separators: 1234567 → "1,234,567".
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// displayName is how an agent is named to people.
func (w *world) displayName(agent hooks.AgentName) string {
	return cmpOr(w.cfg.Agents[string(agent)].DisplayName, string(agent))
}

const usageHelp = "`!usage` shows the tokens the agents used in this room; `!usage all` in every room (administrators)."

// usageCommand answers !usage (this room) and !usage all (every room;
// global users only): per agent, the tokens of today and of this month
// (UTC), then the asker's own usage today and the budgets that apply.
func (b *Bot) usageCommand(ctx context.Context, w *world, room id.RoomID, asker id.UserID, args []string, admin bool) string {
	all := false
	switch {
	case len(args) == 0:
	case len(args) == 1 && strings.EqualFold(args[0], "all"):
		if !admin {
			return "Only hookroom's administrators (authorization.global_users) may see the usage of every room. " + usageHelp
		}
		all = true
	default:
		return usageHelp
	}
	now := time.Now().UTC()
	today, month := tokens.DayStart(now), tokens.MonthStart(now)
	inRoom := room
	if all {
		inRoom = ""
	}
	byDay, err := b.usage.ByAgent(ctx, tokens.Filter{RoomID: inRoom, Since: today})
	if err != nil {
		return b.usageFailed(ctx, err)
	}
	byMonth, err := b.usage.ByAgent(ctx, tokens.Filter{RoomID: inRoom, Since: month})
	if err != nil {
		return b.usageFailed(ctx, err)
	}
	// The room's agents, and any other agent that answered here this month.
	var names []hooks.AgentName
	if all {
		for _, n := range w.cfg.AgentNames() {
			names = append(names, hooks.AgentName(n))
		}
	} else {
		names = b.agentsOf(w, room)
	}
	for _, a := range byMonth {
		if !slices.Contains(names, a.Agent) {
			names = append(names, a.Agent)
		}
	}
	slices.Sort(names)
	find := func(list []tokens.AgentTotals, n hooks.AgentName) tokens.Totals {
		for _, a := range list {
			if a.Agent == n {
				return a.Totals
			}
		}
		return tokens.Totals{}
	}

	var s strings.Builder
	where := "in this room"
	if all {
		where = "in every room"
	}
	fmt.Fprintf(&s, "**Token usage %s** (days and months in UTC; today is %s)\n\n", where, now.Format("2006-01-02"))
	if len(names) == 0 {
		s.WriteString("No agents here.\n")
	}
	for _, n := range names {
		d, m := find(byDay, n), find(byMonth, n)
		fmt.Fprintf(&s, "- **%s**: today %s · %s %s\n", w.displayName(n), totalsText(d), now.Format("January"), totalsText(m))
	}

	cfg := w.cfg
	mine, err := b.usage.Sum(ctx, tokens.Filter{Requester: asker, Since: today})
	if err != nil {
		return b.usageFailed(ctx, err)
	}
	s.WriteString("\n")
	if limit := cfg.Usage.DailyTokensPerUser; limit > 0 {
		fmt.Fprintf(&s, "You today: %s of your daily budget of %s tokens.", groupDigits(mine.TotalTokens), groupDigits(int64(limit)))
	} else {
		fmt.Fprintf(&s, "You today: %s tokens, everywhere (no daily budget per person).", groupDigits(mine.TotalTokens))
	}
	var budgets []string
	for _, n := range names {
		a, ok := cfg.Agents[string(n)]
		if !ok {
			continue
		}
		limit := a.DailyTokens(cfg.Usage)
		if limit <= 0 {
			continue
		}
		used, err := b.usage.Sum(ctx, tokens.Filter{Agent: n, Since: today})
		if err != nil {
			return b.usageFailed(ctx, err)
		}
		budgets = append(budgets, fmt.Sprintf("%s %s of %s", w.displayName(n), groupDigits(used.TotalTokens), groupDigits(int64(limit))))
	}
	if len(budgets) > 0 {
		s.WriteString("\nAgent budgets today, everywhere: " + strings.Join(budgets, "; ") + ".")
	}
	if cfg.Usage.DailyTokensPerUser > 0 || len(budgets) > 0 {
		s.WriteString("\nBudgets reset at 00:00 UTC (" + untilText(tokens.NextDay(now).Sub(now)) + ").")
	}
	return s.String()
}

// totalsText describes one agent's totals of a period.
func totalsText(t tokens.Totals) string {
	if t.Turns == 0 {
		return "no turns"
	}
	turns := "turns"
	if t.Turns == 1 {
		turns = "turn"
	}
	cached := ""
	if t.CachedTokens > 0 {
		cached = ", " + groupDigits(t.CachedTokens) + " of them cached"
	}
	return fmt.Sprintf("%s tokens (%s in%s, %s out) in %d %s",
		groupDigits(t.TotalTokens), groupDigits(t.InputTokens), cached, groupDigits(t.OutputTokens), t.Turns, turns)
}

func (b *Bot) usageFailed(ctx context.Context, err error) string {
	zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to read token usage")
	return "⚠️ Sorry, I could not read the token usage right now."
}
