package turn

import (
	"context"
	"slices"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/approval"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/trace"
)

// Human approval of tool calls (tool_approval), the turn's side. A call
// that needs approval (a rule, or a tool:before_call hook's
// RequireApproval) is stored as pending, offered to
// tool:approval_requested hooks, and, when no hook decides, shown on an
// approval card the bot posts in the turn's thread. The turn waits (its
// deadline clock paused) until a person answers or the approval's deadline
// denies it. Decisions are written to the database first, so an answer
// given while hookroom was down, or a restart during the wait, loses
// nothing: the replayed turn finds the stored approval of the same call
// and uses it.

// Approvals is the store and the room side of approvals, as the bot
// provides them for the world a turn runs in.
type Approvals interface {
	// Create stores a new pending approval.
	Create(ctx context.Context, a approval.Approval) (approval.Approval, error)
	// ForTurn lists the approvals stored for the turn of a message.
	ForTurn(ctx context.Context, source id.EventID) ([]approval.Approval, error)
	// Get reads one approval.
	Get(ctx context.Context, approvalID string) (approval.Approval, error)
	// Resolve decides a pending approval (the first decision wins), fires
	// tool:approval_resolved, wakes its waiter and edits its card. It
	// returns the approval as stored and whether this call decided it.
	Resolve(ctx context.Context, a approval.Approval, status approval.Status, by id.UserID, reason string) (approval.Approval, bool)
	// PostCard posts a's card in its thread and records it.
	PostCard(ctx context.Context, a approval.Approval) (id.EventID, error)
	// Watch returns a channel that receives when the approval is decided,
	// and the function that stops watching.
	Watch(approvalID string) (<-chan struct{}, func())
	// CaughtUp waits, at most limit, until hookroom has read every event of
	// room that arrived so far, so that an answer given in time but not
	// read yet counts. It reports whether it had to wait.
	CaughtUp(ctx context.Context, room id.RoomID, limit time.Duration) bool
}

// needsApproval is the turn's agents.RunRequest.NeedsApproval.
func (t *turn) needsApproval(call hooks.ToolCall) (bool, string) {
	if len(t.spec.ApprovalRules) == 0 {
		return false, ""
	}
	tool := approval.Tool{Name: call.Tool, Source: t.spec.ToolSources[call.Tool]}
	if approval.Match(t.spec.ApprovalRules, tool, t.agent, t.env.RoomID) {
		return true, "this tool needs a person's approval (tool_approval)"
	}
	return false, ""
}

