// Package prefs keeps the settings people change from chat, per room and
// per thread: today the model a conversation runs on (`!model`). A
// thread's setting wins over its room's; without either, config.yaml
// decides. The settings live in hookroom's database (their own tables,
// SQLite or PostgreSQL), so they survive restarts; the bot checks who may
// change them and that a value is allowed (a configured model) before it
// calls Set.
package prefs
