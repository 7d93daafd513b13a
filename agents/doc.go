// Package agents defines agents and the models they run on: the Model
// interface and its providers (OpenAI-compatible, and echo for offline demos),
// the tool loop, built-in tools, session history and compaction. It knows
// nothing of Matrix; the bot translates.
package agents
