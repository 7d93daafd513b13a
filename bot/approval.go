package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/approval"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio"
)

// Human approval of tool calls (tool_approval). A call that needs approval
// (a rule, or a tool:before_call hook's RequireApproval) is stored as
// pending, offered to tool:approval_requested hooks, and, when no hook
// decides, shown on an approval card the router posts in the turn's
// thread. The person who asked or a global user answers with a reaction on
// the card or a reply in the thread; the turn waits (its deadline clock
// paused) until then, or until the approval's deadline, which denies it.
// Decisions are written to the database first, so an answer given while
// hookroom was down, or a restart during the wait, loses nothing: the
// replayed turn finds the stored approval of the same call and uses it.

// cardArgsLimit bounds the arguments shown on an approval card (runes).
const cardArgsLimit = 300

// approvalWaiters are the turns waiting for a decision, by approval id,
// and the approval cards being posted, by room.
type approvalWaiters struct {
	mu sync.Mutex
	m  map[string]chan struct{}
	// posting counts the cards of each room sent but not recorded yet;
	// posted is closed (and replaced) whenever one is recorded.
	posting map[id.RoomID]int
	posted  chan struct{}
}

// startPosting registers a card about to be posted in room; the returned
// function ends it once the card is recorded (or failed).
func (w *approvalWaiters) startPosting(room id.RoomID) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.posting == nil {
		w.posting = map[id.RoomID]int{}
	}
	w.posting[room]++
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.posting[room]--; w.posting[room] <= 0 {
			delete(w.posting, room)
		}
		if w.posted != nil {
			close(w.posted)
			w.posted = nil
		}
	}
}

// waitPosted waits until no card of room is between its send and its
// record, at most limit; it reports whether one was being posted.
func (w *approvalWaiters) waitPosted(ctx context.Context, room id.RoomID, limit time.Duration) bool {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	waited := false
	for {
		w.mu.Lock()
		if w.posting[room] == 0 {
			w.mu.Unlock()
			return waited
		}
		if w.posted == nil {
			w.posted = make(chan struct{})
		}
		ch := w.posted
		w.mu.Unlock()
		waited = true
		select {
		case <-ch:
		case <-ctx.Done():
			return waited
		case <-timer.C:
			return waited
		}
	}
}

func (w *approvalWaiters) add(approvalID string) chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[string]chan struct{}{}
	}
	ch := make(chan struct{}, 1)
	w.m[approvalID] = ch
	return ch
}

func (w *approvalWaiters) remove(approvalID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, approvalID)
}

