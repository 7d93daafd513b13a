package protocol_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/plugins/process/protocol"
)

// designatedCase builds a context, a mutation a hook might make to its
// copy, and reads back what must survive the round trip.
type designatedCase struct {
	name   string
	fresh  func() hooks.Context
	mutate func(hooks.Context)
	read   func(hooks.Context) any
}

func designatedCases() []designatedCase {
	return []designatedCase{
		{
			name:   "message:received suppress",
			fresh:  func() hooks.Context { return hooktest.MessageReceived("hi") },
			mutate: func(c hooks.Context) { c.(*hooks.MessageReceivedContext).Suppress = true },
			read:   func(c hooks.Context) any { return c.(*hooks.MessageReceivedContext).Suppress },
		},
		{
			name: "schedule:fired message_text and suppress",
			fresh: func() hooks.Context {
				return &hooks.ScheduleFiredContext{TaskID: "t", RoomID: hooktest.Room, MessageText: "old"}
			},
			mutate: func(c hooks.Context) {
				s := c.(*hooks.ScheduleFiredContext)
				s.MessageText, s.Suppress = "new", true
			},
			read: func(c hooks.Context) any {
				s := c.(*hooks.ScheduleFiredContext)
				return []any{s.MessageText, s.Suppress}
			},
		},
		{
			name:  "message:enrich items",
			fresh: func() hooks.Context { return hooktest.MessageEnrich("hi") },
			mutate: func(c hooks.Context) {
				e := c.(*hooks.MessageEnrichContext)
				e.AddMetadata("loc", "at home", hooks.StableItem)
				e.AddMetadata("t", "now", hooks.TransientItem)
			},
			read: func(c hooks.Context) any { return c.(*hooks.MessageEnrichContext).Items },
		},
		{
			name:   "system:enrich items",
			fresh:  func() hooks.Context { return hooktest.SystemEnrich("hi") },
			mutate: func(c hooks.Context) { c.(*hooks.SystemEnrichContext).AddInstruction("tags", "a, b") },
			read:   func(c hooks.Context) any { return c.(*hooks.SystemEnrichContext).Items },
		},
		{
			name: "message:before_response draft",
			fresh: func() hooks.Context {
				c := hooktest.BeforeResponse("draft")
				c.Draft.Extra = json.RawMessage(`{"a":1}`)
				c.Draft.ToolTrace = []hooks.ToolTraceEntry{{Tool: "x", Result: "r"}}
				return c
			},
			mutate: func(c hooks.Context) {
				b := c.(*hooks.BeforeResponseContext)
				b.Draft.Text = "changed"
				b.Draft.Extra = json.RawMessage(`{"b":2}`)
				b.Draft.ToolTrace = append(b.Draft.ToolTrace, hooks.ToolTraceEntry{Tool: "y"})
				b.Draft.Suppress = true
			},
			read: func(c hooks.Context) any {
				d := c.(*hooks.BeforeResponseContext).Draft
				return []any{d.Text, string(d.Extra), d.ToolTrace, d.Suppress}
			},
		},
		{
			name:   "message:final_response_transform text",
			fresh:  func() hooks.Context { return hooktest.FinalResponse("final") },
			mutate: func(c hooks.Context) { c.(*hooks.FinalResponseContext).Draft.Text = "FINAL" },
			read:   func(c hooks.Context) any { return c.(*hooks.FinalResponseContext).Draft.Text },
		},
		{
			name:   "tool:before_call decline",
			fresh:  func() hooks.Context { return hooktest.ToolBeforeCall("read_file", `{"path":"secret"}`) },
			mutate: func(c hooks.Context) { c.(*hooks.ToolBeforeCallContext).Decline("no secrets") },
			read: func(c hooks.Context) any {
				g := c.(*hooks.ToolBeforeCallContext)
				return []any{g.Declined, g.DeclineReason}
			},
		},
		{
			name:   "message:claim claimed",
			fresh:  func() hooks.Context { return hooktest.MessageClaim("ping") },
			mutate: func(c hooks.Context) { c.(*hooks.MessageClaimContext).Claim("pong") },
			read:   func(c hooks.Context) any { return c.(*hooks.MessageClaimContext).Claimed },
		},
	}
}

// clone copies c through JSON, as the plugin end sees it.
func clone(t *testing.T, c hooks.Context, fresh func() hooks.Context) hooks.Context {
	t.Helper()
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	out := fresh()
	if err := json.Unmarshal(raw, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestResultApplyRoundTrip(t *testing.T) {
	for _, tc := range designatedCases() {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.fresh()
			plugin := clone(t, host, tc.fresh)
			tc.mutate(plugin)
			want := tc.read(plugin)

			res, err := protocol.Result(plugin)
			if err != nil {
				t.Fatal(err)
			}
			if err := protocol.Apply(host, res); err != nil {
				t.Fatalf("Apply(%s): %v", res, err)
			}
			if got := tc.read(host); !reflect.DeepEqual(got, want) {
				t.Errorf("after Apply(%s): got %#v, want %#v", res, got, want)
			}
		})
	}
}

