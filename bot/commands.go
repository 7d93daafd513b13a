package bot

import (
	"cmp"
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/runes"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/prefs"
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
- ` + "`!model [NAME|list|reset]`" + ` — the model this thread runs on; ` + "`!model room NAME|reset`" + ` the room's default
- ` + "`!schedule <when> <message>`" + ` — post a message later in this thread, for you: ` + "`in 10 minutes …`, `tomorrow at 9:00 …`, `every weekday at 9:00 …`, `every 15 minutes …`, `cron \"*/5 * * * *\" …`" + `
- ` + "`!schedules`" + ` — this room's schedules; ` + "`!unschedule ID`" + ` cancels one (its creator or admins)
- ` + "`!usage`" + ` — the tokens each agent used in this room today and this month, and yours today against your daily budget; ` + "`!usage all`" + ` for every room (admins)
- ` + "`!config [AGENT KEY VALUE]`" + ` — show this room's agents' model, instructions and tools, or propose a change to config.yaml that your ✅ applies (admins; when defaults.config_command is on)
- ` + "`!hooks`" + ` — the hooks in service (admins)
- ` + "`!e2ee`" + ` — each account's device, cross-signing and key backup, and undecryptable messages in the last hour (admins)
- ` + "`!pair CODE`" + ` — let the person who got pairing code CODE talk to the agent in direct messages (admins); ` + "`!pairings`" + ` lists pairings and waiting codes, ` + "`!unpair AGENT @user`" + ` ends one
- ` + "`!reload-plugins`" + ` — reload config.yaml and restart every plugin (admins)`

// runCommand answers a command as the router, or, in a room without the
// router (a direct message with an agent), as the room's agent.
func (b *Bot) runCommand(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, cmd command) {
	var reply string
	thread := env.ThreadID
	admin := w.isGlobal(ev.Sender)
	switch cmd.name {
	case "help":
		reply = helpText
		for _, c := range w.plugins.Commands() {
			reply += "\n- `!" + c.Name + "` — " + c.Help + " (" + c.Plugin + ")"
		}
	case "agents":
		var s strings.Builder
		for _, name := range b.agentsOf(w, ev.RoomID) {
			a := w.cfg.Agents[string(name)]
			fmt.Fprintf(&s, "- **%s** (%s): %s; model %s\n", cmp.Or(a.DisplayName, string(name)), w.agents[name].UserID(), cmp.Or(a.Role, "no role set"), a.Model)
		}
		if st, ok, err := b.prefs.Effective(ctx, ev.RoomID, env.ThreadID, prefs.Model); err == nil && ok {
			fmt.Fprintf(&s, "\nHere they run on **%s** (`!model`, set by %s for this %s).\n", st.Value, st.SetBy, st.Level())
		}
		reply = cmp.Or(s.String(), "No agents in this room.")
	case "reload-plugins":
		if !admin {
			reply = "Only hookroom's administrators (authorization.global_users) may reload plugins."
			break
		}
		rep, err := b.Reload(ctx, true)
		if err != nil {
			logErrors(zerolog.Ctx(ctx), zerolog.WarnLevel, err, "configuration not reloaded; the running one stays in service")
			reply = reloadFailureSummary(err)
		} else {
			reply = fmt.Sprintf("Reloaded in %s: %s.", logDuration(rep.Took), rep.Summary())
		}
	case "schedule":
		// The answer starts the thread the schedule posts in.
		thread = env.ResolvedThreadID
		_, req, _ := strings.Cut(strings.TrimSpace(env.Body), " ")
		reply = b.scheduleCommand(ctx, w, ev.RoomID, env.ResolvedThreadID, env.RequesterID, req)
	case "schedules":
		reply = b.schedulesCommand(ctx, w, ev.RoomID)
	case "unschedule":
		reply = b.unscheduleCommand(ctx, w, ev.RoomID, env.RequesterID, cmd.args)
	case "usage":
		reply = b.usageCommand(ctx, w, ev.RoomID, env.RequesterID, cmd.args, admin)
	case "hooks":
		if !admin {
			reply = "Only hookroom's administrators (authorization.global_users) may list the hooks."
			break
		}
		var s strings.Builder
		for _, h := range b.w().reg.Hooks() {
			fmt.Fprintf(&s, "- `%s` %s/%s (priority %d, %s)\n", h.Event, h.Plugin, h.Hook, h.Priority, h.Timeout)
		}
		reply = cmp.Or(s.String(), "No hooks are registered.")
	case "e2ee":
		reply = b.e2eeCommand(ctx, w, ev, admin)
	case "model":
		reply = b.modelCommand(ctx, w, ev, env, cmd, admin)
	case "config":
		b.configCommand(ctx, w, ev, env) // posts its answer itself
		return
	case "pair", "pairings", "unpair":
		if !admin {
			reply = "Only hookroom's administrators (authorization.global_users) may pair people with agents."
			break
		}
		reply = b.pairingCommand(ctx, w, ev, cmd)
	default:
		reply = b.pluginCommand(ctx, w, ev, env, cmd, admin)
	}
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, "command"), Notice: true}
	if thread != "" {
		opts.ThreadRoot = thread
	} else {
		opts.ReplyTo = ev.ID
	}
	if _, err := b.speakerIn(w, ev.RoomID).SendText(ctx, ev.RoomID, reply, opts); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("command", cmd.name).Msg("failed to answer a command")
	}
}

