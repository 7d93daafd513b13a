// Package approval owns human approval of tool calls: which calls need it
// (Match over the tool_approval rules: first match wins, default auto), how
// a person's answer reads (ParseReaction for reactions on the approval card,
// ParseReply for a reply in the thread), and the Store of approvals in the
// database (its own approval_version migrations, SQLite and PostgreSQL), so
// a pending approval outlives a restart and the replayed turn finds it.
//
// The package knows nothing of Matrix or the turn pipeline: bot posts the
// cards, routes the answers and waits; agents asks through
// RunRequest.Approve.
package approval