// A plugin in another language may answer with the whole context it got,
// changed: the designated fields count, and only them.
func TestApplyWholeContextEcho(t *testing.T) {
	for _, tc := range designatedCases() {
		t.Run(tc.name, func(t *testing.T) {
			host := tc.fresh()
			plugin := clone(t, host, tc.fresh)
			tc.mutate(plugin)
			want := tc.read(plugin)
			whole, err := json.Marshal(plugin)
			if err != nil {
				t.Fatal(err)
			}
			if err := protocol.Apply(host, whole); err != nil {
				t.Fatal(err)
			}
			if got := tc.read(host); !reflect.DeepEqual(got, want) {
				t.Errorf("got %#v, want %#v", got, want)
			}
		})
	}
}

// Result must use the same JSON names the hooks package marshals, or a
// plugin reading the context and the host reading results would disagree.
func TestResultNamesMatchContextJSON(t *testing.T) {
	for _, tc := range designatedCases() {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.fresh()
			tc.mutate(c)
			res, err := protocol.Result(c)
			if err != nil {
				t.Fatal(err)
			}
			var resKeys, ctxKeys map[string]json.RawMessage
			whole, _ := json.Marshal(c)
			if err := json.Unmarshal(res, &resKeys); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(whole, &ctxKeys); err != nil {
				t.Fatal(err)
			}
			for k, v := range resKeys {
				cv, ok := ctxKeys[k]
				if !ok {
					t.Errorf("result field %q is not a field of the context JSON %s", k, whole)
					continue
				}
				if k == "draft" {
					var rd, cd map[string]json.RawMessage
					_ = json.Unmarshal(v, &rd)
					_ = json.Unmarshal(cv, &cd)
					for dk := range rd {
						if _, ok := cd[dk]; !ok && dk != "extra" && dk != "tool_trace" {
							t.Errorf("result field draft.%q is not in the context JSON", dk)
						}
					}
				}
			}
		})
	}
}

func TestApplyIgnoresOtherFieldsAndSharedSlices(t *testing.T) {
	c := hooktest.MessageReceived("original")
	shared := []string{"att1"}
	c.Envelope.AttachmentIDs = shared
	res := json.RawMessage(`{"envelope":{"body":"hacked","attachment_ids":["evil"]},"suppress":true,"correlation_id":"x"}`)
	if err := protocol.Apply(c, res); err != nil {
		t.Fatal(err)
	}
	if !c.Suppress {
		t.Error("suppress not applied")
	}
	if c.Envelope.Body != "original" || shared[0] != "att1" || c.CorrelationID == "x" {
		t.Errorf("a non-designated field changed: body=%q shared=%v correlation=%q", c.Envelope.Body, shared, c.CorrelationID)
	}
}

func TestApplyAbsentFieldsKeepValues(t *testing.T) {
	c := &hooks.ScheduleFiredContext{MessageText: "keep me"}
	if err := protocol.Apply(c, json.RawMessage(`{"suppress":true}`)); err != nil {
		t.Fatal(err)
	}
	if c.MessageText != "keep me" || !c.Suppress {
		t.Errorf("got text=%q suppress=%v", c.MessageText, c.Suppress)
	}
	b := hooktest.BeforeResponse("keep")
	b.Draft.Extra = json.RawMessage(`{"k":1}`)
	if err := protocol.Apply(b, json.RawMessage(`{"draft":{"suppress":true}}`)); err != nil {
		t.Fatal(err)
	}
	if b.Draft.Text != "keep" || string(b.Draft.Extra) != `{"k":1}` || !b.Draft.Suppress {
		t.Errorf("draft = %+v", b.Draft)
	}
	b.Draft.ToolTrace = []hooks.ToolTraceEntry{{Tool: "t"}}
	if err := protocol.Apply(b, json.RawMessage(`{"draft":{"extra":null,"tool_trace":null}}`)); err != nil {
		t.Fatal(err)
	}
	if b.Draft.Extra != nil || b.Draft.ToolTrace != nil {
		t.Errorf("null did not clear extra/tool_trace: %+v", b.Draft)
	}
	for _, empty := range []string{"", "null", "{}", " "} {
		r := hooktest.MessageReceived("x")
		if err := protocol.Apply(r, json.RawMessage(empty)); err != nil || r.Suppress {
			t.Errorf("Apply(%q): err=%v suppress=%v", empty, err, r.Suppress)
		}
	}
}

func TestApplyRejectsMalformedResults(t *testing.T) {
	tests := []struct {
		name    string
		c       hooks.Context
		result  string
		wantErr string
	}{
		{"not an object", hooktest.MessageReceived("x"), `[1]`, "want a JSON object"},
		{"wrong type", hooktest.MessageReceived("x"), `{"suppress":"yes"}`, "failed to decode"},
		{"item without key", hooktest.MessageEnrich("x"), `{"items":[{"text":"t"}]}`, "has no key"},
		{"bad cache policy", hooktest.MessageEnrich("x"), `{"items":[{"key":"k","text":"t","cache_policy":"forever"}]}`, "invalid cache_policy"},
		{"draft not an object", hooktest.BeforeResponse("x"), `{"draft":"text"}`, "draft"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := protocol.Apply(tc.c, json.RawMessage(tc.result))
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestObserveOnlyEventsIgnoreResults(t *testing.T) {
	c := hooktest.AfterResponse("reply")
	if err := protocol.Apply(c, json.RawMessage(`{"result":{"text":"changed"}}`)); err != nil {
		t.Fatal(err)
	}
	if c.Result.Text != "reply" {
		t.Errorf("frozen context changed: %q", c.Result.Text)
	}
	res, err := protocol.Result(c)
	if err != nil || string(res) != "{}" {
		t.Errorf("Result = %s, %v; want {}", res, err)
	}
}
