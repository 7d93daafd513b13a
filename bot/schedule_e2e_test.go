package bot

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/schedule"
	"github.com/hookroom/hookroom/tracking"
)

// scheduleHooks record schedule:fired and who the pipeline thinks sent the
// messages it received.
type scheduleHooks struct {
	mu       sync.Mutex
	fired    []hooks.ScheduleFiredContext
	received []hooks.Envelope
	rewrite  func(context.Context, *hooks.ScheduleFiredContext)
}

func (s *scheduleHooks) hooks() []hooks.Hook {
	return []hooks.Hook{
		hooks.Handle(hooks.ScheduleFired, "fired", func(ctx context.Context, c *hooks.ScheduleFiredContext) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.rewrite != nil {
				s.rewrite(ctx, c)
			}
			s.fired = append(s.fired, *c)
			return nil
		}),
		hooks.Handle(hooks.MessageReceived, "envelopes", func(_ context.Context, c *hooks.MessageReceivedContext) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.received = append(s.received, c.Envelope)
			return nil
		}),
	}
}

func (s *scheduleHooks) firedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.fired {
		out = append(out, c.TaskID+"@"+c.DueAt)
	}
	return out
}

var scheduledIDRE = regexp.MustCompile("Scheduled `([a-z0-9]+)`")

// schedule sends "!schedule …" and returns the new schedule's id, after
// checking that the router answered in the thread the command starts.
func (e *turnEnv) schedule(req string) (taskID string, q id.EventID) {
	e.t.Helper()
	q = e.say("!schedule "+req, "")
	ans := e.waitRouterText("Scheduled", q)
	m := scheduledIDRE.FindStringSubmatch(ans.Body)
	if m == nil {
		e.t.Fatalf("!schedule answered %q", ans.Body)
	}
	return m[1], q
}

// routerMsg is a message of the router as the person's client shows it.
type routerMsg struct {
	ID      id.EventID
	Body    string
	MsgType event.MessageType
}

// waitRouterText waits for a message of the router containing text, in
// the thread of thread (or anywhere for "").
func (e *turnEnv) waitRouterText(text string, thread id.EventID) routerMsg {
	e.t.Helper()
	var found routerMsg
	testkit.Eventually(e.t, 30*time.Second, fmt.Sprintf("a router message containing %q is in thread %q", text, thread), func() bool {
		msgs, err := e.person.Client.Messages(context.Background(), e.room, "", "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			return false
		}
		for _, ev := range msgs.Chunk {
			_ = ev.Content.ParseRaw(ev.Type)
			m := ev.Content.AsMessage()
			if ev.Sender != e.userID("router") || m == nil || !strings.Contains(m.Body, text) {
				continue
			}
			if thread == "" || (m.RelatesTo != nil && m.RelatesTo.GetThreadParent() == thread) {
				found = routerMsg{ID: ev.ID, Body: m.Body, MsgType: m.MsgType}
				return true
			}
		}
		return false
	})
	return found
}

// scheduledMessages returns the messages the router posted for schedules,
// oldest first.
func (e *turnEnv) scheduledMessages() []*event.Event {
	e.t.Helper()
	msgs, err := e.person.Client.Messages(context.Background(), e.room, "", "", mautrix.DirectionBackward, nil, 200)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*event.Event
	for _, ev := range msgs.Chunk {
		if ev.Sender != e.userID("router") || ev.Type != event.EventMessage {
			continue
		}
		if kind, _ := ev.Content.Raw[keySourceKind].(string); kind == string(hooks.SourceScheduled) {
			_ = ev.Content.ParseRaw(ev.Type)
			out = append(out, ev)
		}
	}
	slices.Reverse(out)
	return out
}

// openStore opens the schedules of a stopped bot's SQLite database.
func (e *turnEnv) openStore() (*schedule.Store, *dbutil.Database) {
	e.t.Helper()
	db, err := tracking.OpenSQLite(context.Background(), e.bot.bot.w().cfg.Database.URI.Reveal())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = db.Close() })
	s := schedule.NewStore(db)
	if err := s.Upgrade(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return s, db
}