// notify wakes the turn waiting for approvalID, if any.
func (w *approvalWaiters) notify(approvalID string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.m[approvalID]; ok {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// approvalRules are w's tool_approval rules, with room references
// resolved to room ids.
func (w *world) approvalRules() []approval.Rule {
	cfg := w.cfg
	rules := make([]approval.Rule, 0, len(cfg.ToolApproval.Rules))
	for _, r := range cfg.ToolApproval.Rules {
		rule := approval.Rule{Tools: r.Tools, Require: r.Action == config.ApprovalRequired}
		for _, a := range r.Agents {
			rule.Agents = append(rule.Agents, hooks.AgentName(a))
		}
		for _, ref := range r.Rooms {
			if rid := w.roomRefID(ref); rid != "" {
				rule.Rooms = append(rule.Rooms, rid)
			} else {
				rule.Rooms = append(rule.Rooms, id.RoomID(ref)) // matches nothing until the room exists
			}
		}
		rules = append(rules, rule)
	}
	return rules
}

// waitCaughtUp waits, at most limit, until every account of w finished its
// first sync since the start and every event of room that arrived so far
// was handled, so that an answer given in time but not read yet is read.
// It reports whether it had to wait (the caller then looks again).
func (b *Bot) waitCaughtUp(ctx context.Context, w *world, room id.RoomID, limit time.Duration) bool {
	caughtUp := func() bool {
		b.readyMu.Lock()
		defer b.readyMu.Unlock()
		for user := range w.accounts {
			if !b.ready[user] {
				return false
			}
		}
		return b.dispatch == nil || b.dispatch.idle(room)
	}
	if caughtUp() {
		return false
	}
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for !caughtUp() {
		select {
		case <-tick.C:
		case <-deadline.C:
			return true
		case <-ctx.Done():
			return true
		}
	}
	return true
}

// mayDecide reports whether user may answer approval a: the person the turn
// answered, or a global user of w.
func (w *world) mayDecide(user id.UserID, a approval.Approval) bool {
	return user == a.Requester || w.isGlobal(user)
}

// resolveApproval decides a pending approval (the first decision wins),
// fires tool:approval_resolved, wakes the turn waiting for it and edits
// its card. It returns the approval as stored and whether
// this call decided it.
func (b *Bot) resolveApproval(ctx context.Context, w *world, a approval.Approval, status approval.Status, by id.UserID, reason string) (approval.Approval, bool) {
	log := zerolog.Ctx(ctx)
	ok, err := b.approvals.Decide(context.WithoutCancel(ctx), a.ID, status, by, reason)
	if err != nil {
		log.Error().Err(err).Str("approval", a.ID).Msg("failed to record an approval decision")
	}
	if !ok {
		cur, err := b.approvals.Get(context.WithoutCancel(ctx), a.ID)
		if err != nil {
			return a, false
		}
		return cur, false
	}
	a.Status, a.DecidedBy, a.DecisionReason, a.DecidedAt = status, by, reason, time.Now()
	log.Info().Str("approval", a.ID).Str("tool", a.Tool).Str("status", string(status)).Stringer("by", by).Msg("approval decided")
	reg := w.reg
	if reg.Has(hooks.ToolApprovalResolved.Name()) {
		c := &hooks.ToolApprovalResolvedContext{
			ToolCall: hooks.ToolCall{
				Tool: a.Tool, Arguments: a.Arguments, Agent: a.Agent, RoomID: a.RoomID, ThreadID: a.ThreadID,
				RequesterID: a.Requester, SessionID: string(agents.NewScopeKey(a.RoomID, a.ThreadID)),
			},
			ApprovalID: a.ID, Reason: a.Reason, Outcome: outcomeOf(status), DecidedBy: by, DecisionReason: reason,
			Waited: a.DecidedAt.Sub(a.CreatedAt),
		}
		c.CorrelationID = string(a.SourceEventID)
		turn.Emit(context.WithoutCancel(ctx), reg, hooks.ToolApprovalResolved, c)
	}
	// The turn goes on before the card shows the outcome: it waits for the
	// decision, not for the homeserver.
	b.approvalWaits.notify(a.ID)
	if a.CardEventID != "" {
		b.editCard(ctx, w, a)
	}
	return a, true
}

func outcomeOf(s approval.Status) hooks.ApprovalOutcome {
	switch s {
	case approval.Approved:
		return hooks.ApprovalApproved
	case approval.Denied:
		return hooks.ApprovalDenied
	case approval.Expired:
		return hooks.ApprovalExpired
	}
	return hooks.ApprovalCancelled
}

// cardOptions are the send options of a's card: in the turn's thread (or
// as a reply to the message), pinging the person who asked.
func cardOptions(a approval.Approval, stage string) matrixio.SendOptions {
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(a.SourceEventID, "approval-"+a.ID+stage), Notice: true}
	if a.ThreadID != "" {
		opts.ThreadRoot = a.ThreadID
	} else {
		opts.ReplyTo = a.SourceEventID
	}
	return opts
}

// postCard posts a's approval card and records it.
func (b *Bot) postCard(ctx context.Context, w *world, a approval.Approval) (id.EventID, error) {
	opts := cardOptions(a, "")
	opts.Mentions = []id.UserID{a.Requester}
	acct := b.speakerIn(w, a.RoomID)
	// A reaction can reach hookroom before the card's id is recorded: it
	// waits for the record (answerCardReaction).
	defer b.approvalWaits.startPosting(a.RoomID)()
	card, err := acct.SendText(ctx, a.RoomID, cardText(a), opts)
	if err != nil {
		return "", fmt.Errorf("failed to post the approval card: %w", err)
	}
	if err := b.approvals.SetCard(context.WithoutCancel(ctx), a.ID, card); err != nil {
		return "", err
	}
	return card, nil
}

// editCard shows a's outcome on its card.
func (b *Bot) editCard(ctx context.Context, w *world, a approval.Approval) {
	opts := cardOptions(a, "-outcome")
	if _, err := b.speakerIn(w, a.RoomID).Edit(context.WithoutCancel(ctx), a.RoomID, a.CardEventID, outcomeText(a), opts); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("approval", a.ID).Msg("failed to show the outcome on the approval card")
	}
}

// cardText is what the approval card says while it waits.
func cardText(a approval.Approval) string {
	var s strings.Builder
	fmt.Fprintf(&s, "🔐 **Approval needed**: **%s** wants to call `%s` for %s.\n\n", a.Agent, a.Tool, a.Requester)
	fmt.Fprintf(&s, "Arguments: `%s`\n\n", summarizeArgs(a.Arguments))
	if a.Reason != "" {
		fmt.Fprintf(&s, "Why: %s\n\n", a.Reason)
	}
	left := time.Until(a.ExpiresAt).Round(time.Second)
	fmt.Fprintf(&s, "React with ✅ to approve or ❌ to deny, or reply **approve** or **deny** in this thread. "+
		"Only %s or an administrator can answer. Denied automatically at %s (in %s) if nobody answers.",
		a.Requester, a.ExpiresAt.UTC().Format("15:04:05 UTC"), left)
	return s.String()
}

