package bot

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/runes"
	"github.com/hookroom/hookroom/internal/turn"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/schedule"
)

// maxSchedulesPerPerson bounds the active schedules one person has in one
// room, so a loop (or a chatty model with the schedule tool) cannot fill
// the database.
const maxSchedulesPerPerson = 50

// scheduleGrace is the configured schedules.missed_grace (the runner's
// Grace).
func (b *Bot) scheduleGrace() time.Duration { return b.w().scheduleGrace() }

func (w *world) scheduleGrace() time.Duration {
	return time.Duration(w.cfg.Schedules.MissedGrace)
}

// runSchedules fires due schedules until ctx ends.
func (b *Bot) runSchedules(ctx context.Context) {
	log := zerolog.Ctx(ctx).With().Str("component", "schedules").Logger()
	if err := b.schedRunner.Run(log.WithContext(ctx)); err != nil && ctx.Err() == nil {
		log.Error().Err(err).Msg("the schedule runner stopped")
	}
}

// fireSchedule carries out one firing of a schedule (the runner's
// FireFunc). A missed firing posts a notice in the schedule's thread. A
// due one checks that its creator may still talk to agents in the room,
// runs schedule:fired (which may rewrite or suppress the message), and
// posts the message as the room's speaker (the router, where it is in the
// room), marked as scheduled and on behalf of the creator: the router's
// sync brings it back into the pipeline like a message from them. The
// transaction id comes from the firing, so delivering it again after a
// restart never posts twice.
func (b *Bot) fireSchedule(ctx context.Context, f schedule.Firing) (id.EventID, error) {
	t := f.Task
	log := zerolog.Ctx(ctx).With().Str("task", t.ID).Stringer("room_id", t.RoomID).Time("due", f.Due).Logger()
	ctx = log.WithContext(ctx)
	w := b.w() // one world for the whole firing
	acct := b.speakerIn(w, t.RoomID)
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(id.EventID(f.TxnKey()), "schedule"), ThreadRoot: t.ThreadID}
	if t.ThreadID != "" {
		if latest, err := acct.LatestThreadEvent(ctx, t.RoomID, t.ThreadID); err == nil {
			opts.ThreadFallback = latest
		}
	}
	if f.Missed {
		log.Warn().Dur("late", time.Since(f.Due)).Dur("grace", w.scheduleGrace()).Msg("scheduled task missed: not run")
		opts.Notice = true
		evID, err := acct.SendText(ctx, t.RoomID, missedNotice(f, w.scheduleGrace()), opts)
		if err != nil {
			return "", fmt.Errorf("failed to post the missed-schedule notice: %w", err)
		}
		return evID, nil
	}
	if !b.authorized(w, t.CreatedBy, t.RoomID) {
		log.Warn().Stringer("created_by", t.CreatedBy).Msg("scheduled task not run: its creator may no longer talk to agents in this room")
		return "", nil
	}
	text := t.Message
	reg := b.w().reg
	if reg.Has(hooks.ScheduleFired.Name()) {
		c := &hooks.ScheduleFiredContext{
			TaskID: t.ID, Schedule: t.Spec.Desc, RoomID: t.RoomID, ThreadID: t.ThreadID, CreatedBy: t.CreatedBy,
			Agent: t.Agent, DueAt: f.Due.UTC().Format("2006-01-02T15:04:05.000Z07:00"), MessageText: text,
		}
		c.CorrelationID = fmt.Sprintf("schedule:%s:%d", t.ID, f.Due.UnixMilli())
		turn.Emit(ctx, reg, hooks.ScheduleFired, c)
		if c.Suppress {
			log.Info().Msg("scheduled message suppressed by a schedule:fired hook")
			return "", nil
		}
		text = c.MessageText
	}
	if strings.TrimSpace(text) == "" {
		log.Info().Msg("scheduled message left empty by a schedule:fired hook; nothing posted")
		return "", nil
	}
	opts.Extra = map[string]any{
		keySourceKind:     string(hooks.SourceScheduled),
		keyHookSource:     "schedule:" + t.ID,
		keyDepth:          0,
		keyOriginalSender: string(t.CreatedBy),
	}
	if acct := w.agents[t.Agent]; t.Agent != "" && acct != nil {
		opts.Mentions = []id.UserID{acct.UserID()}
	}
	evID, err := acct.SendText(ctx, t.RoomID, text, opts)
	if err != nil {
		return "", fmt.Errorf("failed to post the scheduled message: %w", err)
	}
	log.Info().Stringer("event_id", evID).Msg("scheduled message posted")
	return evID, nil
}