// restart stops the bot and starts it again on the same configuration and
// database, after between (run while it is stopped), if set.
func (e *turnEnv) restart(between func()) {
	e.t.Helper()
	e.bot.stop(e.t)
	if between != nil {
		between()
	}
	e.bot = e.start(e.config(e.cfg), e.rec, e.opts)
}

// `!schedule in 2 seconds say hi` answers with the schedule, then, in real
// time, fires once: schedule:fired (which may rewrite the text), a router
// message in the command's thread that the pipeline takes as the person's,
// and the agent's answer in that thread.
func TestScheduleFiresOnceInThread(t *testing.T) {
	var sh scheduleHooks
	sh.rewrite = func(ctx context.Context, c *hooks.ScheduleFiredContext) {
		c.MessageText += " (from a hook)"
		// Sent without a thread: it inherits the schedule's.
		if _, err := c.SendMessage(ctx, c.RoomID, "Heads-up from a hook.", nil); err != nil {
			t.Errorf("SendMessage: %v", err)
		}
	}
	e := newTurnEnv(t, []string{"helper", "other"}, "", sh.hooks()...)
	// Two agents: the router's model picks who answers the scheduled message.
	e.llm.On(llmtest.ModelIs("router-model"), llmtest.Text("helper"))
	e.llm.On(llmtest.ModelIs("agent-model"), llmtest.Text("Hi!"), llmtest.Text("Barrier."))
	start := time.Now()
	taskID, q := e.schedule("in 2 seconds say hi")

	if got := e.waitTerminal(1); got[0] != "after:Hi!" {
		t.Fatalf("terminal %v", got)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("fired after %s, before its time", took)
	}
	msgs := e.scheduledMessages()
	if len(msgs) != 1 {
		t.Fatalf("%d scheduled messages, want 1", len(msgs))
	}
	m := msgs[0].Content.AsMessage()
	if m.Body != "say hi (from a hook)" || m.RelatesTo == nil || m.RelatesTo.GetThreadParent() != q {
		t.Errorf("scheduled message %q in %+v, want the hook's text in the thread of %s", m.Body, m.RelatesTo, q)
	}
	if by, _ := msgs[0].Content.Raw[keyOriginalSender].(string); by != string(e.person.UserID) {
		t.Errorf("scheduled message on behalf of %q, want %s", by, e.person.UserID)
	}
	_, _, reply := e.visibleText(e.results[0].EventID)
	if rel := reply.Content.AsMessage().RelatesTo; rel == nil || rel.GetThreadParent() != q {
		t.Errorf("the agent answered outside the thread: %+v", rel)
	}
	e.waitRouterText("Heads-up from a hook.", q)
	if last := string(e.llm.LastRequest(t).Body.Messages[len(e.llm.LastRequest(t).Body.Messages)-1].Content); !strings.Contains(last, "say hi (from a hook)") {
		t.Errorf("the model got %q", last)
	}
	sh.mu.Lock()
	fired := slices.Clone(sh.fired)
	var env hooks.Envelope
	for _, r := range sh.received {
		if r.SourceEventID == msgs[0].ID {
			env = r
		}
	}
	sh.mu.Unlock()
	if len(fired) != 1 || fired[0].TaskID != taskID || fired[0].RoomID != e.room || fired[0].ThreadID != q ||
		fired[0].CreatedBy != e.person.UserID || !strings.HasPrefix(fired[0].Schedule, "once, ") {
		t.Errorf("schedule:fired contexts %+v", fired)
	}
	if due, err := time.Parse(time.RFC3339, fired[0].DueAt); err == nil {
		// How late the message reached the homeserver.
		late := time.UnixMilli(msgs[0].Timestamp).Sub(due)
		t.Logf("scheduled message posted %s after its due time", late)
		if late > 3*time.Second {
			t.Errorf("posted %s late", late)
		}
	} else {
		t.Errorf("due_at %q: %v", fired[0].DueAt, err)
	}
	if env.SourceKind != hooks.SourceScheduled || env.RequesterID != e.person.UserID || env.ThreadID != q {
		t.Errorf("the pipeline got the scheduled message as %+v", env)
	}

	// A barrier in the thread: everything before it was handled, and the
	// schedule did not fire again.
	e.say("thanks", q)
	if got := e.waitTerminal(2); got[1] != "after:Barrier." {
		t.Fatalf("terminal %v", got)
	}
	if n := len(e.scheduledMessages()); n != 1 {
		t.Errorf("%d scheduled messages after the barrier, want 1", n)
	}
	task, err := e.bot.bot.sched.Get(t.Context(), taskID)
	if err != nil || task.State != schedule.StateDone {
		t.Errorf("task after firing: %+v, %v", task, err)
	}
	if f, missed, _ := e.bot.bot.sched.Firings(t.Context(), taskID); f != 1 || missed != 0 {
		t.Errorf("firings %d fired %d missed, want 1 0", f, missed)
	}

	// !schedules lists what is left; !unschedule cancels (the creator).
	rec, _ := e.schedule("every weekday at 9:00 stand-up")
	q2 := e.say("!schedules", "")
	list, _, _ := e.visibleText(e.waitForRouterReply(q2))
	if strings.Contains(list, taskID) || !strings.Contains(list, rec) || !strings.Contains(list, "every weekday at 09:00 (UTC)") {
		t.Errorf("!schedules answered %q", list)
	}
	q3 := e.say("!unschedule "+rec, "")
	if ans, _, _ := e.visibleText(e.waitForRouterReply(q3)); !strings.Contains(ans, "Cancelled schedule `"+rec+"`") {
		t.Errorf("!unschedule answered %q", ans)
	}
	if active, _ := e.bot.bot.sched.Active(t.Context(), e.room); len(active) != 0 {
		t.Errorf("active schedules after !unschedule: %+v", active)
	}
}

