package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
)

// command is a parsed "!name args" message.
type command struct {
	name string
	args []string
}

// parseCommand parses a message that starts with "!". Commands are parsed
// before message:received and run after it (a hook that suppresses the
// message also stops its command).
func parseCommand(body string) (command, bool) {
	body = strings.TrimSpace(body)
	if !strings.HasPrefix(body, "!") || len(body) < 2 {
		return command{}, false
	}
	fields := strings.Fields(body[1:])
	return command{name: strings.ToLower(fields[0]), args: fields[1:]}, true
}

const helpText = `**hookroom** — talk to the agents of this room by mentioning them (@name), or just write: the router picks one. Replies come in a thread; answer in the thread to continue the conversation. React with 🛑 to a reply to stop it.

Commands:
- ` + "`!help`" + ` — this message
- ` + "`!agents`" + ` — the agents in this room
- ` + "`!hooks`" + ` — the hooks in service (admins)
- ` + "`!reload-plugins`" + ` — reload config.yaml and restart every plugin (admins)`

// runCommand answers a command as the router, or, in a room without the
// router (a direct message with an agent), as the room's agent.
func (b *Bot) runCommand(ctx context.Context, ev *event.Event, env hooks.Envelope, cmd command) {
	var reply string
	switch cmd.name {
	case "help":
		reply = helpText
	case "agents":
		var s strings.Builder
		for _, name := range b.agentsIn(ev.RoomID) {
			a := b.w().cfg.Agents[string(name)]
			fmt.Fprintf(&s, "- **%s** (%s): %s\n", cmpOr(a.DisplayName, string(name)), b.w().agents[name].UserID(), cmpOr(a.Role, "no role set"))
		}
		reply = cmpOr(s.String(), "No agents in this room.")
	case "reload-plugins":
		if !slices.Contains(b.w().cfg.Authorization.GlobalUsers, ev.Sender) {
			reply = "Only hookroom's administrators (authorization.global_users) may reload plugins."
			break
		}
		rep, err := b.Reload(ctx, true)
		if err != nil {
			reply = "Reload failed; the running configuration stays in service:\n\n```\n" + err.Error() + "\n```"
		} else {
			reply = fmt.Sprintf("Reloaded in %s: %s.", logDuration(rep.Took), rep.Summary())
		}
	case "hooks":
		if !slices.Contains(b.w().cfg.Authorization.GlobalUsers, ev.Sender) {
			reply = "Only hookroom's administrators (authorization.global_users) may list the hooks."
			break
		}
		var s strings.Builder
		for _, h := range b.live.Load().Hooks() {
			fmt.Fprintf(&s, "- `%s` %s/%s (priority %d, %s)\n", h.Event, h.Plugin, h.Hook, h.Priority, h.Timeout)
		}
		reply = cmpOr(s.String(), "No hooks are registered.")
	default:
		reply = fmt.Sprintf("Unknown command `!%s`. Try `!help`.", cmd.name)
	}
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, "command"), Notice: true}
	if env.ThreadID != "" {
		opts.ThreadRoot = env.ThreadID
	} else {
		opts.ReplyTo = ev.ID
	}
	if _, err := b.speakerIn(ev.RoomID).SendText(ctx, ev.RoomID, reply, opts); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("command", cmd.name).Msg("failed to answer a command")
	}
}
