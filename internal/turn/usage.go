package turn

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/usage"
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
		Model: t.modelOpt.ProviderModel, InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CachedTokens: u.CachedTokens, TotalTokens: total, ModelCalls: calls,
	}
}

// handled marks the turn's message handled and records what its model
// calls used, in one transaction: the one ctx carries (AppendTurn's), or a
// new one. A turn that called no model records nothing.
func (t *turn) handled(ctx context.Context) error {
	u := t.tokenUsage()
	if u.ModelCalls == 0 {
		return t.deps.Ledger.MarkHandled(ctx, t.ev.ID)
	}
	recs := []usage.Turn{{
		SourceEventID: t.ev.ID, Agent: t.agent, RoomID: t.env.RoomID, ThreadID: t.env.ResolvedThreadID,
		Requester: t.env.RequesterID, Model: u.Model, InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CachedTokens: u.CachedTokens, TotalTokens: u.TotalTokens, ModelCalls: u.ModelCalls,
	}}
	t.mu.Lock()
	if len(t.teamUsage) > 0 {
		// A team's tokens count against each member (and the leader) that
		// used them, and the person.
		recs = recs[:0]
		for _, a := range t.teamUsage {
			total := a.Usage.TotalTokens
			if total == 0 {
				total = a.Usage.PromptTokens + a.Usage.CompletionTokens
			}
			recs = append(recs, usage.Turn{
				SourceEventID: t.ev.ID, Agent: a.Agent, RoomID: t.env.RoomID, ThreadID: t.env.ResolvedThreadID,
				Requester: t.env.RequesterID, Model: a.Model, InputTokens: a.Usage.PromptTokens, OutputTokens: a.Usage.CompletionTokens,
				CachedTokens: a.Usage.CachedTokens, TotalTokens: total, ModelCalls: a.ModelCalls,
			})
		}
	}
	t.mu.Unlock()
	return t.deps.DB.DoTxn(ctx, nil, func(ctx context.Context) error {
		for _, rec := range recs {
			if err := t.deps.Usage.Record(ctx, rec); err != nil {
				return err
			}
		}
		return t.deps.Ledger.MarkHandled(ctx, t.ev.ID)
	})
}

// overBudget ends the turn before any model call when a daily token budget
// is used up: the person is told in the thread when it resets, the message
// is marked handled and message:cancelled fires (over_budget). It reports
// whether the turn ended. When the budget cannot be checked (the database
// failing), the turn goes on.
func (t *turn) overBudget(ctx context.Context) bool {
	now := time.Now()
	ex, err := t.deps.Usage.Check(ctx, now, t.agent, t.env.RequesterID, t.spec.Budgets)
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
	notice := budgetNotice(ex, cmp.Or(t.spec.Persona.DisplayName, string(t.agent)), now)
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
func budgetNotice(ex *usage.Exceeded, agent string, now time.Time) string {
	resets := "It resets at 00:00 UTC (" + usage.FormatUntil(ex.Resets.Sub(now)) + ")."
	if ex.Scope == usage.ScopeAgent {
		return fmt.Sprintf("⏳ %s has used up its daily budget of %s tokens, so it cannot answer today. %s",
			agent, usage.FormatCount(ex.Limit), resets)
	}
	return fmt.Sprintf("⏳ You have used up your daily budget of %s tokens (%s used today), so the agents cannot answer you until it resets. %s",
		usage.FormatCount(ex.Limit), usage.FormatCount(ex.Used), resets)
}

// alertBudgets fires usage:budget_reached for each share of a daily
// budget (Spec.BudgetAlerts) that this turn's tokens went past. finish
// calls it once the turn's usage is recorded.
func (t *turn) alertBudgets(ctx context.Context) {
	if !t.reg.Has(hooks.UsageBudgetReached.Name()) {
		return
	}
	u := t.tokenUsage()
	if u.TotalTokens == 0 {
		return
	}
	crossed, err := t.deps.Usage.Crossed(ctx, time.Now(), t.agent, t.env.RequesterID, t.spec.Budgets, int64(u.TotalTokens), t.spec.BudgetAlerts)
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to check the daily token budgets for usage:budget_reached")
		return
	}
	for _, c := range crossed {
		scope := hooks.BudgetPerson
		if c.Scope == usage.ScopeAgent {
			scope = hooks.BudgetAgent
		}
		t.log.Info().Str("budget", string(c.Scope)).Float64("share", c.Share).Int64("used", c.Used).Int64("limit", c.Limit).Msg("daily token budget share reached")
		Emit(ctx, t.reg, hooks.UsageBudgetReached, &hooks.BudgetReachedContext{
			Where: hooks.WhereFrom(ctx), Scope: scope, Subject: c.Subject, Limit: c.Limit, Used: c.Used,
			Threshold: c.Share, Day: c.Day.Format("2006-01-02"),
		})
	}
}
