package agents_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

var (
	textStep = []agents.Event{
		{Kind: agents.EventText, Text: "It is "}, {Kind: agents.EventText, Text: "noon."},
		{Kind: agents.EventUsage, Usage: agents.Usage{PromptTokens: 10, CompletionTokens: 2, TotalTokens: 12}},
		{Kind: agents.EventFinish, FinishReason: agents.FinishStop},
	}
	toolStep = []agents.Event{
		{Kind: agents.EventToolCalls, ToolCalls: []agents.ToolCall{{ID: "c1", Name: "clock", Arguments: `{"timezone":"UTC"}`}}},
		{Kind: agents.EventFinish, FinishReason: agents.FinishToolCalls},
	}
)

// BenchmarkRun measures the tool loop's own overhead: the model is an
// in-memory script, the tool returns a constant.
func BenchmarkRun(b *testing.B) {
	clock := agents.NewTool(agents.ToolSpec{Name: "clock"}, func(context.Context, json.RawMessage) (string, error) { return "12:00", nil })
	ts, _ := agents.NewToolset(clock)
	gates := hooktest.NewRegistry(b,
		hooks.Handle(hooks.ToolBeforeCall, "gate", func(_ context.Context, c *hooks.ToolBeforeCallContext) error { return nil }),
		hooks.Handle(hooks.ToolAfterCall, "audit", func(_ context.Context, c *hooks.ToolAfterCallContext) error { return nil }),
	)
	modelHooks := hooktest.NewRegistry(b,
		hooks.Handle(hooks.ModelRequest, "redact", func(_ context.Context, c *hooks.ModelRequestContext) error {
			c.ReplaceText("hunter2", "[secret]")
			return nil
		}, hooks.Inline()),
		hooks.Handle(hooks.ModelResponse, "meter", func(_ context.Context, c *hooks.ModelResponseContext) error { return nil }, hooks.Inline()),
		hooks.Handle(hooks.ToolResult, "mask", func(_ context.Context, c *hooks.ToolResultContext) error { return nil }, hooks.Inline()),
	)
	cases := []struct {
		name  string
		steps [][]agents.Event
		reg   *hooks.Registry
	}{
		{name: "text only", steps: [][]agents.Event{textStep}},
		{name: "one tool call, no hooks", steps: [][]agents.Event{toolStep, textStep}},
		{name: "one tool call, gate and observer hooks", steps: [][]agents.Event{toolStep, textStep}, reg: gates},
		{name: "four tool rounds, gate and observer hooks", steps: [][]agents.Event{toolStep, toolStep, toolStep, toolStep, textStep}, reg: gates},
		{name: "four tool rounds, inline model hooks", steps: [][]agents.Event{toolStep, toolStep, toolStep, toolStep, textStep}, reg: modelHooks},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				m := &scriptedModel{steps: tc.steps}
				req := baseRun(m, ts, tc.reg)
				req.OnText = func(string) {}
				if _, err := agents.Run(turnCtx(ctx), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkModelStream measures one streamed completion through the real
// client of each provider (go-openai, hookroom's own Messages API client)
// against llmtest on loopback in instant mode: the same scripted reply in
// each wire format, so the difference is the client's parse cost.
func BenchmarkModelStream(b *testing.B) {
	providers := []struct {
		name  string
		model func(testing.TB, *llmtest.Server, ...func(*agents.ModelSpec)) agents.Model
	}{
		{name: "openai", model: testModel},
		{name: "anthropic", model: anthropicModel},
	}
	cases := []struct {
		name  string
		reply llmtest.Reply
	}{
		{name: "text in 20 chunks", reply: llmtest.Text(llmtest.Split("The quick brown fox jumps over the lazy dog, again and again and again.", 20)...)},
		{name: "tool call in 8 pieces", reply: llmtest.Calls(llmtest.ToolCall("c1", "clock", `{"timezone":"Europe/Berlin","format":"long"}`).WithPieces(8))},
	}
	for _, p := range providers {
		for _, tc := range cases {
			b.Run(p.name+"/"+tc.name, func(b *testing.B) {
				srv := llmtest.NewServerWith(b, []llmtest.Option{llmtest.Instant(), llmtest.WithFallback(tc.reply)})
				m := p.model(b, srv)
				req := userPrompt("hi")
				ctx := context.Background()
				b.ReportAllocs()
				for b.Loop() {
					if _, err := agents.Complete(ctx, m, req, nil); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
