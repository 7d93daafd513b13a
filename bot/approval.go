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
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/trace"
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

// needsApproval is the turn's agents.RunRequest.NeedsApproval.
func (t *turn) needsApproval(call hooks.ToolCall) (bool, string) {
	w := t.w // the world the turn runs in
	if len(w.cfg.ToolApproval.Rules) == 0 {
		return false, ""
	}
	tool := approval.Tool{Name: call.Tool}
	for _, info := range w.tools[t.agent] {
		if info.Name == call.Tool {
			tool.Source = info.Source
			break
		}
	}
	if approval.Match(w.approvalRules(), tool, t.agent, t.env.RoomID) {
		return true, "this tool needs a person's approval (tool_approval)"
	}
	return false, ""
}

// approve is the turn's agents.RunRequest.Approve: it finds the stored
// approval of this call (a replayed turn) or creates one, lets
// tool:approval_requested hooks decide, posts the card and waits.
func (t *turn) approve(ctx context.Context, req agents.ApprovalRequest) (bool, string, error) {
	b := t.b
	a, found, err := t.storedApproval(ctx, req)
	if err != nil {
		t.log.Error().Err(err).Str("tool", req.Call.Tool).Msg("failed to look up stored approvals; denying the call")
		return false, "the approval could not be recorded, so the call was denied", nil
	}
	if !found {
		timeout := t.w.cfg.ToolApproval.ApprovalTimeout()
		a, err = b.approvals.Create(ctx, approval.Approval{
			SourceEventID: t.ev.ID, RoomID: t.env.RoomID, ThreadID: t.env.ResolvedThreadID, Agent: t.agent,
			Requester: t.env.RequesterID, Tool: req.Call.Tool, Arguments: req.Call.Arguments, CallID: req.CallID,
			Reason: req.Reason, ExpiresAt: time.Now().Add(timeout),
		})
		if err != nil {
			t.log.Error().Err(err).Str("tool", req.Call.Tool).Msg("failed to store the approval; denying the call")
			return false, "the approval could not be recorded, so the call was denied", nil
		}
		t.usedApprovals = append(t.usedApprovals, a.ID)
		t.log.Info().Str("tool", a.Tool).Str("approval", a.ID).Dur("timeout", timeout).Msg("tool call waits for approval")
		if decided, ok := t.approvalHooks(ctx, a, req.Call); ok {
			a = decided
		}
	} else {
		t.usedApprovals = append(t.usedApprovals, a.ID)
		t.log.Info().Str("tool", a.Tool).Str("approval", a.ID).Str("status", string(a.Status)).Msg("found the stored approval of a replayed tool call")
	}
	if a.Status == approval.Pending {
		if a, err = t.wait(ctx, a); err != nil {
			return false, "", err
		}
	}
	t.trace.Approval(trace.Approval{ID: a.ID, Tool: a.Tool, Decision: string(a.Status), DecidedBy: a.DecidedBy})
	return verdict(a)
}

// storedApproval returns the approval a previous run of this turn stored
// for the same call (same tool and arguments; the same call id preferred)
// that this run has not used yet.
func (t *turn) storedApproval(ctx context.Context, req agents.ApprovalRequest) (approval.Approval, bool, error) {
	if !t.replayed {
		return approval.Approval{}, false, nil
	}
	list, err := t.b.approvals.ForTurn(ctx, t.ev.ID)
	if err != nil {
		return approval.Approval{}, false, err
	}
	// Only the same tool with the same arguments: an approval never
	// carries over to another call. The same call id first.
	args := canonicalJSON(req.Call.Arguments)
	var match *approval.Approval
	for i, a := range list {
		if a.Agent != t.agent || a.Tool != req.Call.Tool || a.Status == approval.Cancelled ||
			slices.Contains(t.usedApprovals, a.ID) || canonicalJSON(a.Arguments) != args {
			continue
		}
		if match == nil || (req.CallID != "" && a.CallID == req.CallID && match.CallID != req.CallID) {
			match = &list[i]
		}
	}
	if match != nil {
		return *match, true, nil
	}
	return approval.Approval{}, false, nil
}