// A recurring schedule fires at each due time, in real time, across a
// restart of hookroom: each due time once, none lost.
func TestRecurringScheduleAcrossRestart(t *testing.T) {
	var sh scheduleHooks
	e := newTurnEnv(t, []string{"helper"}, "", sh.hooks()...)
	e.llm.On(llmtest.ModelIs("agent-model"), slices.Repeat([]llmtest.Reply{llmtest.Text("Tick.")}, 20)...)
	taskID, q := e.schedule("every 3 seconds tick")
	e.waitTerminal(1)
	e.restart(func() { // down across a due time: until the next one has passed
		s, _ := e.openStore()
		task, err := s.Get(t.Context(), taskID)
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the next due time passes while hookroom is down", func() bool {
			return time.Now().After(task.NextRun)
		})
	})
	e.waitTerminal(3)
	// Stop the schedule, then wait until no firing is in flight, so the
	// stop below cannot catch one between its claim and its delivery (a
	// slow machine can be at the next due time already).
	s, _ := e.openStore()
	if _, err := s.Cancel(t.Context(), taskID); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "every claimed firing is delivered", func() bool {
		pending, err := s.Undelivered(t.Context())
		return err == nil && len(pending) == 0
	})
	e.bot.stop(t)

	fired := sh.firedIDs()
	if len(fired) < 3 {
		t.Fatalf("fired %v, want at least 3 firings", fired)
	}
	// schedule:fired runs again for a firing whose delivery a stop
	// interrupted; each due time posts once.
	fired = slices.Compact(slices.Sorted(slices.Values(fired)))
	msgs := e.scheduledMessages()
	if len(msgs) != len(fired) {
		t.Errorf("%d scheduled messages for %d due times (%v)", len(msgs), len(fired), fired)
	}
	for _, m := range msgs {
		if rel := m.Content.AsMessage().RelatesTo; rel == nil || rel.GetThreadParent() != q {
			t.Errorf("scheduled message outside the thread: %+v", rel)
		}
	}
	if f, missed, err := s.Firings(t.Context(), taskID); err != nil || f != len(fired) || missed != 0 {
		t.Errorf("stored firings: %d fired %d missed (%v), want %d 0", f, missed, err, len(fired))
	}
	if pending, _ := s.Undelivered(t.Context()); len(pending) != 0 {
		t.Errorf("undelivered firings: %+v", pending)
	}
}

