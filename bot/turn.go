package bot

import (
	"cmp"
	"context"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/approval"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/prefs"
	"github.com/hookroom/hookroom/trace"
)

// The turn itself (one agent's answer to one message) lives in package
// internal/turn. This file builds one: the Deps every turn shares, made
// once in New, and the Spec of each turn, taken from the world the message
// was routed in.

// newTurnDeps are the collaborators every turn shares (Bot.deps), made
// once in New.
func (b *Bot) newTurnDeps() *turn.Deps {
	return &turn.Deps{
		DB: b.db.Database, Ledger: b.track, History: b.history, Usage: b.usage, Metrics: b.ops.metrics,
		Index: &b.turnsByEvent, Typing: &b.typing,
		SaveTrace:        func(tr *trace.Trace) { b.traceW.add(tr) },
		Download:         b.downloadMedia,
		PlaceholderDelay: b.opts.PlaceholderDelay, EditInterval: b.opts.EditInterval,
	}
}

// startTurn answers a routed message in the background; the inbox entry is
// marked handled when the turn ends (with its history, atomically).
//
// w is the world the message was routed in; the turn keeps using it (its
// agent's account, model and settings) even when a reload replaces it.
func (b *Bot) startTurn(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName, reg *hooks.Registry, replayed bool) {
	acct := w.agents[agent]
	if acct == nil { // routing only picks agents of w
		zerolog.Ctx(ctx).Error().Str("agent", string(agent)).Msg("not answering: the routed agent has no account")
		return
	}
	t := b.newTurn(ctx, w, ev, env, agent, acct, reg, replayed)
	b.turnsByEvent.Queue(ev.ID, t.Scope())
	b.turns.Run(ctx, t.Scope(), func(ctx context.Context) {
		ctx = t.Logger().WithContext(ctx)
		// After a lost database, the thread's earlier messages are read back
		// from the room (decrypted with the restored keys) into its history.
		b.readThreadBack(ctx, w, ev, env, agent)
		t.Run(ctx)
	})
}

// newTurn prepares agent's answer to ev, with acct (the agent's account
// in w), before it is queued behind its thread's earlier turns.
func (b *Bot) newTurn(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName, acct turn.Account, reg *hooks.Registry, replayed bool) *turn.Turn {
	cfg := w.cfg
	a := cfg.Agents[string(agent)]
	models := make(map[string]turn.ModelOption, len(w.models))
	for name := range w.models {
		models[name] = w.modelOption(name)
	}
	s := turn.Spec{
		Event: ev, Envelope: env, Agent: agent, Account: acct, Registry: reg, Replayed: replayed,
		Accounts: func(user id.UserID) turn.Account {
			if e, ok := w.accounts[user]; ok && e.account != nil {
				return e.account
			}
			return nil
		},
		Persona: turn.Persona{DisplayName: a.DisplayName, Role: a.Role, Instructions: a.Instructions},
		Model:   models[a.Model], Models: models,
		Tools:        b.toolsFor(w, agent),
		Streaming:    cfg.Defaults.StreamingEnabled(),
		Budgets:      w.budgets(agent),
		BudgetAlerts: cfg.Usage.Alerts(),
		Attachments: turn.AttachmentLimits{
			MaxSize: int64(cfg.Attachments.MaxSize), MaxTextSize: int64(cfg.Attachments.MaxTextSize),
			MaxPerTurn: cfg.Attachments.MaxPerTurn,
			FormatSize: func(n int64) string { return config.ByteSize(n).String() },
		},
		ApprovalTimeout: cfg.ToolApproval.ApprovalTimeout(),
		Approvals:       approvalDesk{b: b, w: w},
		Mask:            cfg.MaskSecrets,
	}
	if len(cfg.ToolApproval.Rules) > 0 {
		s.ApprovalRules = w.approvalRules()
		s.ToolSources = map[string]string{}
		for _, info := range w.tools[agent] {
			if _, ok := s.ToolSources[info.Name]; !ok {
				s.ToolSources[info.Name] = info.Source
			}
		}
	}
	// The model a person chose with !model for the thread or the room.
	if st, ok, err := b.prefs.Effective(ctx, env.RoomID, env.ResolvedThreadID, prefs.Model); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to read the conversation's !model choice; using the agent's model")
	} else if ok {
		s.Requested, s.Source = st.Value, hooks.ModelFromThread
		if st.Level() == prefs.LevelRoom {
			s.Source = hooks.ModelFromRoom
		}
	}
	if ts, ok := b.configuredTeam(w, agent); ok {
		ts.Observer = turn.SubagentObserver(reg)
		s.Team = ts
	} else if ts, ok := b.adHocTeam(w, env); ok {
		ts.Observer = turn.SubagentObserver(reg)
		s.Team = ts
	}
	s.Trace = b.newTraceRecorder(ctx, w, ev, env, agent, replayed)
	return turn.New(ctx, b.deps, s)
}

// modelOption is model name of w as a turn runs on it.
func (w *world) modelOption(name string) turn.ModelOption {
	spec := w.specs[name]
	return turn.ModelOption{
		Name: name, Model: w.models[name], ProviderModel: cmp.Or(spec.Model, name),
		ContextWindow: spec.ContextWindow, Summarize: spec.Provider != agents.ProviderEcho, Vision: spec.Vision,
	}
}

// approvalDesk is the approval store and the room side of approvals
// (cards, answers) for turns of world w.
type approvalDesk struct {
	b *Bot
	w *world
}

var _ turn.Approvals = approvalDesk{}

func (d approvalDesk) Create(ctx context.Context, a approval.Approval) (approval.Approval, error) {
	return d.b.approvals.Create(ctx, a)
}

func (d approvalDesk) ForTurn(ctx context.Context, source id.EventID) ([]approval.Approval, error) {
	return d.b.approvals.ForTurn(ctx, source)
}

func (d approvalDesk) Get(ctx context.Context, approvalID string) (approval.Approval, error) {
	return d.b.approvals.Get(ctx, approvalID)
}

func (d approvalDesk) Resolve(ctx context.Context, a approval.Approval, status approval.Status, by id.UserID, reason string) (approval.Approval, bool) {
	return d.b.resolveApproval(ctx, d.w, a, status, by, reason)
}

func (d approvalDesk) PostCard(ctx context.Context, a approval.Approval) (id.EventID, error) {
	return d.b.postCard(ctx, d.w, a)
}

func (d approvalDesk) Watch(approvalID string) (<-chan struct{}, func()) {
	ch := d.b.approvalWaits.add(approvalID)
	return ch, func() { d.b.approvalWaits.remove(approvalID) }
}

func (d approvalDesk) CaughtUp(ctx context.Context, room id.RoomID, limit time.Duration) bool {
	return d.b.waitCaughtUp(ctx, d.w, room, limit)
}
