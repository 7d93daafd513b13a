package bot

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/browsertest"
	"github.com/hookroom/hookroom/internal/testkit"
)

// consoleToken is the admin token of the console tests; consoleModelKey
// the API key of their model.
const (
	consoleToken    = "console-e2e-admin-token-7f3a9c21"
	consoleModelKey = "sk-console-e2e-model-key-5be0d1"
)

// The operator console on a real hookroom on Dendrite, driven in a real
// headless Chromium: sign in; a person's message shows as a turn with its
// stages and hooks (a transformer's change, a gate's declined tool call);
// a pending approval approved in the console runs the tool and the room
// shows the decision; a schedule cancelled in the console never fires (a
// later one is the barrier); the config editor shows a broken edit's
// config.yaml:LINE error and writes nothing, refuses an edit racing an
// on-disk change, and adds an agent that then answers in its room; no page
// shows a secret; signing out sends every page back to the sign-in form.
func TestConsoleEndToEnd(t *testing.T) {
	polish := func(text string) string { return text + " (checked)" }
	extra := []hooks.Hook{
		hooks.Handle(hooks.MessageBeforeResponse, "polish", func(_ context.Context, c *hooks.BeforeResponseContext) error {
			c.Draft.Text = polish(c.Draft.Text)
			return nil
		}),
		hooks.Handle(hooks.MessageFinalResponseTransform, "polish-final", func(_ context.Context, c *hooks.FinalResponseContext) error {
			c.Draft.Text = polish(c.Draft.Text)
			return nil
		}),
		hooks.Handle(hooks.ToolBeforeCall, "no-clock", func(_ context.Context, c *hooks.ToolBeforeCallContext) error {
			if c.Tool == "current_time" {
				c.Decline("the clock is off limits")
			}
			return nil
		}),
	}
	top := fmt.Sprintf("http:\n  listen: \"127.0.0.1:0\"\n  admin_token: %s\n"+
		"tool_approval:\n  timeout: 5m\n  rules:\n    - tools: [builtin/room_info]\n      action: require_approval\n", consoleToken)
	logs := console.NewLogBuffer(0)
	e := newTurnEnvWith(t, func(e *turnEnv) {
		e.logs = logs
		e.opts.Logs = logs
		e.cfg = strings.Replace(e.cfg, "    model: agent-model\n", "    model: agent-model\n    api_key: "+consoleModelKey+"\n", 1)
	}, top, []string{"helper"}, "    tools: [room_info, current_time]\n", extra...)
	base := "http://" + e.bot.bot.HTTPAddr()

	ctx := browsertest.New(t)
	w := browsertest.Watch(t, ctx)
	browsertest.Navigate(t, ctx, base+"/turns", "#token")
	browsertest.Do(t, ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), consoleToken),
		chromedp.Click(chromedp.CSS("form.signin button")),
	)
	browsertest.WaitVisible(t, ctx, "table.turns")

	// A turn: the gate declines the tool call, the transformer changes the
	// reply; the list shows it shortly after it ended.
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c1", "current_time", `{}`)), llmtest.Text("It is late."))
	e.say("what time is it?", "")
	if got := e.waitTerminal(1); got[0] != "after:"+polish("It is late.") {
		t.Fatalf("terminal %v", got)
	}
	ended := time.Now()
	testkit.Eventually(t, 10*time.Second, "the turn shows in the console's live list", func() bool {
		return browsertest.Count(t, ctx, `table.turns a[href^="/turns/"]`) > 0
	})
	t.Logf("the turn showed in the live list %v after it ended", time.Since(ended).Round(10*time.Millisecond))
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`table.turns a[href^="/turns/"]`)))
	browsertest.WaitVisible(t, ctx, "svg.timeline")
	inspector := browsertest.Text(t, ctx, "main")
	for _, want := range []string{
		"helper", string(e.person.UserID), "responded",
		"routed", "first_token", "final", // stages
		"polish", "changed", `"It is late." → "It is late. (checked)"`, // the transformer's change
		"no-clock", "declined", "the clock is off limits", // the gate
		"message:received", "unchanged", // before the turn: the recorder's observer
		"agent-model", "current_time", // the model requests and the declined tool call
	} {
		if !strings.Contains(inspector, want) {
			t.Errorf("the turn inspector does not show %q:\n%s", want, inspector)
		}
	}

	// An approval answered in the console: the tool runs, the room sees
	// who decided.
	e.llm.Script(llmtest.Calls(llmtest.ToolCall("c2", "room_info", `{}`)), llmtest.Text("This is the main room."))
	q := e.say("which room is this?", "")
	card := e.waitForCard(q, 1)
	e.waitCardRecorded(card.ID)
	browsertest.Navigate(t, ctx, base+"/approvals", "form.decide")
	if text := browsertest.Text(t, ctx, "main"); !strings.Contains(text, "room_info") || !strings.Contains(text, string(e.person.UserID)) {
		t.Errorf("the approvals page shows %q", text)
	}
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="approve"]`)))
	browsertest.WaitVisible(t, ctx, "p.flash")
	if got := e.waitTerminal(2); got[1] != "after:"+polish("This is the main room.") {
		t.Fatalf("terminal %v", got)
	}
	if res := e.lastToolResult(); !strings.Contains(res, string(e.room)) {
		t.Errorf("the model got %q from room_info, want the room", res)
	}
	e.waitCardText(card.ID, "operator in the console")

	// A schedule cancelled in the console never fires: a later one is the
	// barrier.
	cancelled, _ := e.schedule("in 6 seconds say never")
	browsertest.Navigate(t, ctx, base+"/schedules", "main table")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`a.button[href*="`+cancelled+`"]`)))
	browsertest.WaitVisible(t, ctx, "form.confirm")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("form.confirm button")))
	browsertest.WaitVisible(t, ctx, "p.flash")
	e.llm.Script(llmtest.Text("Barrier."))
	barrier, _ := e.schedule("in 8 seconds say barrier")
	if got := e.waitTerminal(3); got[2] != "after:"+polish("Barrier.") { // the barrier fired
		t.Fatalf("terminal %v", got)
	}
	if fired, missed, err := e.bot.bot.sched.Firings(t.Context(), cancelled); err != nil || fired+missed != 0 {
		t.Errorf("the cancelled schedule fired %d times (missed %d): %v", fired, missed, err)
	}
	if fired, _, _ := e.bot.bot.sched.Firings(t.Context(), barrier); fired != 1 {
		t.Errorf("the barrier fired %d times", fired)
	}

	// The config editor: a broken edit shows config.yaml:LINE and writes
	// nothing.
	onDisk := func() []byte {
		b, err := os.ReadFile(e.yaml)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := onDisk()
	browsertest.Navigate(t, ctx, base+"/config", "#config-text")
	shown := browsertest.Eval[string](t, ctx, `document.querySelector("#config-text").value`)
	if strings.Contains(shown, consoleToken) || strings.Contains(shown, consoleModelKey) || !strings.Contains(shown, "${HS_SECRET}") {
		t.Errorf("the editor shows the admin token or lost the ${VAR} reference:\n%s", shown)
	}
	browsertest.Do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#config-text"), shown+"agents_typo: [\n"),
		chromedp.Click(chromedp.CSS(`button[value="save"]`)),
	)
	browsertest.WaitVisible(t, ctx, `[role="alert"]`)
	if text := browsertest.Text(t, ctx, `[role="alert"]`); !strings.Contains(text, "config.yaml:") {
		t.Errorf("a broken edit shows %q, want a config.yaml:LINE error", text)
	}
	if !bytes.Equal(onDisk(), before) {
		t.Fatal("a broken edit changed config.yaml on disk")
	}

	// An edit racing a change on disk is refused.
	browsertest.Navigate(t, ctx, base+"/config", "#config-text")
	raced := append(before, []byte("# changed on disk meanwhile\n")...)
	if err := os.WriteFile(e.yaml, raced, 0o600); err != nil {
		t.Fatal(err)
	}
	browsertest.Do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#config-text"), shown+"# my edit\n"),
		chromedp.Click(chromedp.CSS(`button[value="save"]`)),
	)
	browsertest.WaitVisible(t, ctx, `[role="alert"]`)
	if text := browsertest.Text(t, ctx, `[role="alert"]`); !strings.Contains(text, "changed on disk") {
		t.Errorf("a stale edit shows %q", text)
	}
	if !bytes.Equal(onDisk(), raced) {
		t.Fatal("a stale edit was written")
	}

	// An agent added in the editor answers in its room.
	browsertest.Navigate(t, ctx, base+"/config", "#config-text")
	shown = browsertest.Eval[string](t, ctx, `document.querySelector("#config-text").value`)
	ops := fmt.Sprintf("agents:\n  ops:\n    username: %s\n    rooms: [main]\n    model: agent\n", e.localpart("ops"))
	if !strings.Contains(shown, "\nagents:\n") {
		t.Fatalf("no agents section in\n%s", shown)
	}
	browsertest.Do(t, ctx,
		chromedp.SetValue(chromedp.CSS("#config-text"), strings.Replace(shown, "\nagents:\n", "\n"+ops, 1)),
		chromedp.Click(chromedp.CSS(`button[value="save"]`)),
	)
	browsertest.WaitVisible(t, ctx, "div.flash")
	if text := browsertest.Text(t, ctx, "div.flash"); !strings.Contains(text, "put it in service") || !strings.Contains(text, "ops") {
		t.Errorf("saving the new agent shows %q", text)
	}
	if saved := onDisk(); !bytes.Contains(saved, []byte("admin_token: "+consoleToken)) || !bytes.Contains(saved, []byte("api_key: "+consoleModelKey)) ||
		!bytes.Contains(saved, []byte("  ops:\n")) {
		t.Errorf("config.yaml after the save lost its secret or lacks the agent:\n%s", saved)
	}
	e.llm.Script(llmtest.Text("Ops here."))
	q = e.say("@"+e.localpart("ops")+" are you there?", "")
	reply := e.waitForAgentMessage(q)
	if got := e.waitTerminal(4); got[3] != "after:"+polish("Ops here.") {
		t.Errorf("terminal %v", got)
	}
	if _, _, ev := e.visibleText(reply); ev == nil || ev.Sender != e.userID("ops") {
		t.Errorf("the answer came from %v, want the new agent %s", ev, e.userID("ops"))
	}

	// No page shows a secret; each is there to see (screenshots on demand).
	for _, p := range []struct{ name, path, wait string }{
		{"overview", "/", "#h-accounts"}, {"conversations", "/turns", "table.turns"}, {"turn", "/turns/1", "svg.timeline"},
		{"hooks", "/hooks", "#hook-rows tr"}, {"usage", "/usage", "main h1"}, {"schedules", "/schedules", "main h1"},
		{"approvals", "/approvals", "main h1"}, {"config", "/config", "#config-text"}, {"logs", "/logs", "#log-rows tr"},
	} {
		browsertest.Navigate(t, ctx, base+p.path, p.wait)
		html := browsertest.Eval[string](t, ctx, `document.documentElement.outerHTML + document.querySelector("textarea")?.value`)
		for _, secret := range []string{consoleToken, consoleModelKey, e.hs.Secret} {
			if strings.Contains(html, secret) {
				t.Errorf("%s shows a secret", p.path)
			}
		}
		if os.Getenv("HOOKROOM_SCREENSHOTS") == "1" {
			browsertest.Screenshot(t, ctx, filepath.Join("..", "docs", "console", p.name+".png"))
		}
	}

	// Signing out: every page leads to the sign-in form again.
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("form.signout button")))
	browsertest.WaitVisible(t, ctx, "#token")
	for _, path := range []string{"/", "/turns/1", "/config", "/approvals"} {
		browsertest.Navigate(t, ctx, base+path, "#token")
	}
	// Nothing went wrong in the browser but the refused saves, which the
	// console answers with an error status on purpose.
	w.NoDialogs(t)
	for _, p := range w.Problems() {
		if !strings.Contains(p, "/config") || !(strings.Contains(p, "status of 422") || strings.Contains(p, "status of 409")) {
			t.Errorf("the browser saw a problem: %s", p)
		}
	}
}