// hookroom stops in the minute a schedule fired, after posting its message
// but before recording the delivery (the worst moment): the restart
// delivers the firing again with the same transaction id, the homeserver
// returns the message already posted, and the agent answers once.
func TestScheduleRestartInDueMinuteFiresOnce(t *testing.T) {
	var sh scheduleHooks
	e := newTurnEnv(t, []string{"helper"}, "", sh.hooks()...)
	e.llm.On(llmtest.ModelIs("agent-model"), llmtest.Text("Done once."), llmtest.Text("Barrier."))
	taskID, q := e.schedule("in 1 second once only")
	if got := e.waitTerminal(1); got[0] != "after:Done once." {
		t.Fatalf("terminal %v", got)
	}
	first := e.scheduledMessages()
	if len(first) != 1 {
		t.Fatalf("%d scheduled messages, want 1", len(first))
	}
	e.restart(func() {
		s, db := e.openStore()
		if _, err := db.Exec(t.Context(), `UPDATE schedule_firing SET delivered_at = 0, event_id = '' WHERE task_id = $1`, taskID); err != nil {
			t.Fatal(err)
		}
		if pending, _ := s.Undelivered(t.Context()); len(pending) != 1 {
			t.Fatalf("undelivered after the simulated crash: %+v", pending)
		}
		_ = db.Close()
	})
	e.waitUntil("the firing is delivered again", func() bool {
		pending, err := e.bot.bot.sched.Undelivered(t.Context())
		return err == nil && len(pending) == 0
	})
	if got := sh.firedIDs(); len(got) != 2 || got[0] != got[1] {
		t.Errorf("schedule:fired ran for %v, want the same firing twice (delivered again)", got)
	}
	e.say("still once?", q)
	if got := e.waitTerminal(2); got[1] != "after:Barrier." {
		t.Fatalf("terminal %v, want only the barrier's answer after the first", got)
	}
	msgs := e.scheduledMessages()
	if len(msgs) != 1 || msgs[0].ID != first[0].ID {
		t.Errorf("scheduled messages after the restart: %d (first %s)", len(msgs), first[0].ID)
	}
	if f, _, _ := e.bot.bot.sched.Firings(t.Context(), taskID); f != 1 {
		t.Errorf("%d firings stored, want 1", f)
	}
}