// outcomeText is what the card says once decided.
func outcomeText(a approval.Approval) string {
	call := fmt.Sprintf("**%s** → `%s` `%s`", a.Agent, a.Tool, summarizeArgs(a.Arguments))
	by := ""
	if a.DecidedBy != "" {
		by = " by " + string(a.DecidedBy)
	}
	reason := ""
	if a.DecisionReason != "" {
		reason = ": " + a.DecisionReason
	}
	switch a.Status {
	case approval.Approved:
		return fmt.Sprintf("✅ Approved%s%s. %s runs.", by, reason, call)
	case approval.Denied:
		return fmt.Sprintf("❌ Denied%s%s. %s was not run.", by, reason, call)
	case approval.Expired:
		return fmt.Sprintf("⌛ Expired: nobody answered by %s, so %s was denied.", a.ExpiresAt.UTC().Format("15:04:05 UTC"), call)
	}
	return fmt.Sprintf("🚫 Cancelled%s. %s was not run.", reason, call)
}

// summarizeArgs shows a call's arguments on one line, shortened.
func summarizeArgs(raw json.RawMessage) string {
	s := approval.CanonicalArguments(raw)
	s = strings.NewReplacer("`", "'", "\n", " ").Replace(s)
	if utf8.RuneCountInString(s) > cardArgsLimit {
		r := []rune(s)
		s = string(r[:cardArgsLimit]) + "…"
	}
	return s
}

// answerCardReaction handles a reaction that reads as an answer (✅, ❌, …)
// on an approval card. It reports whether the reaction was taken as the
// decision.
func (b *Bot) answerCardReaction(ctx context.Context, w *world, ev *event.Event, target id.EventID, key string) bool {
	d := approval.ParseReaction(key)
	if d == approval.NoDecision {
		return false
	}
	a, err := b.approvals.ByCard(ctx, target)
	if errors.Is(err, approval.ErrNotFound) && b.approvalWaits.waitPosted(ctx, ev.RoomID, 10*time.Second) {
		a, err = b.approvals.ByCard(ctx, target) // the card was being recorded
	}
	if err != nil {
		if !errors.Is(err, approval.ErrNotFound) {
			zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to look up an approval card")
		}
		return false
	}
	return b.answer(ctx, w, ev.Sender, answeredAt(ev), a, d, "")
}

// answerReply handles a message that reads as an answer ("approve",
// "no, …") in a thread with a pending approval the sender may decide. It
// reports whether the message was taken as the decision (it then gets no
// turn of its own).
func (b *Bot) answerReply(ctx context.Context, w *world, ev *event.Event, msg *event.MessageEventContent) bool {
	d, reason := approval.ParseReply(msg.Body)
	if d == approval.NoDecision {
		return false
	}
	thread := threadRoot(msg)
	if thread == "" && w.threadMode(ev.RoomID) != config.ThreadModeRoom {
		return false
	}
	pending, err := b.approvals.PendingInThread(ctx, ev.RoomID, thread)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to look up pending approvals")
		return false
	}
	var replyTo id.EventID
	if msg.RelatesTo != nil {
		replyTo = msg.RelatesTo.GetNonFallbackReplyTo()
	}
	// The card replied to, else the oldest pending one the sender may
	// decide.
	slices.SortStableFunc(pending, func(x, y approval.Approval) int {
		switch {
		case replyTo != "" && x.CardEventID == replyTo:
			return -1
		case replyTo != "" && y.CardEventID == replyTo:
			return 1
		}
		return 0
	})
	for _, a := range pending {
		if w.mayDecide(ev.Sender, a) {
			return b.answer(ctx, w, ev.Sender, answeredAt(ev), a, d, reason)
		}
	}
	return false
}

// answeredAt is when a person answered with ev: the time their homeserver
// received it. An answer given while hookroom was down counts from then,
// not from when hookroom read it.
func answeredAt(ev *event.Event) time.Time {
	if ev.Timestamp <= 0 {
		return time.Now()
	}
	return time.UnixMilli(ev.Timestamp)
}

// answer applies a person's decision, given at at, to a, when they may
// make it.
func (b *Bot) answer(ctx context.Context, w *world, user id.UserID, at time.Time, a approval.Approval, d approval.Decision, reason string) bool {
	log := zerolog.Ctx(ctx)
	if a.Status != approval.Pending {
		log.Debug().Str("approval", a.ID).Msg("ignoring an answer to a decided approval")
		return false
	}
	if !w.mayDecide(user, a) {
		log.Info().Str("approval", a.ID).Stringer("user", user).Msg("ignoring an approval answer from someone who may not decide it")
		return false
	}
	if at.After(a.ExpiresAt) {
		// Too late: the deadline decided.
		b.resolveApproval(ctx, w, a, approval.Expired, "", "nobody answered before the deadline")
		return true
	}
	status := approval.Approved
	if d == approval.Deny {
		status = approval.Denied
	}
	_, ok := b.resolveApproval(ctx, w, a, status, user, reason)
	return ok
}
