// Package usage records the tokens every agent turn spent and answers
// questions about them: how many tokens an agent, a room or a person used
// today or this month (!usage), and whether a daily token budget is used
// up (Store.Check, asked before a turn calls the model).
//
// One row per turn (usage_turn), written once where the turn ends
// (Store.Record, in the same transaction that marks the person's message
// handled, so a crash never leaves half of it), and per UTC day a running
// total per person and per agent (usage_day, updated in that transaction):
// a budget check reads one row per budget, however busy the day. Days and
// months are calendar days and months in UTC: a daily budget resets at
// 00:00 UTC.
//
// The store works on SQLite and PostgreSQL alike through dbutil, with its
// own version table (usage_version). It imports only hooks (for
// hooks.AgentName) and mautrix's id types.
package usage
