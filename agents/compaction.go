package agents

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
)

// DefaultHistoryFraction is the share of a model's context window that
// stored history may take before it is compacted; the rest is left for the
// system prompt, the new turn, tool results and the reply.
const DefaultHistoryFraction = 0.5

// HistoryBudget returns the history budget in tokens for a model with
// contextWindow tokens: fraction of it (DefaultHistoryFraction when
// fraction is not in (0, 1]).
func HistoryBudget(contextWindow int, fraction float64) int {
	if fraction <= 0 || fraction > 1 {
		fraction = DefaultHistoryFraction
	}
	return int(float64(contextWindow) * fraction)
}

// SummaryHeader starts the content of the system message that replaces
// compacted history. Callers that fold a leading summary into their system
// prompt can recognise it by this prefix.
const SummaryHeader = "Summary of the earlier conversation (older messages were compacted):\n\n"

// summaryInstructions is the system prompt of the summary call.
const summaryInstructions = `You keep the running summary of a chat conversation, so that it can go on without its older messages.
Summarize the transcript you are given. Keep what later messages may need: who said what that matters, facts, names, numbers, decisions, preferences, promises, open questions, and results of tool calls that still matter. Leave out greetings and small talk.
If the transcript begins with an earlier summary, fold it into yours.
Answer with the summary only: short paragraphs or bullet points, no preamble.`

// CompactRequest asks History.Compact to bring a scope's history within a
// token budget.
type CompactRequest struct {
	Scope ScopeKey
	// Budget is the history budget in tokens (see HistoryBudget). History
	// whose estimate (EstimateTokens) is above it is compacted.
	Budget int
	// Keep is how many tokens the most recent turns kept verbatim may take
	// (default, and at most, Budget/2 when it is 0 or above Budget), so that
	// compaction does not run again on the next turn. The newest turn is
	// always kept.
	Keep int
	// Summarizer writes the summary of the compacted turns. Nil truncates
	// instead: the oldest turns are dropped without a summary.
	Summarizer Model
	// SummaryMaxTokens bounds the summary (0: the server's default).
	SummaryMaxTokens int

	// Hooks is the registry compaction:before and compaction:after are
	// emitted on; the agent, room and thread of their contexts come from
	// ctx (hooks.WithWhere), as does the correlation id.
	Hooks *hooks.Registry
}

// CompactResult says what Compact did.
type CompactResult struct {
	// Compacted is false when the history was within budget (or had only
	// one turn); then nothing changed.
	Compacted bool
	// Summarized is true when a summary replaced the dropped turns, false
	// when they were truncated.
	Summarized   bool
	Summary      string
	TokensBefore int
	TokensAfter  int
	// Dropped is how many messages were removed, Kept how many stayed
	// verbatim.
	Dropped int
	Kept    int
}

