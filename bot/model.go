package bot

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/prefs"
)

const modelHelp = "`!model` shows the model this thread runs on; `!model list` the models; in a thread, `!model NAME` switches the thread and `!model reset` undoes it; `!model room NAME` (or `reset`) sets the room's default."

// modelCommand answers !model: the model a conversation runs on, chosen
// per thread or per room (package prefs). model:resolve hooks see the
// choice and may still route the turn elsewhere.
func (b *Bot) modelCommand(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, cmd command, admin bool) string {
	log := zerolog.Ctx(ctx)
	room, thread := ev.RoomID, env.ThreadID
	if len(cmd.args) == 0 {
		return b.currentModel(ctx, w, room, thread)
	}
	if cmd.args[0] == "list" {
		names := slices.Sorted(maps.Keys(w.cfg.Models))
		var s strings.Builder
		s.WriteString("Models:\n")
		for _, n := range names {
			m := w.cfg.Models[n]
			fmt.Fprintf(&s, "- **%s** (%s %s)\n", n, m.Provider, m.Model)
		}
		return s.String()
	}
	switch w.cfg.Defaults.ModelCommand {
	case config.ModelCommandOff:
		return "Choosing models from chat is turned off here (defaults.model_command)."
	case config.ModelCommandAdmins:
		if !admin {
			return "Only hookroom's administrators (authorization.global_users) may choose models here."
		}
	}
	args := cmd.args
	level := prefs.LevelThread
	if args[0] == "room" {
		level, args, thread = prefs.LevelRoom, args[1:], ""
	}
	if len(args) != 1 {
		return "Usage: " + modelHelp
	}
	if level == prefs.LevelThread && thread == "" {
		return "`!model NAME` chooses the model of a thread: send it in the thread, or use `!model room NAME` for the whole room."
	}
	where := "this thread"
	if level == prefs.LevelRoom {
		where = "this room"
	}
	if args[0] == "reset" {
		had, err := b.prefs.Reset(ctx, room, thread, prefs.Model)
		if err != nil {
			log.Error().Err(err).Msg("failed to reset a !model choice")
			return "⚠️ The choice could not be reset; try again."
		}
		if !had {
			return "No model was chosen for " + where + "."
		}
		log.Info().Str("level", string(level)).Msg("!model choice reset")
		return "Reset: " + where + " runs on the agents' configured models again" + b.roomDefaultNote(ctx, room, level) + "."
	}
	name := args[0]
	if _, ok := w.cfg.Models[name]; !ok {
		return fmt.Sprintf("There is no model %q. `!model list` shows the models.", name)
	}
	if err := b.prefs.Set(ctx, room, thread, prefs.Model, name, ev.Sender); err != nil {
		log.Error().Err(err).Msg("failed to store a !model choice")
		return "⚠️ The choice could not be stored; try again."
	}
	log.Info().Str("model", name).Str("level", string(level)).Msg("!model choice stored")
	return fmt.Sprintf("From now on %s runs on **%s**.", where, name)
}

// currentModel says which model a conversation runs on and why.
func (b *Bot) currentModel(ctx context.Context, w *world, room id.RoomID, thread id.EventID) string {
	st, ok, err := b.prefs.Effective(ctx, room, thread, prefs.Model)
	if err != nil {
		zerolog.Ctx(ctx).Error().Err(err).Msg("failed to read a !model choice")
		return "⚠️ The choice could not be read; try again."
	}
	if !ok {
		var parts []string
		for _, name := range b.agentsOf(w, room) {
			parts = append(parts, fmt.Sprintf("%s on **%s**", w.displayName(name), w.cfg.Agents[string(name)].Model))
		}
		return "No model was chosen here: each agent runs on its own (" + strings.Join(parts, ", ") + "). " + modelHelp
	}
	return fmt.Sprintf("This %s runs on **%s** (chosen by %s with `!model`). %s", st.Level(), st.Value, st.SetBy, modelHelp)
}

// roomDefaultNote mentions the room's model when a thread's choice was
// reset and the room has one.
func (b *Bot) roomDefaultNote(ctx context.Context, room id.RoomID, level prefs.Level) string {
	if level != prefs.LevelThread {
		return ""
	}
	if st, ok, err := b.prefs.Effective(ctx, room, "", prefs.Model); err == nil && ok {
		return " (the room's default, **" + st.Value + "**, applies)"
	}
	return ""
}
