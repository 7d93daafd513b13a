package agents_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

func TestCurrentTime(t *testing.T) {
	fixed := time.Date(2026, time.March, 29, 0, 30, 0, 0, time.UTC) // DST starts in Europe this night
	berlin, _ := time.LoadLocation("Europe/Berlin")
	cases := []struct {
		name    string
		tool    agents.CurrentTime
		args    string
		want    string
		wantErr string
	}{
		{name: "default zone is UTC", args: `{}`,
			want: `{"timezone":"UTC","time":"2026-03-29T00:30:00Z","date":"2026-03-29","weekday":"Sunday","utc_offset":"+00:00","unix":1774744200}`},
		{name: "no arguments at all", args: ``,
			want: `{"timezone":"UTC","time":"2026-03-29T00:30:00Z","date":"2026-03-29","weekday":"Sunday","utc_offset":"+00:00","unix":1774744200}`},
		{name: "asked zone", args: `{"timezone":"America/New_York"}`,
			want: `{"timezone":"America/New_York","time":"2026-03-28T20:30:00-04:00","date":"2026-03-28","weekday":"Saturday","utc_offset":"-04:00","unix":1774744200}`},
		{name: "configured zone", tool: agents.CurrentTime{Zone: berlin}, args: `{}`,
			want: `{"timezone":"Europe/Berlin","time":"2026-03-29T01:30:00+01:00","date":"2026-03-29","weekday":"Sunday","utc_offset":"+01:00","unix":1774744200}`},
		{name: "asked zone wins over configured", tool: agents.CurrentTime{Zone: berlin}, args: `{"timezone":"Asia/Kolkata"}`,
			want: `{"timezone":"Asia/Kolkata","time":"2026-03-29T06:00:00+05:30","date":"2026-03-29","weekday":"Sunday","utc_offset":"+05:30","unix":1774744200}`},
		{name: "unknown zone", args: `{"timezone":"Mars/Olympus_Mons"}`, wantErr: `"Mars/Olympus_Mons" is not an IANA time zone name`},
		{name: "server-local zone refused", args: `{"timezone":"Local"}`, wantErr: "not an IANA time zone name"},
		{name: "path tricks refused", args: `{"timezone":"../../etc/passwd"}`, wantErr: "not an IANA time zone name"},
		{name: "bad arguments", args: `{"timezone":42}`, wantErr: "invalid arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tool := tc.tool
			tool.Now = func() time.Time { return fixed }
			got, err := tool.Call(t.Context(), json.RawMessage(tc.args))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Call = %s, %v\nwant %s", got, err, tc.want)
			}
		})
	}
	if err := agents.ValidateToolSpec(agents.CurrentTime{}.Spec()); err != nil {
		t.Errorf("spec: %v", err)
	}
	if !strings.Contains(agents.CurrentTime{Zone: berlin}.Spec().Description, "Europe/Berlin") {
		t.Errorf("spec does not name the default zone")
	}
}

func TestRoomInfoTool(t *testing.T) {
	tool := agents.RoomInfoTool(func(ctx context.Context) (agents.RoomInfo, error) {
		call, ok := agents.ToolCallFrom(ctx)
		if !ok {
			return agents.RoomInfo{}, errors.New("no call in context")
		}
		if call.RoomID != hooktest.Room {
			return agents.RoomInfo{}, errors.New("wrong room")
		}
		return agents.RoomInfo{RoomID: call.RoomID, Name: "Lobby", Topic: "Say hi", ThreadID: call.ThreadID, MemberCount: 3}, nil
	})
	if tool.Spec().Name != agents.ToolRoomInfo {
		t.Fatalf("name = %q", tool.Spec().Name)
	}
	ts, err := agents.NewToolset(tool)
	if err != nil {
		t.Fatal(err)
	}
	m := &scriptedModel{steps: [][]agents.Event{
		{{Kind: agents.EventToolCalls, ToolCalls: []agents.ToolCall{{ID: "r", Name: agents.ToolRoomInfo, Arguments: "{}"}}}, {Kind: agents.EventFinish, FinishReason: agents.FinishToolCalls}},
		{{Kind: agents.EventText, Text: "done"}, {Kind: agents.EventFinish, FinishReason: agents.FinishStop}},
	}}
	res, err := agents.Run(turnCtx(t.Context()), baseRun(m, ts, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"room_id":"!room:localhost","name":"Lobby","topic":"Say hi","thread_id":"$event:localhost","member_count":3}`
	if res.ToolTrace[0].Result != want {
		t.Errorf("room_info = %s\nwant %s", res.ToolTrace[0].Result, want)
	}
	if _, err := tool.Call(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "no call in context") {
		t.Errorf("outside a turn: %v", err)
	}
	if _, err := agents.RoomInfoTool(nil).Call(t.Context(), nil); err == nil {
		t.Errorf("nil func: no error")
	}
}

func TestToolset(t *testing.T) {
	noop := func(context.Context, json.RawMessage) (string, error) { return "", nil }
	a := agents.NewTool(agents.ToolSpec{Name: "a"}, noop)
	b := agents.NewTool(agents.ToolSpec{Name: "b", Parameters: json.RawMessage(`{"type":"object"}`)}, noop)
	cases := []struct {
		name    string
		tools   []agents.Tool
		wantErr []string
	}{
		{name: "valid", tools: []agents.Tool{a, b, agents.CurrentTime{}}},
		{name: "duplicate", tools: []agents.Tool{a, a}, wantErr: []string{`duplicate tool name "a"`}},
		{name: "bad names and schema, all reported", tools: []agents.Tool{
			agents.NewTool(agents.ToolSpec{Name: "has space"}, noop),
			agents.NewTool(agents.ToolSpec{Name: strings.Repeat("x", 65)}, noop),
			agents.NewTool(agents.ToolSpec{Name: "arr", Parameters: json.RawMessage(`[]`)}, noop),
			nil,
		}, wantErr: []string{`invalid tool name "has space"`, "invalid tool name \"xxxx", `parameters schema of tool "arr"`, "nil tool"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := agents.NewToolset(tc.tools...)
			if len(tc.wantErr) == 0 {
				if err != nil || ts.Len() != len(tc.tools) {
					t.Fatalf("NewToolset = %v, %v", ts, err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	ts, _ := agents.NewToolset(a, b, agents.CurrentTime{})
	if got := strings.Join(ts.Names(), ","); got != "a,b,current_time" {
		t.Errorf("Names = %s", got)
	}
	sel, err := ts.Select("current_time", "a")
	if err != nil || strings.Join(sel.Names(), ",") != "current_time,a" {
		t.Errorf("Select = %v, %v", sel.Names(), err)
	}
	if _, err := ts.Select("a", "nope", "zilch"); err == nil || !strings.Contains(err.Error(), "nope, zilch") {
		t.Errorf("Select unknown = %v", err)
	}
	more, err := ts.With(agents.RoomInfoTool(nil))
	if err != nil || more.Len() != 4 || ts.Len() != 3 {
		t.Errorf("With = %v, %v", more.Names(), err)
	}
	var none *agents.Toolset
	if _, ok := none.Get("a"); ok || none.Len() != 0 || none.Specs() != nil {
		t.Errorf("nil toolset is not empty")
	}
}
