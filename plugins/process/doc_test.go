package process_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/hooks"
)

// contextsByEvent has a zero context of every built-in event.
var contextsByEvent = map[string]hooks.Context{
	"message:received":                 &hooks.MessageReceivedContext{},
	"message:claim":                    &hooks.MessageClaimContext{},
	"message:enrich":                   &hooks.MessageEnrichContext{},
	"system:enrich":                    &hooks.SystemEnrichContext{},
	"message:before_response":          &hooks.BeforeResponseContext{},
	"message:final_response_transform": &hooks.FinalResponseContext{},
	"message:after_response":           &hooks.AfterResponseContext{},
	"message:cancelled":                &hooks.CancelledContext{},
	"agent:started":                    &hooks.AgentLifecycleContext{},
	"agent:stopped":                    &hooks.AgentLifecycleContext{},
	"bot:ready":                        &hooks.AgentLifecycleContext{},
	"session:started":                  &hooks.SessionContext{},
	"compaction:before":                &hooks.CompactionContext{},
	"compaction:after":                 &hooks.CompactionContext{},
	"schedule:fired":                   &hooks.ScheduleFiredContext{},
	"reaction:received":                &hooks.ReactionReceivedContext{},
	"room:member_joined":               &hooks.RoomMemberContext{},
	"room:member_left":                 &hooks.RoomMemberContext{},
	"config:reloaded":                  &hooks.ConfigReloadedContext{},
	"tool:before_call":                 &hooks.ToolBeforeCallContext{},
	"tool:after_call":                  &hooks.ToolAfterCallContext{},
	"tool:approval_requested":          &hooks.ToolApprovalRequestedContext{},
	"tool:approval_resolved":           &hooks.ToolApprovalResolvedContext{},
	"plugin:before_install":            &hooks.PluginInstallContext{},
	"model:resolve":                    &hooks.ModelResolveContext{},
	"model:request":                    &hooks.ModelRequestContext{},
	"model:response":                   &hooks.ModelResponseContext{},
	"tool:result":                      &hooks.ToolResultContext{},
	"usage:budget_reached":             &hooks.BudgetReachedContext{},
	"subagent:spawned":                 &hooks.SubagentContext{},
	"subagent:ended":                   &hooks.SubagentContext{},
	"memory:extracted":                 &hooks.MemoryExtractedContext{},
}

// jsonFields lists the JSON names of t's fields, embedded structs
// flattened, nested structs as "name{sub sub}" for the caller to check.
func jsonFields(t reflect.Type) (top []string, nested map[string][]string) {
	nested = map[string][]string{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			sub, subNested := jsonFields(f.Type)
			top = append(top, sub...)
			for k, v := range subNested {
				nested[k] = v
			}
			continue
		}
		if tag == "-" || tag == "" {
			continue
		}
		top = append(top, tag)
		if ft := f.Type; ft.Kind() == reflect.Struct && ft.PkgPath() == t.PkgPath() && ft.Name() != "Envelope" {
			sub, _ := jsonFields(ft)
			nested[tag] = sub
		}
	}
	return top, nested
}

// The protocol document lists every field of every built-in event's
// context, so a plugin author working from it alone sees them all.
func TestProtocolDocListsEveryContextField(t *testing.T) {
	raw, err := os.ReadFile("../../docs/plugin-protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	rows := map[string]string{}
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cols := strings.Split(line, "|")
		if len(cols) < 5 {
			continue
		}
		switch strings.TrimSpace(cols[2]) { // the events table: event | mode | …
		case "observer", "collector", "transformer", "gate", "claim":
		default:
			continue
		}
		for _, ev := range hooks.BuiltinEvents() {
			if strings.Contains(cols[1], "`"+ev+"`") {
				rows[ev] = line
			}
		}
	}
	for _, ev := range hooks.BuiltinEvents() {
		c, ok := contextsByEvent[ev]
		if !ok {
			t.Errorf("test table lacks %s", ev)
			continue
		}
		row, ok := rows[ev]
		if !ok {
			t.Errorf("docs/plugin-protocol.md has no context table row for %s", ev)
			continue
		}
		top, nested := jsonFields(reflect.TypeOf(c).Elem())
		for _, f := range top {
			if f == "correlation_id" {
				continue // described once for all contexts
			}
			if !strings.Contains(row, "`"+f+"`") {
				t.Errorf("%s: the doc's row lacks field %q", ev, f)
			}
			for _, sub := range nested[f] {
				if !strings.Contains(row, "`"+sub+"`") && !strings.Contains(doc, "`"+sub+"`") {
					t.Errorf("%s: the doc lacks field %s.%s", ev, f, sub)
				}
			}
		}
	}
	for _, f := range []string{"source_event_id", "resolved_thread_id", "requester_id", "attachment_ids", "mentioned_agents", "agent_name", "source_kind", "hook_source", "depth",
		"team", "team_name", "team_mode", "team_leader", "member_names", "target_member_names", "member_name", "ad_hoc"} {
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("the doc lacks envelope field %q", f)
		}
	}
}