// Compact brings scope's history within req.Budget. When the estimate is
// above the budget it splits the history into turns (a turn starts at a
// user or system message, so a tool call and its results are never split),
// keeps the newest turns that fit in req.Keep, and replaces the older ones:
//
//  1. compaction:before is emitted with the messages to be compacted and
//     TokensBefore (the estimate of the whole history);
//  2. with a Summarizer, the model writes a summary of those messages (an
//     earlier summary among them is folded in); the compacted history is a
//     system message (SummaryHeader + summary) followed by the kept turns.
//     Without one, the compacted history is the kept turns;
//  3. the compacted history replaces the old one in one transaction;
//     messages appended meanwhile stay after it;
//  4. compaction:after is emitted with the same messages, TokensAfter and
//     the summary.
//
// A failing summary call returns its error and stores nothing (call again
// without a Summarizer to truncate). If the history was compacted or
// deleted by someone else meanwhile, Compact returns ErrHistoryChanged and
// stores nothing. Call it after storing a turn, off the reply's path.
func (h *History) Compact(ctx context.Context, req CompactRequest) (*CompactResult, error) {
	stored, err := h.load(ctx, req.Scope)
	if err != nil {
		return nil, fmt.Errorf("failed to compact history of %s: failed to load it: %w", req.Scope, err)
	}
	msgs := make([]Message, len(stored))
	for i := range stored {
		msgs[i] = stored[i].msg
	}
	res := &CompactResult{TokensBefore: EstimateTokens(msgs...)}
	if len(msgs) == 0 || res.TokensBefore <= req.Budget {
		return res, nil
	}
	keep := req.Keep
	if keep <= 0 || keep > req.Budget {
		keep = req.Budget / 2
	}
	cut := cutPoint(msgs, keep)
	if cut == 0 {
		zerolog.Ctx(ctx).Warn().Str("scope", string(req.Scope)).Int("tokens", res.TokensBefore).Int("budget", req.Budget).
			Msg("history is over budget but has only one turn; nothing to compact")
		return res, nil
	}
	sess, err := h.Session(ctx, req.Scope)
	if err != nil {
		return nil, fmt.Errorf("failed to compact history of %s: %w", req.Scope, err)
	}
	dropped, kept := msgs[:cut], msgs[cut:]
	where := hooks.WhereFrom(ctx)
	hc := &hooks.CompactionContext{
		Agent: where.Agent, SessionID: string(req.Scope), HistoryID: sess.ID, RoomID: where.RoomID, ThreadID: where.ThreadID,
		Messages: chatMessages(dropped), TokensBefore: res.TokensBefore,
	}
	if err := hooks.Emit(ctx, req.Hooks, hooks.CompactionBefore, hc); err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("failed to compact history of %s: %w", req.Scope, err)
	}

	// The kept messages keep their source events, so Forget still finds
	// them; the summary has none.
	compacted := stored[cut:]
	if req.Summarizer != nil {
		summary, err := summarize(ctx, req.Summarizer, dropped, req.SummaryMaxTokens)
		if err != nil {
			return nil, fmt.Errorf("failed to compact history of %s: failed to summarize %d messages: %w", req.Scope, len(dropped), err)
		}
		res.Summary, res.Summarized = summary, true
		compacted = append([]storedMessage{{msg: Message{Role: RoleSystem, Content: SummaryHeader + summary}}}, compacted...)
	}
	if err := h.replace(ctx, req.Scope, sess.ID, stored, compacted); err != nil {
		return nil, fmt.Errorf("failed to compact history of %s: %w", req.Scope, err)
	}
	res.Compacted = true
	after := make([]Message, len(compacted))
	for i := range compacted {
		after[i] = compacted[i].msg
	}
	res.TokensAfter = EstimateTokens(after...)
	res.Dropped, res.Kept = len(dropped), len(kept)

	hc = &hooks.CompactionContext{
		Agent: where.Agent, SessionID: string(req.Scope), HistoryID: sess.ID, RoomID: where.RoomID, ThreadID: where.ThreadID,
		Messages: chatMessages(dropped), TokensBefore: res.TokensBefore, TokensAfter: res.TokensAfter, Summary: res.Summary,
	}
	if err := hooks.Emit(ctx, req.Hooks, hooks.CompactionAfter, hc); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("scope", string(req.Scope)).Msg("failed to run compaction:after hooks")
	}
	zerolog.Ctx(ctx).Info().Str("scope", string(req.Scope)).Int("tokens_before", res.TokensBefore).Int("tokens_after", res.TokensAfter).
		Int("dropped", res.Dropped).Bool("summarized", res.Summarized).Msg("compacted history")
	return res, nil
}

// turnStarts returns the indexes where turns begin: the first message and
// every user or system message. Assistant and tool messages belong to the
// turn before them, so a tool call and its results stay together.
func turnStarts(msgs []Message) []int {
	starts := []int{0}
	for i := 1; i < len(msgs); i++ {
		if msgs[i].Role == RoleUser || msgs[i].Role == RoleSystem {
			starts = append(starts, i)
		}
	}
	return starts
}