// missedNotice tells the thread that a schedule did not run.
func missedNotice(f schedule.Firing, grace time.Duration) string {
	t := f.Task
	s := fmt.Sprintf("⏰ Missed schedule `%s` (due %s): hookroom was not running then, and it is now more than %s late (schedules.missed_grace), so it was not run.",
		t.ID, schedule.FormatTime(f.Due, t.Spec.Zone), grace)
	if !t.NextRun.IsZero() {
		s += " Next run: " + schedule.FormatTime(t.NextRun, t.Spec.Zone) + "."
	}
	return s
}

// scheduleHelp lists the forms !schedule understands.
const scheduleHelp = "Write `!schedule <when> <message>`, where <when> is one of " + schedule.Forms +
	". `!schedules` lists this room's schedules, `!unschedule ID` cancels one."

// parseSchedule reads a schedule request: a plain form, or, when it is none
// and the router has a model, whatever the model makes of it.
func (b *Bot) parseSchedule(ctx context.Context, w *world, req string, now time.Time) (schedule.Spec, string, error) {
	zone := w.cfg.Schedules.Location()
	spec, msg, err := schedule.Parse(req, now, zone)
	if err == nil || !errors.Is(err, schedule.ErrUnknownForm) {
		return spec, msg, err
	}
	when, text, ok := b.askScheduleModel(ctx, w, req, now, zone)
	if !ok {
		return schedule.Spec{}, "", err
	}
	spec, _, perr := schedule.Parse(when+" x", now, zone)
	if perr != nil {
		zerolog.Ctx(ctx).Info().Str("when", runes.Truncate(when, 80)).Err(perr).Msg("the router model's schedule is not a form hookroom reads")
		return schedule.Spec{}, "", err
	}
	return spec, text, nil
}

// scheduleSchema is the structured output asked of the router's model.
var scheduleSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"when":{"type":"string","description":"the schedule in one of the allowed forms, or empty when the request is no schedule"},` +
	`"message":{"type":"string","description":"the message to post when it fires"}},` +
	`"required":["when","message"],"additionalProperties":false}`)

// askScheduleModel asks the router's model to turn a free-form schedule
// request into one of the plain forms and a message (structured output).
func (b *Bot) askScheduleModel(ctx context.Context, w *world, req string, now time.Time, zone *time.Location) (when, msg string, ok bool) {
	model, found := w.models[w.cfg.Router.Model]
	if !found || w.specs[w.cfg.Router.Model].Provider == agents.ProviderEcho {
		return "", "", false
	}
	system := "You turn a request to schedule a chat message into JSON {\"when\": …, \"message\": …}. " +
		"when must be exactly one of these forms: \"in N minutes|hours|days|weeks\", \"at HH:MM\", \"tomorrow at HH:MM\", " +
		"\"on YYYY-MM-DD at HH:MM\", \"every day at HH:MM\", \"every weekday at HH:MM\", \"every monday[, friday] at HH:MM\", " +
		"\"every N minutes|hours|days\", or \"cron MIN HOUR DOM MONTH DOW\" for anything else recurring. " +
		"message is what to post, without the time words. If the request is not about scheduling, answer with an empty when. " +
		"Now is " + now.In(zone).Format("Monday 2006-01-02 15:04 MST") + " (time zone " + zone.String() + ")."
	r := &agents.Request{
		Messages: []agents.Message{
			{Role: agents.RoleSystem, Content: system},
			{Role: agents.RoleUser, Content: req},
		},
		MaxTokens:      200,
		ResponseSchema: &agents.ResponseSchema{Name: "schedule", Schema: scheduleSchema, Strict: true},
	}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := agents.Complete(rctx, model, r, nil)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("router model failed to read a schedule request")
		return "", "", false
	}
	var out struct {
		When    string `json:"when"`
		Message string `json:"message"`
	}
	text := strings.TrimSpace(c.Text)
	text = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(text, "```json"), "```"), "```")
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &out); err != nil || strings.TrimSpace(out.When) == "" || strings.TrimSpace(out.Message) == "" {
		zerolog.Ctx(ctx).Info().Str("answer", runes.Truncate(c.Text, 120)).Msg("router model made no schedule of the request")
		return "", "", false
	}
	return strings.TrimSpace(out.When), strings.TrimSpace(out.Message), true
}

