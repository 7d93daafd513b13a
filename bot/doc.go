// Package bot is hookroom's composition root and runtime: it wires config,
// Matrix I/O, tracking, the hook engine, agents and plugins together, runs the
// turn pipeline once per inbound Matrix event, fires lifecycle and membership
// events, and implements the host services that hooks call. Besides the
// rooms config.yaml provisions, it serves the rooms its accounts join on
// the invites of people authorization allows (direct messages), which it
// remembers in the database; other invites it declines.
//
// # One message, from sync to reply
//
// A person's plain message, answered by a model that calls one plugin tool,
// with streaming on, goes through these steps. Three goroutine handoffs lie
// on the way (marked "handoff"): the sync loop, a room's worker, a thread's
// queue.
//
//  1. Sync. matrixio's Account.Run long-polls /sync, fills timeline gaps
//     (buildBatch) and hands each batch to its sink before it saves the sync
//     token. syncLoops.add started the loop with syncSink as the sink.
//  2. Ingest. syncSink.HandleSync calls Bot.handleSync, which records members
//     and invites, de-duplicates the batch across accounts into the durable
//     inbox (tracking's Store.RecordBatch), notes redactions and calls
//     dispatcher.enqueue: one channel per room (handoff 1).
//  3. Dispatch. dispatcher.work takes the room's events one at a time;
//     dispatcher.handle puts a logger with the event into the context,
//     records the arrival time, recovers panics, skips redacted events, calls
//     Bot.handleEvent and marks the event handled unless a turn took it over.
//  4. The message. handleEvent loads the world (the configuration in service)
//     once and calls handle, then handleMessage: authorization, malformed
//     messages and edits; an answer to an approval card (answerReply); the
//     envelope (Bot.envelope); candidates, mentions and preRoute; commands
//     (parseCommand). withPreTurnTrace starts recording what happens before
//     the turn, message:received is emitted (hooks.Emit), then route picks
//     the agent (askRouter may ask the router's model) and handoff posts the
//     router's note.
//  5. The turn starts. Bot.startTurn builds it: newTurn takes a turn.Spec
//     from the world (agent, account, model, tools, budgets, approval rules,
//     a trace recorder from newTraceRecorder) and calls turn.New with the
//     shared turn.Deps (newTurnDeps); it files the turn in the stop index
//     (turn.Index.Queue) and queues it per thread (turn.Queues.Run: handoff
//     2). handleMessage reports the event as async, so the dispatcher does
//     not mark it handled: the turn does.
//  6. Preparing (package internal/turn). Turn.Run defers finish, then on a
//     replay settles what the killed run posted (recoverDelivery), and runs
//     claim (message:claim), overBudget, prepareAttachments, enrich
//     (message:enrich, system:enrich, enrich.Build) and prompt (agents'
//     History.Compact with compaction:*, History.Load, systemPrompt).
//  7. Streaming. startTyping starts the typing notice and stream runs
//     beside the model: after 400 ms it sends a placeholder through sendNew
//     (the intent recorded in tracking, then matrixio's Account.SendText)
//     and edits it about once a second (Account.Edit).
//  8. The model and the tool. agents.Run (runner.run) streams through the
//     turn's countedModel and agents.Complete; Turn.onText receives the
//     text. For the tool call, runner.call asks needsApproval, runs
//     runner.gate (tool:before_call) and, if needed, approve, which posts a
//     card through the bot's approvalDesk (turn.Approvals) and waits for the
//     answer that answerReply or answerCardReaction brings
//     (approvalWaiters). runner.invoke (a goroutine per call) runs
//     pluginTool.Call, then plugins' Set.CallTool and process's
//     Plugin.CallTool over JSON-RPC; then tool:after_call. The tool loop
//     reports each call to the trace (onToolCall).
//  9. Delivery. deliver emits message:before_response or
//     message:final_response_transform, post edits the placeholder or
//     sends new parts, and agents' History.AppendTurn stores the turn; its
//     transaction callback handled records the usage and marks the message
//     handled in the same transaction. session:started fires if the session
//     is new; endAnswered says how the turn ended.
//  10. The end, deferred in this order: endTyping; cancelLeftoverApprovals
//     (replays only); sweepIntents; then finish, which marks the message
//     handled if the store did not, hands the trace to Deps.SaveTrace (the
//     bot's traceWriter saves it in the background; trace.go) and fires
//     message:after_response (or message:cancelled). Last, the stop-index
//     entry goes and the turn's contexts are cancelled.
//
// A turn starts in one place (Bot.startTurn, Turn.Run) and ends in one
// (finish, in package internal/turn). The operator console (console.go) reads what these steps
// leave behind: the traces, the hook statistics, usage, schedules and
// pending approvals; its Approve and Deny answer a card as a person would.
package bot
