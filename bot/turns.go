package bot

import (
	"context"
	"time"

	"maunium.net/go/mautrix/event"

	"github.com/hookroom/hookroom/agents"
)

// roomInfo answers the room_info tool for the room of the call.
func (b *Bot) roomInfo(ctx context.Context) (agents.RoomInfo, error) {
	call, _ := agents.ToolCallFrom(ctx)
	info := agents.RoomInfo{RoomID: call.RoomID, ThreadID: call.ThreadID}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var name struct {
		Name string `json:"name"`
	}
	if err := b.router.GetState(ctx, call.RoomID, event.StateRoomName, "", &name); err == nil {
		info.Name = name.Name
	}
	var topic struct {
		Topic string `json:"topic"`
	}
	if err := b.router.GetState(ctx, call.RoomID, event.StateTopic, "", &topic); err == nil {
		info.Topic = topic.Topic
	}
	members, err := b.router.JoinedMembers(ctx, call.RoomID)
	if err != nil {
		return info, err
	}
	info.MemberCount = len(members)
	return info, nil
}
