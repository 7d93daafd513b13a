package hooks_test

import (
	"context"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
)

// A message a room:member_joined hook sends carries no original sender:
// it is the server's own onboarding message, not the new member's.
func TestMemberJoinedMessageHasNoOriginalSender(t *testing.T) {
	var svc hooktest.Services
	reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("welcome",
		hooks.Handle(hooks.RoomMemberJoined, "greet", func(ctx context.Context, c *hooks.RoomMemberContext) error {
			_, err := c.SendMessage(ctx, c.RoomID, "@assistant welcome "+string(c.UserID), &hooks.SendOptions{TriggerDispatch: true})
			return err
		}),
	)}, hooks.Options{Services: svc.Bind()})
	hooktest.Emit(t, reg, hooks.RoomMemberJoined, hooktest.MemberJoined("@newcomer:localhost"))
	sent := svc.Sent()
	if len(sent) != 1 {
		t.Fatalf("sent %d messages, want 1", len(sent))
	}
	if m := sent[0]; m.OriginalSender != "" || !m.TriggerDispatch || m.Event != "room:member_joined" || m.Depth != 1 {
		t.Errorf("sent %+v, want no original sender, trigger dispatch, event room:member_joined, depth 1", m)
	}
}

// A message a schedule:fired hook sends without a thread goes to the
// schedule's thread; an explicit thread, or RoomLevel, wins. Other events
// inherit nothing.
func TestScheduleMessageInheritsThread(t *testing.T) {
	const scheduleThread, other id.EventID = "$schedthread:localhost", "$other:localhost"
	for _, tc := range []struct {
		name string
		opts *hooks.SendOptions
		want id.EventID
	}{
		{"no options", nil, scheduleThread},
		{"options without thread", &hooks.SendOptions{TriggerDispatch: true}, scheduleThread},
		{"explicit thread", &hooks.SendOptions{ThreadID: other}, other},
		{"room level", &hooks.SendOptions{RoomLevel: true}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var svc hooktest.Services
			send := func(ctx context.Context, b *hooks.Base, room id.RoomID) error {
				_, err := b.SendMessage(ctx, room, "tick", tc.opts)
				return err
			}
			reg := hooktest.Registry(t, []hooks.Plugin{hooktest.Plugin("cron",
				hooks.Handle(hooks.ScheduleFired, "post", func(ctx context.Context, c *hooks.ScheduleFiredContext) error {
					return send(ctx, &c.Base, c.RoomID)
				}),
				hooks.Handle(hooks.MessageReceived, "post_reply", func(ctx context.Context, c *hooks.MessageReceivedContext) error {
					return send(ctx, &c.Base, c.Envelope.RoomID)
				}),
			)}, hooks.Options{Services: svc.Bind()})
			hooktest.Emit(t, reg, hooks.ScheduleFired, &hooks.ScheduleFiredContext{
				TaskID: "t1", RoomID: hooktest.Room, ThreadID: scheduleThread, CreatedBy: hooktest.Sender, MessageText: "tick",
			})
			m := hooktest.MessageReceived("hi")
			m.Envelope.ThreadID, m.Envelope.ResolvedThreadID = scheduleThread, scheduleThread
			hooktest.Emit(t, reg, hooks.MessageReceived, m)
			sent := svc.Sent()
			if len(sent) != 2 {
				t.Fatalf("sent %d messages, want 2", len(sent))
			}
			if sent[0].ThreadID != tc.want {
				t.Errorf("schedule:fired message went to thread %q, want %q", sent[0].ThreadID, tc.want)
			}
			wantOther := tc.want
			if tc.opts == nil || tc.opts.ThreadID == "" {
				wantOther = ""
			}
			if sent[1].ThreadID != wantOther {
				t.Errorf("message:received message went to thread %q, want %q (nothing inherited)", sent[1].ThreadID, wantOther)
			}
		})
	}
}