// Tasks that came due while hookroom was down: one within
// schedules.missed_grace fires once at start, one older is reported as
// missed in its thread (and a recurring one goes on at its next run).
func TestScheduleMissedWhileDown(t *testing.T) {
	var sh scheduleHooks
	e := newTurnEnv(t, []string{"helper"}, "", sh.hooks()...)
	e.llm.On(llmtest.ModelIs("agent-model"), llmtest.Text("Thread A."), llmtest.Text("Thread B."), llmtest.Text("Late but fine."), llmtest.Text("Barrier."))
	qa := e.say("thread a", "")
	e.waitTerminal(1)
	qb := e.say("thread b", "")
	e.waitTerminal(2)
	var recent, old, hourly schedule.Task
	e.restart(func() {
		s, _ := e.openStore()
		now := time.Now()
		add := func(in string, thread id.EventID, created time.Time) schedule.Task {
			spec, msg, err := schedule.Parse(in, created, nil)
			if err != nil {
				t.Fatal(err)
			}
			task, err := s.Add(t.Context(), schedule.Task{
				RoomID: e.room, ThreadID: thread, CreatedBy: e.person.UserID, Spec: spec, Message: msg,
				NextRun: spec.First(created), CreatedAt: created,
			})
			if err != nil {
				t.Fatal(err)
			}
			return task
		}
		recent = add("in 10 minutes within the grace", qa, now.Add(-10*time.Minute-time.Second))
		old = add("in 1 minute long ago", qb, now.Add(-3*time.Hour))
		hourly = add("every 1 hour hourly check", qb, now.Add(-2*time.Hour-30*time.Minute)) // due 1h30 ago
	})
	notice := e.waitRouterText("Missed schedule `"+old.ID+"`", qb)
	if !strings.Contains(notice.Body, "schedules.missed_grace") || notice.MsgType != event.MsgNotice {
		t.Errorf("missed notice %q (%s)", notice.Body, notice.MsgType)
	}
	missedHourly := e.waitRouterText("Missed schedule `"+hourly.ID+"`", qb)
	if !strings.Contains(missedHourly.Body, "Next run: ") {
		t.Errorf("missed notice of the recurring task %q", missedHourly.Body)
	}
	if got := e.waitTerminal(3); got[2] != "after:Late but fine." {
		t.Fatalf("terminal %v", got)
	}
	e.say("barrier", qa)
	if got := e.waitTerminal(4); got[3] != "after:Barrier." {
		t.Fatalf("terminal %v", got)
	}
	msgs := e.scheduledMessages()
	if len(msgs) != 1 || msgs[0].Content.AsMessage().Body != "within the grace" {
		t.Errorf("scheduled messages %d, want only the one within the grace", len(msgs))
	}
	if got := sh.firedIDs(); len(got) != 1 || !strings.HasPrefix(got[0], recent.ID+"@") {
		t.Errorf("schedule:fired for %v, want only %s (missed tasks do not fire)", got, recent.ID)
	}
	ctx := t.Context()
	for _, c := range []struct {
		task          schedule.Task
		fired, missed int
	}{{recent, 1, 0}, {old, 0, 1}, {hourly, 0, 1}} {
		if f, m, err := e.bot.bot.sched.Firings(ctx, c.task.ID); err != nil || f != c.fired || m != c.missed {
			t.Errorf("%s: %d fired %d missed (%v), want %d %d", c.task.Message, f, m, err, c.fired, c.missed)
		}
	}
	if h, _ := e.bot.bot.sched.Get(ctx, hourly.ID); h.State != schedule.StateActive || !h.NextRun.After(time.Now()) {
		t.Errorf("hourly task after the missed run: %s next %s", h.State, h.NextRun)
	}
}

