// Package llmtest is a scripted OpenAI-compatible model server for tests: it
// speaks the real wire format (streams, tool calls) from a script and records
// every request it received.
//
// NewServer starts an httptest server on loopback whose URL a client uses as
// its base URL. It answers POST /v1/chat/completions, streaming (SSE "data:"
// chunks, tool-call deltas split across chunks, a usage chunk when asked,
// "data: [DONE]") or as one JSON completion, and GET /v1/models. What it
// answers is scripted: a queue of Reply values (Script), and routes that
// answer the requests a Matcher picks (On), so that independent callers
// — a router call and an agent's call — are scripted independently. A Reply
// can be text in chunks, tool calls, an HTTP error with a body, a delay, a
// hold until the test releases it, a slow stream, a garbage or truncated
// stream, or empty choices.
//
// Every request is recorded with its raw body and its decoded form
// (Requests), for assertions on what the client sent. Instant mode drops
// delays and recording for benchmarks; WithFallback answers every request
// the script does not.
//
// The package depends on nothing of hookroom, so any client can be tested
// against it.
package llmtest