// approve is the turn's agents.RunRequest.Approve: it finds the stored
// approval of this call (a replayed turn) or creates one, lets
// tool:approval_requested hooks decide, posts the card and waits.
func (t *turn) approve(ctx context.Context, req agents.ApprovalRequest) (bool, string, error) {
	desk := t.spec.Approvals
	a, found, err := t.storedApproval(ctx, req)
	if err != nil {
		t.log.Error().Err(err).Str("tool", req.Call.Tool).Msg("failed to look up stored approvals; denying the call")
		return false, "the approval could not be recorded, so the call was denied", nil
	}
	if !found {
		timeout := t.spec.ApprovalTimeout
		a, err = desk.Create(ctx, approval.Approval{
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
	list, err := t.spec.Approvals.ForTurn(ctx, t.ev.ID)
	if err != nil {
		return approval.Approval{}, false, err
	}
	// Only the same tool with the same arguments: an approval never
	// carries over to another call. The same call id first.
	args := approval.CanonicalArguments(req.Call.Arguments)
	var match *approval.Approval
	for i, a := range list {
		if a.Agent != t.agent || a.Tool != req.Call.Tool || a.Status == approval.Cancelled ||
			slices.Contains(t.usedApprovals, a.ID) || approval.CanonicalArguments(a.Arguments) != args {
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

// approvalHooks emits tool:approval_requested; it returns the approval as
// decided when a hook decided.
func (t *turn) approvalHooks(ctx context.Context, a approval.Approval, call hooks.ToolCall) (approval.Approval, bool) {
	if !t.reg.Has(hooks.ToolApprovalRequested.Name()) {
		return a, false
	}
	c := &hooks.ToolApprovalRequestedContext{ToolCall: call, ApprovalID: a.ID, Reason: a.Reason, ExpiresAt: a.ExpiresAt}
	Emit(ctx, t.reg, hooks.ToolApprovalRequested, c)
	status := approval.Approved
	switch c.Decision {
	case hooks.ApprovalApprove:
	case hooks.ApprovalDeny:
		status = approval.Denied
	default:
		return a, false
	}
	t.log.Info().Str("tool", a.Tool).Str("decision", string(c.Decision)).Msg("a tool:approval_requested hook decided")
	decided, _ := t.spec.Approvals.Resolve(ctx, a, status, "", c.DecisionReason)
	return decided, true
}

// wait posts the approval card (unless a previous run did) and waits for
// the decision or the deadline, with the turn's deadline clock paused. It
// fails only when the turn ends meanwhile: stopped (🛑, a redaction: the
// approval is cancelled) or shut down (the approval stays pending for the
// replay).
func (t *turn) wait(ctx context.Context, a approval.Approval) (approval.Approval, error) {
	desk := t.spec.Approvals
	ch, unwatch := desk.Watch(a.ID)
	defer unwatch()
	if t.clock != nil {
		defer t.clock.pause()()
	}
	if a.CardEventID == "" {
		card, err := desk.PostCard(ctx, a)
		if err != nil && ctx.Err() != nil {
			// The turn ended while the card was on its way: a stop cancels
			// the approval; a shutdown leaves it pending for the replay,
			// as below.
			if t.parent.Err() == nil {
				desk.Resolve(context.WithoutCancel(ctx), a, approval.Cancelled, "", "the turn ended")
			}
			return a, context.Cause(ctx)
		}
		if err != nil {
			t.log.Error().Err(err).Msg("failed to post the approval card; denying the call")
			decided, _ := desk.Resolve(context.WithoutCancel(ctx), a, approval.Denied, "", "the approval card could not be posted")
			return decided, nil
		}
		a.CardEventID = card
	}
	// 🛑 on the card stops the turn, as on its reply.
	t.deps.Index.Alias(a.CardEventID, t.ev.ID)
	caughtUp := false // waited for hookroom to catch up with the room once
	for {
		cur, err := desk.Get(ctx, a.ID)
		if err != nil {
			if ctx.Err() == nil {
				t.log.Error().Err(err).Msg("failed to read the approval; denying the call")
				cur, _ = desk.Resolve(context.WithoutCancel(ctx), a, approval.Denied, "", "the approval could not be read")
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
				if desk.CaughtUp(ctx, cur.RoomID, catchUpLimit) {
					continue
				}
			}
			t.log.Info().Str("tool", cur.Tool).Msg("nobody answered the approval in time; denied")
			desk.Resolve(ctx, cur, approval.Expired, "", "nobody answered before the deadline")
		case <-ctx.Done():
			timer.Stop()
			if t.parent.Err() == nil {
				_, cause := StopCause(ctx)
				why := "the turn ended"
				if cause != nil {
					why = "the turn was stopped (" + cause.Error() + ")"
				}
				desk.Resolve(context.WithoutCancel(ctx), cur, approval.Cancelled, "", why)
			}
			return cur, context.Cause(ctx)
		}
	}
}

// catchUpLimit bounds how long an approval past its deadline waits for
// hookroom to catch up with its room before it expires.
const catchUpLimit = 30 * time.Second

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

// cancelLeftoverApprovals cancels, visibly, the pending approvals a
// replayed turn stored in an earlier run but no longer asked for.
func (t *turn) cancelLeftoverApprovals(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	list, err := t.spec.Approvals.ForTurn(ctx, t.ev.ID)
	if err != nil {
		t.log.Warn().Err(err).Msg("failed to look up the turn's approvals")
		return
	}
	for _, a := range list {
		if a.Status == approval.Pending && a.Agent == t.agent && !slices.Contains(t.usedApprovals, a.ID) {
			t.spec.Approvals.Resolve(ctx, a, approval.Cancelled, "", "the answer no longer needed this call")
		}
	}
}

// clock is a turn's deadline that stops while the turn waits for a
// person (approvals): it calls expire once the turn has been running,
// pauses aside, for its duration.
type clock struct {
	mu      sync.Mutex
	timer   *time.Timer
	left    time.Duration
	started time.Time
	paused  int
	stopped bool
	expire  func()
}

func startClock(d time.Duration, expire func()) *clock {
	c := &clock{left: d, started: time.Now(), expire: expire}
	c.timer = time.AfterFunc(d, expire)
	return c
}

// pause stops the clock until the returned function is called (pauses
// nest).
func (c *clock) pause() (resume func()) {
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
func (c *clock) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopped = true
	c.timer.Stop()
}
