package bot

import (
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// A dispatched hook message acts for the original sender it names, who
// must be authorized in the room. A message naming none (a
// room:member_joined hook welcoming someone not yet authorized) is the
// server's own: it is dispatched without an authorization check, and the
// turn is attributed to the account that posted it.
func TestHookMessageRequester(t *testing.T) {
	const router = id.UserID("@router:example.org")
	tests := []struct {
		name     string
		original id.UserID // the message's com.hookroom.original_sender
		want     id.UserID
		ok       bool
	}{
		{"an authorized original sender", aliceUser, aliceUser, true},
		{"an original sender who may not talk to agents here", malloryOut, "", false},
		{"no original sender (room:member_joined)", "", router, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := offlineBot(t, `authorization: {room_permissions: {"!other:example.org": ["@alice:example.org"]}}`+"\n")
			content := map[string]any{
				"msgtype": "m.text", "body": "@helper welcome @mallory:elsewhere.org",
				keySourceKind: string(hooks.SourceHookDispatch), keyHookSource: "welcome:room:member_joined", keyDepth: 1,
			}
			if tt.original != "" {
				content[keyOriginalSender] = string(tt.original)
			}
			ev := &event.Event{ID: "$hook", RoomID: otherRoom, Sender: router, Type: event.EventMessage,
				Content: event.Content{Raw: content}}
			o, isHook := hookOriginOf(ev)
			if !isHook || o.kind != hooks.SourceHookDispatch {
				t.Fatalf("hookOriginOf = %+v, %v; want a hook_dispatch origin", o, isHook)
			}
			got, ok := b.hookRequester(b.w(), ev, o)
			if ok != tt.ok || (ok && got != tt.want) {
				t.Errorf("hookRequester = %s, %v; want %s, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}