// An unauthorized creator's schedule is not dispatched: the check happens
// when it fires.
func TestScheduleChecksCreatorAtFireTime(t *testing.T) {
	var sh scheduleHooks
	e := newTurnEnv(t, []string{"helper"}, "", sh.hooks()...)
	e.llm.On(llmtest.ModelIs("agent-model"), llmtest.Text("Barrier."))
	mallory := id.UserID(fmt.Sprintf("@mallory-%s:%s", e.suffix, e.hs.ServerName))
	spec, msg, err := schedule.Parse("in 1 second do something", time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	task, err := e.bot.bot.createSchedule(t.Context(), schedule.Task{
		RoomID: e.room, CreatedBy: mallory, Spec: spec, Message: msg, NextRun: spec.First(time.Now()),
	})
	if err != nil {
		t.Fatal(err)
	}
	e.waitUntil("the task is delivered", func() bool {
		got, err := e.bot.bot.sched.Get(t.Context(), task.ID)
		pending, _ := e.bot.bot.sched.Undelivered(t.Context())
		return err == nil && got.State == schedule.StateDone && len(pending) == 0
	})
	e.say("barrier", "")
	if got := e.waitTerminal(1); got[0] != "after:Barrier." {
		t.Fatalf("terminal %v", got)
	}
	if n := len(e.scheduledMessages()); n != 0 || len(sh.firedIDs()) != 0 {
		t.Errorf("%d scheduled messages, schedule:fired %v: want none for an unauthorized creator", n, sh.firedIDs())
	}
}

// An agent creates a schedule with the schedule tool: it is the person's
// (who asked), in the conversation's thread, and when it fires the message
// is addressed to that agent (a mention, no router decision).
func TestAgentScheduleTool(t *testing.T) {
	var sh scheduleHooks
	e := newTurnEnv(t, []string{"helper", "other"}, "    tools: [schedule]\n", sh.hooks()...)
	e.llm.On(llmtest.ModelIs("agent-model"),
		llmtest.Calls(llmtest.ToolCall("c1", "schedule", `{"when":"in 1 second","message":"check the oven"}`)),
		llmtest.Text("I will remind you."),
		llmtest.Text("Oven checked."),
	)
	q := e.say("@"+e.localpart("helper")+" remind me to check the oven in a second", "")
	if got := e.waitTerminal(2); got[0] != "after:I will remind you." || got[1] != "after:Oven checked." {
		t.Fatalf("terminal %v", got)
	}
	reqs := e.llm.Requests()
	toolResult := lastToolMessage(e, 1)
	if !strings.Contains(toolResult, `"id":"`) || !strings.Contains(toolResult, `"next_run":"`) {
		t.Errorf("the tool answered %s", toolResult)
	}
	for _, r := range reqs {
		if r.Body.Model == "router-model" {
			t.Error("the router model was asked; the scheduled message should mention the agent")
		}
	}
	sh.mu.Lock()
	fired := slices.Clone(sh.fired)
	sh.mu.Unlock()
	if len(fired) != 1 || fired[0].Agent != "helper" || fired[0].CreatedBy != e.person.UserID || fired[0].ThreadID != q || fired[0].MessageText != "check the oven" {
		t.Fatalf("schedule:fired %+v", fired)
	}
	msgs := e.scheduledMessages()
	if len(msgs) != 1 {
		t.Fatalf("%d scheduled messages", len(msgs))
	}
	m := msgs[0].Content.AsMessage()
	if m.Mentions == nil || !slices.Contains(m.Mentions.UserIDs, e.userID("helper")) || m.RelatesTo.GetThreadParent() != q {
		t.Errorf("scheduled message mentions %+v in %+v", m.Mentions, m.RelatesTo)
	}
	_, _, reply := e.visibleText(e.results[1].EventID)
	if reply.Sender != e.userID("helper") {
		t.Errorf("answered by %s", reply.Sender)
	}
}

// A request in none of the plain forms goes to the router's model, which
// answers with structured output (a plain form and the message); one the
// model cannot place either gets the forms.
func TestScheduleFromRouterModel(t *testing.T) {
	e := newTurnEnv(t, []string{"helper"}, "")
	e.llm.On(llmtest.ModelIs("router-model"),
		llmtest.Text(`{"when":"every weekday at 8:45","message":"post the stand-up agenda"}`),
		llmtest.Text(`{"when":"","message":""}`),
	)
	taskID, _ := e.schedule("each working day a quarter to nine, post the stand-up agenda")
	task, err := e.bot.bot.sched.Get(t.Context(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	if task.Spec.Cron != "45 8 * * 1-5" || task.Message != "post the stand-up agenda" || task.CreatedBy != e.person.UserID {
		t.Errorf("task %+v", task)
	}
	req := e.llm.Requests()[0]
	if rf := string(req.Body.Fields["response_format"]); !strings.Contains(rf, `"json_schema"`) || !strings.Contains(rf, `"when"`) {
		t.Errorf("response_format %s", rf)
	}
	if sys := string(req.Body.Messages[0].Content); !strings.Contains(sys, "every weekday at HH:MM") || !strings.Contains(sys, "Now is ") {
		t.Errorf("system prompt %q", sys)
	}

	q := e.say("!schedule whenever you feel like it, sing", "")
	if ans := e.waitRouterText("I could not read a time", q); !strings.Contains(ans.Body, "every weekday at 9:00") {
		t.Errorf("answer %q", ans.Body)
	}
	if active, _ := e.bot.bot.sched.Active(t.Context(), e.room); len(active) != 1 {
		t.Errorf("%d active schedules, want 1", len(active))
	}
}
