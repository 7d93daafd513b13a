package memory

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

// callTool runs one agent turn in which the scripted model calls tool with
// args for person in room, and returns what the tool answered the model.
func callTool(t *testing.T, s *Store, person id.UserID, room id.RoomID, tool, args string) string {
	t.Helper()
	srv := llmtest.NewServer(t,
		llmtest.Reply{Calls: []llmtest.Call{{ID: "call_1", Name: tool, Arguments: args}}},
		llmtest.Reply{Text: []string{"done"}})
	model, err := agents.NewModel(agents.ModelSpec{BaseURL: srv.URL, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	ts, err := agents.NewToolset(Tools(s, nil)...)
	if err != nil {
		t.Fatal(err)
	}
	// Where the turn happens travels in the context, as the bot sets it.
	ctx := hooks.WithWhere(t.Context(), hooks.Where{Agent: helper, RoomID: room, RequesterID: person})
	res, err := agents.Run(ctx, agents.RunRequest{
		Model: model, Tools: ts,
		Messages: []agents.Message{{Role: agents.RoleUser, Content: "hi"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Messages {
		if m.Role == agents.RoleTool {
			return m.Content
		}
	}
	t.Fatalf("no tool result in %+v", res.Messages)
	return ""
}

// The tools act for the tool call's requester, whatever the model puts in
// the arguments.
func TestTools(t *testing.T) {
	dbtest.ForStores(t, newStore(nil), func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		out := callTool(t, s, alice, roomA, ToolRemember, `{"text":"Alice's cat is called Mochi"}`)
		var r struct {
			ID    string `json:"id"`
			Scope Scope  `json:"scope"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || r.Scope != ScopePerson || r.ID == "" {
			t.Fatalf("remember answered %s", out)
		}
		list, _ := s.List(ctx, Who{Agent: helper, Person: alice, Room: roomB})
		if len(list) != 1 || list[0].ID != r.ID || list[0].Source != SourceTool {
			t.Errorf("alice's memories: %+v", list)
		}
		if out := callTool(t, s, alice, roomA, ToolRemember, `{"text":"Alice's cat is called Mochi"}`); !strings.Contains(out, `"already_remembered":true`) {
			t.Errorf("remember again answered %s", out)
		}
		if out := callTool(t, s, alice, roomA, ToolRecall, `{"query":"cat name"}`); !strings.Contains(out, "Mochi") || !strings.Contains(out, r.ID) {
			t.Errorf("recall for alice answered %s", out)
		}
		if out := callTool(t, s, bob, roomA, ToolRecall, `{"query":"cat Mochi"}`); out != `{"memories":[]}` {
			t.Errorf("recall for bob answered %s", out)
		}
		if out := callTool(t, s, bob, roomA, ToolForget, `{"id":"`+r.ID+`"}`); !strings.Contains(out, "no memory") {
			t.Errorf("bob's forget answered %s", out)
		}
		if out := callTool(t, s, alice, roomA, ToolRemember, `{"text":"x","person":"@bob:x"}`); !strings.Contains(out, "invalid arguments") {
			t.Errorf("remember with a made-up person answered %s", out)
		}
		if out := callTool(t, s, alice, roomA, ToolForget, `{"id":"`+r.ID+`"}`); !strings.Contains(out, `"forgotten":"`+r.ID+`"`) {
			t.Errorf("alice's forget answered %s", out)
		}
		if list, _ := s.List(ctx, Who{Agent: helper, Person: alice, Room: roomA}); len(list) != 0 {
			t.Errorf("after forget: %+v", list)
		}
	})
}

func TestToolsNeedAToolCall(t *testing.T) {
	s := New(dbtest.SQLite.Fresh(t), Config{}, nil)
	for _, tool := range Tools(s, nil) {
		if err := agents.ValidateToolSpec(tool.Spec()); err != nil {
			t.Error(err)
		}
		if _, err := tool.Call(context.Background(), json.RawMessage(`{}`)); err == nil {
			t.Errorf("%s ran outside a tool call", tool.Spec().Name)
		}
	}
	if len(Tools(s, nil)) != 3 {
		t.Error("want remember, recall and forget")
	}
}