func canonicalJSON(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// approvalHooks emits tool:approval_requested; it returns the approval as
// decided when a hook decided.
func (t *turn) approvalHooks(ctx context.Context, a approval.Approval, call hooks.ToolCall) (approval.Approval, bool) {
	if !t.reg.Has(hooks.ToolApprovalRequested.Name()) {
		return a, false
	}
	c := &hooks.ToolApprovalRequestedContext{ToolCall: call, ApprovalID: a.ID, Reason: a.Reason, ExpiresAt: a.ExpiresAt}
	emit(ctx, t.reg, hooks.ToolApprovalRequested, c)
	status := approval.Approved
	switch c.Decision {
	case hooks.ApprovalApprove:
	case hooks.ApprovalDeny:
		status = approval.Denied
	default:
		return a, false
	}
	t.log.Info().Str("tool", a.Tool).Str("decision", string(c.Decision)).Msg("a tool:approval_requested hook decided")
	decided, _ := t.b.resolveApproval(ctx, t.w, a, status, "", c.DecisionReason)
	return decided, true
}

// wait posts the approval card (unless a previous run did) and waits for
// the decision or the deadline, with the turn's deadline clock paused. It
// fails only when the turn ends meanwhile: stopped (🛑, a redaction: the
// approval is cancelled) or shut down (the approval stays pending for the
// replay).
func (t *turn) wait(ctx context.Context, a approval.Approval) (approval.Approval, error) {
	b := t.b
	ch := b.approvalWaits.add(a.ID)
	defer b.approvalWaits.remove(a.ID)
	if t.clock != nil {
		defer t.clock.pause()()
	}
	if a.CardEventID == "" {
		card, err := b.postCard(ctx, t.w, a)
		if err != nil && ctx.Err() != nil {
			// The turn ended while the card was on its way: a stop cancels
			// the approval; a shutdown leaves it pending for the replay,
			// as below.
			if t.parent.Err() == nil {
				b.resolveApproval(context.WithoutCancel(ctx), t.w, a, approval.Cancelled, "", "the turn ended")
			}
			return a, context.Cause(ctx)
		}
		if err != nil {
			t.log.Error().Err(err).Msg("failed to post the approval card; denying the call")
			decided, _ := b.resolveApproval(context.WithoutCancel(ctx), t.w, a, approval.Denied, "", "the approval card could not be posted")
			return decided, nil
		}
		a.CardEventID = card
	}
	// 🛑 on the card stops the turn, as on its reply.
	b.turnsByEvent.alias(a.CardEventID, t.ev.ID)
	caughtUp := false // waited for hookroom to catch up with the room once
	for {
		cur, err := b.approvals.Get(ctx, a.ID)
		if err != nil {
			if ctx.Err() == nil {
				t.log.Error().Err(err).Msg("failed to read the approval; denying the call")
				cur, _ = b.resolveApproval(context.WithoutCancel(ctx), t.w, a, approval.Denied, "", "the approval could not be read")
				return cur, nil
			}
			cur = a
		}
		if cur.Status != approval.Pending {
			return cur, nil
		}
		timer := time.NewTimer(time.Until(cur.ExpiresAt))
		select {
		case <-ch:
			timer.Stop()
		case <-timer.C:
			// An answer given before the deadline may still be on its way
			// (hookroom was down when it was given, or it is queued behind
			// other events of the room): it counts, by its own time.
			if !caughtUp && ctx.Err() == nil {
				caughtUp = true
				if b.waitCaughtUp(ctx, t.w, cur.RoomID, catchUpLimit) {
					continue
				}
			}
			t.log.Info().Str("tool", cur.Tool).Msg("nobody answered the approval in time; denied")
			b.resolveApproval(ctx, t.w, cur, approval.Expired, "", "nobody answered before the deadline")
		case <-ctx.Done():
			timer.Stop()
			if t.parent.Err() == nil {
				_, cause := stopCause(ctx)
				why := "the turn ended"
				if cause != nil {
					why = "the turn was stopped (" + cause.Error() + ")"
				}
				b.resolveApproval(context.WithoutCancel(ctx), t.w, cur, approval.Cancelled, "", why)
			}
			return cur, context.Cause(ctx)
		}
	}
}

// catchUpLimit bounds how long an approval past its deadline waits for
// hookroom to catch up with its room before it expires.
const catchUpLimit = 30 * time.Second

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

// verdict is what the tool loop gets for a decided approval.
func verdict(a approval.Approval) (bool, string, error) {
	switch a.Status {
	case approval.Approved:
		return true, "", nil
	case approval.Denied:
		who := "it was denied"
		if a.DecidedBy != "" {
			who = string(a.DecidedBy) + " denied it"
		}
		if a.DecisionReason != "" {
			return false, who + ": " + a.DecisionReason, nil
		}
		return false, who, nil
	case approval.Expired:
		return false, "nobody approved it before the deadline (" + a.ExpiresAt.UTC().Format("15:04:05 UTC") + "), so it was denied", nil
	}
	return false, "the approval was cancelled", nil
}

// mayDecide reports whether user may answer approval a: the person the turn
// answered, or a global user of w.
func (w *world) mayDecide(user id.UserID, a approval.Approval) bool {
	return user == a.Requester || slices.Contains(w.cfg.Authorization.GlobalUsers, user)
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
		emit(context.WithoutCancel(ctx), reg, hooks.ToolApprovalResolved, c)
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
	s := canonicalJSON(raw)
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
	if thread == "" && w.cfg.Defaults.ThreadMode != config.ThreadModeRoom {
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

// cancelLeftoverApprovals cancels, visibly, the pending approvals a
// replayed turn stored in an earlier run but no longer asked for.
func (t *turn) cancelLeftoverApprovals(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	list, err := t.b.approvals.ForTurn(ctx, t.ev.ID)
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to look up the turn's approvals")
		return
	}
	for _, a := range list {
		if a.Status == approval.Pending && a.Agent == t.agent && !slices.Contains(t.usedApprovals, a.ID) {
			t.b.resolveApproval(ctx, t.w, a, approval.Cancelled, "", "the answer no longer needed this call")
		}
	}
}

// turnClock is a turn's deadline that stops while the turn waits for a
// person (approvals): it calls expire once the turn has been running,
// pauses aside, for its duration.
type turnClock struct {
	mu      sync.Mutex
	timer   *time.Timer
	left    time.Duration
	started time.Time
	paused  int
	stopped bool
	expire  func()
}

func startTurnClock(d time.Duration, expire func()) *turnClock {
	c := &turnClock{left: d, started: time.Now(), expire: expire}
	c.timer = time.AfterFunc(d, expire)
	return c
}

// pause stops the clock until the returned function is called (pauses
// nest).
func (c *turnClock) pause() (resume func()) {
	c.mu.Lock()
	if c.paused == 0 && !c.stopped && c.timer.Stop() {
		c.left -= time.Since(c.started)
	}
	c.paused++
	c.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.paused--
			if c.paused == 0 && !c.stopped {
				c.started = time.Now()
				c.timer = time.AfterFunc(max(c.left, 0), c.expire)
			}
		})
	}
}

// stop ends the clock for good.
func (c *turnClock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.timer.Stop()
}