// Bounds of the reload failure summary posted in a room.
const (
	summaryProblems    = 3
	summaryProblemSize = 240
)

// absPath matches the directory part of an absolute path (after the start
// or a space, quote or bracket), which a summary posted in a room leaves out.
var absPath = regexp.MustCompile(`(^|[\s"'(\[])(/[^\s"'():\[\]]+)*/`)

// reloadFailureSummary is what !reload-plugins posts when the reload
// failed: how many problems, the first few (file names without their
// directories, each shortened), and a pointer to the log, which has the
// full report. Configuration values from ${VAR} are already masked in the
// errors themselves.
func reloadFailureSummary(err error) string {
	errs := splitErrors(err)
	var b strings.Builder
	fmt.Fprintf(&b, "Reload failed (%d problem%s); the running configuration stays in service. The log has the full report.\n\n```\n",
		len(errs), map[bool]string{true: "", false: "s"}[len(errs) == 1])
	for i, e := range errs {
		if i == summaryProblems {
			break
		}
		line := strings.Join(strings.Fields(e.Error()), " ")
		line = absPath.ReplaceAllString(line, "$1")
		b.WriteString(runes.Truncate(line, summaryProblemSize) + "\n")
	}
	b.WriteString("```")
	if n := len(errs) - summaryProblems; n > 0 {
		fmt.Fprintf(&b, "\nand %d more.", n)
	}
	return b.String()
}

// pluginCommand runs a command a plugin provides (plugins.CommandProvider:
// !memory, !knowledge), or says the command is unknown.
func (b *Bot) pluginCommand(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, cmd command, admin bool) string {
	c, ok := w.plugins.Command(cmd.name)
	if !ok {
		return fmt.Sprintf("Unknown command `!%s`. Try `!help`.", cmd.name)
	}
	encrypted, err := b.roomEncrypted(ctx, ev.RoomID)
	if err != nil {
		encrypted = true
	}
	out, err := c.Call(ctx, plugins.CommandRequest{
		Room: ev.RoomID, Thread: env.ThreadID, Sender: ev.Sender, Args: cmd.args, Admin: admin,
		Encrypted: encrypted, Agents: b.agentsOf(w, ev.RoomID),
	})
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("command", cmd.name).Str("plugin", c.Plugin).Msg("a plugin's command failed")
		return fmt.Sprintf("⚠️ `!%s` failed; the log has the details.", cmd.name)
	}
	return out
}
