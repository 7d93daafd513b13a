// Package llmtest is a scripted model server for tests: it speaks the real
// wire formats of OpenAI's chat completions and of Anthropic's Messages API
// (streams, tool calls, errors) from one script and records every request
// it received.
//
// NewServer starts an httptest server on loopback whose URL a client uses as
// its base URL. It answers POST /v1/chat/completions, streaming (SSE "data:"
// chunks, tool-call deltas split across chunks, a usage chunk when asked,
// "data: [DONE]") or as one JSON completion, and GET /v1/models. It also
// answers POST /v1/messages in Anthropic's format (message_start,
// content_block_start/delta/stop with text_delta and input_json_delta,
// message_delta with the stop reason and usage, message_stop; errors as
// {"type":"error","error":{…}}); give an Anthropic client RootURL. The same
// replies script both formats, and an Anthropic request is also translated
// into the common Request.Body, so matchers work alike. What it
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
