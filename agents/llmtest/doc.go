// Package llmtest is a scripted OpenAI-compatible model server for tests: it
// speaks the real wire format (streams, tool calls) from a script and records
// every request it received.
package llmtest
