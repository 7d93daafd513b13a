// Package agents defines agents and the models they run on: the Model
// interface and its providers (OpenAI-compatible, Anthropic, and echo for
// offline demos),
// the tool loop, built-in tools, session history and compaction. It knows
// nothing of Matrix; the bot translates.
//
// # Models
//
// A Model streams a chat completion (Stream, read with Recv until io.EOF, or
// gathered with Complete). NewModel builds one from a ModelSpec: provider
// "openai" talks to any OpenAI-compatible server through
// github.com/sashabaranov/go-openai (streaming, tool-call deltas accumulated by
// index); "anthropic" speaks Anthropic's Messages API natively with a small
// client of its own (POST /v1/messages streamed, the server-sent events read
// in anthropic_wire.go, streamed tool_use input gathered, the stable prompt
// prefix marked for prompt caching); "echo"
// answers offline and says so. Every failure is a *ModelError
// with a Kind, the HTTP status, whether a retry may help, and a message fit to
// show a person; API keys never appear in errors or logs.
//
// # One turn
//
// The bot runs a turn roughly like this (internal/turn: prompt, Run, deliver).
// It compacts the history before it loads it, so the prompt fits the model's
// window, and stores the turn with AppendTurn, whose callback marks the
// answered message handled in the same transaction:
//
//	scope := agents.NewScopeKey(room, threadRoot)
//	_, err := history.Compact(ctx, agents.CompactRequest{Scope: scope,
//		Budget: agents.HistoryBudget(window, 0), Summarizer: model, Hooks: registry, …})
//	past, err := history.Load(ctx, scope)
//	prompt := append([]agents.Message{{Role: agents.RoleSystem, Content: system, StablePrefix: stable}}, past...)
//	if turn.Transient != "" {
//		prompt = append(prompt, agents.Message{Role: agents.RoleUser, Content: turn.Transient})
//	}
//	prompt = append(prompt, agents.Message{Role: agents.RoleUser, Content: turn.Prompt})
//	ctx = hooks.WithWhere(hooks.WithCorrelationID(ctx, string(eventID)), hooks.Where{Agent: agent, RoomID: room, …})
//	res, err := agents.Run(ctx, agents.RunRequest{Model: model, ModelName: name, ProviderModel: spec.Model,
//		Messages: prompt, Tools: tools, Hooks: registry, OnText: stream.Append,
//		NeedsApproval: needsApproval, Approve: approve})
//	stored := append([]agents.Message{{Role: agents.RoleUser, Content: turn.Prompt}}, res.Messages...)
//	newSession, err := history.AppendTurn(ctx, scope, agent, answered, markHandled, stored...)
//	if newSession { /* emit session:started with history.Session(ctx, scope) */ }
//
// Run emits model:request and model:response around every model call, and
// tool:before_call, tool:after_call and tool:result around every tool call
// itself (and asks NeedsApproval and Approve before a call that needs a
// person); a model:request hook's refusal ends it with a *RefusedError. The
// caller chooses the model with hooks.ResolveModel (model:resolve) before it
// builds the prompt, and emits session:started (AppendTurn reports the first append of a scope),
// and Compact emits compaction:before and compaction:after.
//
// # History
//
// History keeps one ordered list of messages per scope (room + thread root)
// in the database (SQLite or PostgreSQL, through go.mau.fi/util/dbutil, with
// its own agents_version table). Messages come back byte-exact, so replaying
// a conversation sends the model the same bytes as the first time. When the
// estimated size (EstimateTokens) passes the budget, Compact replaces the
// oldest turns with a summary written by a model, or drops them when there is
// no summary model; a tool call and its results are never separated. A turn
// stored with AppendTurn remembers the Matrix event it answered, so Forget
// can take it out again when that event is redacted.
package agents
