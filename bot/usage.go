package bot

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	tokens "github.com/hookroom/hookroom/usage" // "usage" is the CLI text in main.go
)

// providerModel is the model id the agent's provider is asked for ("gpt-4o-mini"),
// or the name of its models entry when the provider takes none (echo).
func (w *world) providerModel(agent hooks.AgentName) string {
	name := w.cfg.Agents[string(agent)].Model
	return cmp.Or(w.specs[name].Model, name)
}

// budgets are the daily token budgets that apply to a turn of agent.
func (w *world) budgets(agent hooks.AgentName) tokens.Budgets {
	cfg := w.cfg
	return tokens.Budgets{PerUser: cfg.Usage.DailyTokensPerUser, PerAgent: cfg.Agents[string(agent)].DailyTokens(cfg.Usage)}
}

// displayName is how an agent is named to people.
func (w *world) displayName(agent hooks.AgentName) string {
	return cmp.Or(w.cfg.Agents[string(agent)].DisplayName, string(agent))
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
		fmt.Fprintf(&s, "You today: %s of your daily budget of %s tokens.", tokens.FormatCount(mine.TotalTokens), tokens.FormatCount(int64(limit)))
	} else {
		fmt.Fprintf(&s, "You today: %s tokens, everywhere (no daily budget per person).", tokens.FormatCount(mine.TotalTokens))
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
		budgets = append(budgets, fmt.Sprintf("%s %s of %s", w.displayName(n), tokens.FormatCount(used.TotalTokens), tokens.FormatCount(int64(limit))))
	}
	if len(budgets) > 0 {
		s.WriteString("\nAgent budgets today, everywhere: " + strings.Join(budgets, "; ") + ".")
	}
	if cfg.Usage.DailyTokensPerUser > 0 || len(budgets) > 0 {
		s.WriteString("\nBudgets reset at 00:00 UTC (" + tokens.FormatUntil(tokens.NextDay(now).Sub(now)) + ").")
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
		cached = ", " + tokens.FormatCount(t.CachedTokens) + " of them cached"
	}
	return fmt.Sprintf("%s tokens (%s in%s, %s out) in %d %s",
		tokens.FormatCount(t.TotalTokens), tokens.FormatCount(t.InputTokens), cached, tokens.FormatCount(t.OutputTokens), t.Turns, turns)
}

func (b *Bot) usageFailed(ctx context.Context, err error) string {
	zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to read token usage")
	return "⚠️ Sorry, I could not read the token usage right now."
}