// cutPoint returns the index of the first message kept: the start of the
// oldest of the newest turns that fit in keep tokens together (the newest
// turn is kept whatever its size). 0 means nothing can be dropped.
func cutPoint(msgs []Message, keep int) int {
	starts := turnStarts(msgs)
	end := len(msgs)
	cut := end
	total := 0
	for i := len(starts) - 1; i >= 0; i-- {
		t := EstimateTokens(msgs[starts[i]:end]...)
		if cut != len(msgs) && total+t > keep {
			break
		}
		total += t
		cut, end = starts[i], starts[i]
	}
	return cut
}

// replace stores compacted in place of the messages old, if they are
// still what the scope holds up to the last of them.
func (h *History) replace(ctx context.Context, scope ScopeKey, sessionID string, old, compacted []storedMessage) error {
	rows := make([]storedRow, len(compacted))
	for i := range compacted {
		var err error
		if rows[i], err = encodeMessage(&compacted[i].msg); err != nil {
			return err
		}
		rows[i].source = compacted[i].source
	}
	first, last := old[0].seq, old[len(old)-1].seq
	defer h.lockWrites()()
	return h.db.DoTxn(ctx, nil, func(ctx context.Context) error {
		var current string
		err := h.db.QueryRow(ctx, `
			UPDATE agents_session SET compactions = compactions + 1, updated_at = $2
			WHERE scope_key = $1 RETURNING session_id`, scope, h.now().UnixMilli()).Scan(&current)
		if err != nil || current != sessionID {
			return fmt.Errorf("%w: the session was deleted or replaced", ErrHistoryChanged)
		}
		var count, lowest int64
		err = h.db.QueryRow(ctx, `
			SELECT COUNT(*), COALESCE(MIN(seq), 0) FROM agents_message WHERE scope_key = $1 AND seq <= $2`,
			scope, last).Scan(&count, &lowest)
		if err != nil {
			return fmt.Errorf("failed to check history: %w", err)
		}
		if count != int64(len(old)) || lowest != first {
			return fmt.Errorf("%w: it was compacted by someone else", ErrHistoryChanged)
		}
		if _, err := h.db.Exec(ctx, `DELETE FROM agents_message WHERE scope_key = $1 AND seq <= $2`, scope, last); err != nil {
			return fmt.Errorf("failed to delete compacted messages: %w", err)
		}
		// The compacted history is never longer than what it replaces, so
		// it fits in the numbers just freed, before anything appended since.
		return h.insertRows(ctx, scope, last-int64(len(rows))+1, rows)
	})
}

// summarize asks m for a summary of msgs.
func summarize(ctx context.Context, m Model, msgs []Message, maxTokens int) (string, error) {
	req := &Request{
		Messages: []Message{
			{Role: RoleSystem, Content: summaryInstructions},
			{Role: RoleUser, Content: Transcript(msgs)},
		},
		MaxTokens: maxTokens,
	}
	c, err := Complete(ctx, m, req, nil)
	if err != nil {
		return "", err
	}
	summary := strings.TrimSpace(c.Text)
	if summary == "" {
		return "", errors.New("the summary model returned an empty summary")
	}
	return summary, nil
}

// Transcript renders msgs as plain text for a summary model: one block per
// message, headed by its role in brackets; tool calls and tool results are
// marked as such.
func Transcript(msgs []Message) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("\n\n")
		}
		switch m.Role {
		case RoleTool:
			b.WriteString("[tool result]\n")
		default:
			fmt.Fprintf(&b, "[%s]\n", m.Role)
		}
		b.WriteString(m.Content)
		for _, tc := range m.ToolCalls {
			if !strings.HasSuffix(b.String(), "\n") {
				b.WriteString("\n")
			}
			fmt.Fprintf(&b, "(calls tool %s with %s)", tc.Name, tc.Arguments)
		}
	}
	return b.String()
}

// chatMessages converts msgs for hook contexts.
func chatMessages(msgs []Message) []hooks.ChatMessage {
	out := make([]hooks.ChatMessage, len(msgs))
	for i, m := range msgs {
		out[i] = hooks.ChatMessage{Role: string(m.Role), Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, hooks.ChatToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
	}
	return out
}