// createSchedule stores a new schedule and wakes the runner.
func (b *Bot) createSchedule(ctx context.Context, t schedule.Task) (schedule.Task, error) {
	active, err := b.sched.Active(ctx, t.RoomID)
	if err != nil {
		return schedule.Task{}, err
	}
	n := 0
	for _, a := range active {
		if a.CreatedBy == t.CreatedBy {
			n++
		}
	}
	if n >= maxSchedulesPerPerson {
		return schedule.Task{}, fmt.Errorf("you have %d schedules in this room already (the most hookroom keeps per person); cancel one with !unschedule first", n)
	}
	t, err = b.sched.Add(ctx, t)
	if err != nil {
		return schedule.Task{}, err
	}
	zerolog.Ctx(ctx).Info().Str("task", t.ID).Str("schedule", t.Spec.Desc).Time("next_run", t.NextRun).
		Stringer("created_by", t.CreatedBy).Str("agent", string(t.Agent)).Msg("schedule created")
	b.schedRunner.Wake()
	return t, nil
}

// scheduleCommand answers !schedule <when> <message>.
func (b *Bot) scheduleCommand(ctx context.Context, w *world, room id.RoomID, thread id.EventID, requester id.UserID, req string) string {
	req = strings.TrimSpace(req)
	if req == "" {
		return scheduleHelp
	}
	now := time.Now()
	spec, msg, err := b.parseSchedule(ctx, w, req, now)
	if err != nil {
		if errors.Is(err, schedule.ErrUnknownForm) {
			return "I could not read a time in that. " + scheduleHelp
		}
		return "Not scheduled: " + err.Error() + "."
	}
	t, err := b.createSchedule(ctx, schedule.Task{
		RoomID: room, ThreadID: thread, CreatedBy: requester, Spec: spec, Message: msg,
		NextRun: spec.First(now), CreatedAt: now,
	})
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to create a schedule")
		return "Not scheduled: " + err.Error()
	}
	return fmt.Sprintf("⏰ Scheduled `%s`: %s — next run %s. `!unschedule %s` cancels it.",
		t.ID, t.Spec.Desc, schedule.FormatTime(t.NextRun, t.Spec.Zone), t.ID)
}

// schedulesCommand answers !schedules: the active schedules of the room.
func (b *Bot) schedulesCommand(ctx context.Context, w *world, room id.RoomID) string {
	tasks, err := b.sched.Active(ctx, room)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to list schedules")
		return "Could not read the schedules; the log has the details."
	}
	if len(tasks) == 0 {
		return "No schedules in this room. " + scheduleHelp
	}
	var s strings.Builder
	for _, t := range tasks {
		fmt.Fprintf(&s, "- `%s` %s — next %s — by %s", t.ID, t.Spec.Desc, schedule.FormatTime(t.NextRun, t.Spec.Zone), t.CreatedBy)
		if t.Agent != "" {
			fmt.Fprintf(&s, " (via %s)", w.displayName(t.Agent))
		}
		fmt.Fprintf(&s, ": %s\n", runes.Truncate(strings.Join(strings.Fields(t.Message), " "), 120))
	}
	return s.String()
}

// unscheduleCommand answers !unschedule ID: the schedule's creator or a
// global user may cancel it, from its room (global users from anywhere).
func (b *Bot) unscheduleCommand(ctx context.Context, w *world, room id.RoomID, requester id.UserID, args []string) string {
	if len(args) != 1 {
		return "Write `!unschedule ID` (`!schedules` lists the ids)."
	}
	msg, err := b.cancelSchedule(ctx, w, room, requester, strings.Trim(args[0], "`"))
	if err != nil {
		return err.Error()
	}
	return msg
}

