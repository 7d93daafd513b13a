// Package turn is one agent's answer to one message: from message:claim
// to the last edit of the reply, and exactly one of message:after_response
// and message:cancelled.
//
// The bot builds a turn with New from two things: Deps, the long-lived
// collaborators every turn shares (the database and its stores, the stop
// index, metrics, the trace writer, the media downloader, the delivery
// pacing), made once at start-up; and a Spec, everything the turn needs to
// know of the configuration in service (the event and its envelope, the
// agent, its account, the hook registry, the model, tools, budgets,
// approval rules, attachment limits), taken once from the world the
// message was routed in. A turn therefore sees one configuration, whatever
// reloads happen while it runs; the package imports neither the bot nor
// the config package.
//
// Run carries the turn: on a replay it first settles what a killed run
// posted (recoverDelivery, delivery.go), then claim (message:claim),
// overBudget (usage.go), prepareAttachments (attachments.go), enrich
// (message:enrich, system:enrich) and prompt (history compaction and
// load), then the model with its tool loop (agents.Run) beside stream,
// which posts a placeholder and edits it while the model writes; tool calls
// that need a person's approval wait in approve (approval.go) with the
// turn's deadline paused. deliver runs the response transformers, posts the
// reply (in parts when it is too long), stores the turn and its usage in
// one transaction, and finish — the one place a turn ends — marks the
// message handled, saves the trace and fires the closing hook.
//
// Every message a turn posts is recorded as an intent before it is sent
// and with its event id after (delivery.go), so that a crash at any point
// leaves one answer, not two.
//
// Queues runs turns one at a time per thread; Index finds a running or
// queued turn by its message, its reply or its approval card, so that 🛑
// and redactions stop it (ErrStopped, ErrRedacted).
package turn