// cancelSchedule cancels a schedule for requester, who must be its creator
// or a global user, in its room; errors are meant for the person.
func (b *Bot) cancelSchedule(ctx context.Context, w *world, room id.RoomID, requester id.UserID, taskID string) (string, error) {
	admin := w.isGlobal(requester)
	t, err := b.sched.Get(ctx, taskID)
	if errors.Is(err, schedule.ErrNotFound) || (err == nil && t.RoomID != room && !admin) {
		return "", fmt.Errorf("no schedule %q in this room", taskID)
	}
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to read a schedule")
		return "", errors.New("could not read the schedule; the log has the details")
	}
	if t.CreatedBy != requester && !admin {
		return "", fmt.Errorf("only %s (who created it) or an administrator may cancel schedule %s", t.CreatedBy, t.ID)
	}
	ok, err := b.sched.Cancel(ctx, t.ID)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to cancel a schedule")
		return "", errors.New("could not cancel the schedule; the log has the details")
	}
	if !ok {
		return "", fmt.Errorf("schedule %s is not active (%s)", t.ID, t.State)
	}
	b.schedRunner.Wake()
	zerolog.Ctx(ctx).Info().Str("task", t.ID).Stringer("by", requester).Msg("schedule cancelled")
	return fmt.Sprintf("Cancelled schedule `%s` (%s).", t.ID, t.Spec.Desc), nil
}

// scheduleTool answers the schedule tool for the room, thread, person and
// agent of the call.
func (b *Bot) scheduleTool(ctx context.Context, w *world, a agents.ScheduleArgs) (string, error) {
	call, ok := agents.ToolCallFrom(ctx)
	if !ok || call.RoomID == "" || call.RequesterID == "" {
		return "", errors.New("scheduling needs a conversation with a person")
	}
	switch a.Action {
	case "", "create":
		if strings.TrimSpace(a.When) == "" || strings.TrimSpace(a.Message) == "" {
			return "", errors.New("create needs when and message")
		}
		now := time.Now()
		spec, _, err := schedule.Parse(a.When+" x", now, w.cfg.Schedules.Location())
		if err != nil {
			return "", fmt.Errorf("cannot read when %q: %w; use one of the forms in the tool description", a.When, err)
		}
		t, err := b.createSchedule(ctx, schedule.Task{
			RoomID: call.RoomID, ThreadID: call.ThreadID, CreatedBy: call.RequesterID, Agent: call.Agent,
			Spec: spec, Message: strings.TrimSpace(a.Message), NextRun: spec.First(now), CreatedAt: now,
		})
		if err != nil {
			return "", err
		}
		return toolJSON(map[string]any{"id": t.ID, "schedule": t.Spec.Desc, "next_run": t.NextRun.In(t.Spec.Zone).Format(time.RFC3339)})
	case "list":
		tasks, err := b.sched.Active(ctx, call.RoomID)
		if err != nil {
			return "", errors.New("could not read the schedules")
		}
		type item struct {
			ID        string    `json:"id"`
			Schedule  string    `json:"schedule"`
			NextRun   string    `json:"next_run"`
			CreatedBy id.UserID `json:"created_by"`
			Message   string    `json:"message"`
		}
		out := make([]item, 0, len(tasks))
		for _, t := range tasks {
			out = append(out, item{t.ID, t.Spec.Desc, t.NextRun.In(t.Spec.Zone).Format(time.RFC3339), t.CreatedBy, t.Message})
		}
		return toolJSON(map[string]any{"schedules": out})
	case "cancel":
		msg, err := b.cancelSchedule(ctx, w, call.RoomID, call.RequesterID, strings.TrimSpace(a.ID))
		if err != nil {
			return "", err
		}
		return toolJSON(map[string]any{"cancelled": a.ID, "message": msg})
	}
	return "", fmt.Errorf("unknown action %q: use create, list or cancel", a.Action)
}

func toolJSON(v any) (string, error) {
	out, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("failed to encode the answer: %w", err)
	}
	return string(out), nil
}
