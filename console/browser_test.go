package console_test

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/console/consoletest"
	"github.com/hookroom/hookroom/internal/browsertest"
	"github.com/hookroom/hookroom/internal/testkit"
)

// browserConsole serves a console over fake backends and signs in to it
// through the form in a headless Chromium.
func browserConsole(t *testing.T, fake *consoletest.Fake) (context.Context, *browsertest.Watcher, string) {
	t.Helper()
	srv := httptest.NewServer(console.New(fake.Options(func() string { return adminToken })))
	t.Cleanup(srv.Close)
	ctx := browsertest.New(t)
	w := browsertest.Watch(t, ctx)

	// A page without a session leads to the sign-in form, and back.
	browsertest.Navigate(t, ctx, srv.URL+"/turns", "#token")
	browsertest.Do(t, ctx,
		chromedp.SendKeys(chromedp.CSS("#token"), adminToken),
		chromedp.Click(chromedp.CSS("form.signin button")),
	)
	browsertest.WaitVisible(t, ctx, "table.turns")
	if loc := browsertest.Eval[string](t, ctx, "location.pathname"); loc != "/turns" {
		t.Fatalf("after sign-in at %s, want /turns", loc)
	}
	return ctx, w, srv.URL
}

// TestConsoleInChromium signs in, opens every page, acts on the ones with
// buttons and checks that everything a person or a plugin wrote (full of
// XSS here) shows as text, with no dialog, no error and no CSP violation.
func TestConsoleInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test in headless Chromium: not run with -short")
	}
	fake := consoletest.NewEvil(time.Now())
	ctx, w, base := browserConsole(t, fake)

	// A new turn shows in the live list within about a second.
	fake.AddTurn(consoletest.SampleTrace(4, time.Now()))
	added := time.Now()
	testkit.Eventually(t, 3*time.Second, "a new turn shows in the list", func() bool {
		return browsertest.Count(t, ctx, `a[href="/turns/4"]`) > 0
	})
	t.Logf("a new turn showed in the list after %v", time.Since(added).Round(10*time.Millisecond))

	for _, p := range []struct {
		path, wait string
		// want is text the page's main element has.
		want []string
		// xss: the page shows a backend string full of XSS.
		xss bool
	}{
		{"/", "#h-accounts", []string{"not ready", "@helper:example.org", "HELPERDEV", "#lobby:example.org", "geo", "filesystem", "agents +ops"}, true},
		{"/turns", "table.turns", []string{"@alice:example.org", "responded"}, false},
		{"/turns/2", "svg.timeline", []string{"$event2", "approval_required", "abandoned", "gpt-4o-mini", "response_text: 'Hi' → 'Hello'", "12°C", "placeholder"}, true},
		{"/hooks", "#hook-rows tr", []string{"message:enrich", "fail_closed", "2.00 s"}, true},
		{"/usage", "figure.chart svg", []string{"Tokens per day", "@alice:example.org", "45,900"}, true},
		{"/schedules", "main table", []string{"every day at 09:00"}, true},
		{"/approvals", "form.decide", []string{"shell", "rm -rf /tmp/cache"}, true},
		{"/config", "#config-text", []string{"/etc/hookroom/config.yaml"}, true},
		{"/logs", "#log-rows tr", []string{"Agent ready", "Process plugin restarted"}, true},
	} {
		browsertest.Navigate(t, ctx, base+p.path, p.wait)
		text := browsertest.Text(t, ctx, "main")
		if p.path == "/config" {
			text += browsertest.Eval[string](t, ctx, `document.querySelector("#config-text").value`)
		}
		for _, want := range p.want {
			if !strings.Contains(text, want) {
				t.Errorf("%s does not show %q", p.path, want)
			}
		}
		if p.xss && (!strings.Contains(text, consoletest.ScriptXSS) || !strings.Contains(text, consoletest.AttrXSS)) {
			t.Errorf("%s does not show the XSS strings as text", p.path)
		}
		if n := browsertest.Count(t, ctx, "img, [onerror], main script"); n > 0 {
			t.Errorf("%s has %d injected elements", p.path, n)
		}
		// console.js ran (under the CSP) and put times in the local zone.
		if n := browsertest.Count(t, ctx, "time[datetime]"); n > 0 && browsertest.Count(t, ctx, `time[data-local="1"]`) != n {
			t.Errorf("%s: console.js did not localize the times", p.path)
		}
	}

	// Act: approve the call, cancel the schedule, preview the config.
	browsertest.Navigate(t, ctx, base+"/approvals", "form.decide")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`button[value="approve"]`)))
	browsertest.WaitVisible(t, ctx, "p.flash")
	if got := fake.Decided; len(got) != 1 || !got[0].Approve || got[0].By != console.Operator {
		t.Errorf("decided %+v", got)
	}
	browsertest.Navigate(t, ctx, base+"/schedules", "a.button")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("a.button")))
	browsertest.WaitVisible(t, ctx, "form.confirm")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("form.confirm button")))
	browsertest.WaitVisible(t, ctx, "p.flash")
	if got := fake.Cancelled; len(got) != 1 || got[0].ID != "s1" {
		t.Errorf("cancelled %+v", got)
	}
	browsertest.Navigate(t, ctx, base+"/config", "#config-text")
	browsertest.Do(t, ctx,
		chromedp.SendKeys(chromedp.CSS("#config-text"), "\ninvalid: yes"),
		chromedp.Click(chromedp.CSS(`button[value="preview"]`)),
	)
	browsertest.WaitVisible(t, ctx, "section.preview")
	if text := browsertest.Text(t, ctx, "section.preview"); !strings.Contains(text, "unknown field") || !strings.Contains(text, "+invalid: yes") {
		t.Errorf("preview shows %q", text)
	}
	if len(fake.Saved) != 0 {
		t.Error("preview saved the config")
	}
	// The logs' level filter.
	browsertest.Navigate(t, ctx, base+"/logs?level=error", "#log-rows tr")
	if text := browsertest.Text(t, ctx, "#log-rows"); !strings.Contains(text, "Hook failed") || strings.Contains(text, "Agent ready") {
		t.Errorf("error logs show %q", text)
	}
	// The live list refreshes (twice) under the CSP without a problem: wait
	// for the swaps themselves, counted by a listener.
	browsertest.Eval[bool](t, ctx, `window.__swaps = 0; document.body.addEventListener("htmx:afterSwap", () => window.__swaps++); true`)
	testkit.Eventually(t, 10*time.Second, "the logs' live list refreshed twice", func() bool {
		return browsertest.Eval[float64](t, ctx, `window.__swaps`) >= 2
	})

	// Sign out.
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS("form.signout button")))
	browsertest.WaitVisible(t, ctx, "#token")
	browsertest.Navigate(t, ctx, base+"/", "#token")

	w.Clean(t)
}

// TestConsoleScreenshots writes a screenshot of each page over the fake
// backends' sample data to docs/console/<page>.png when
// HOOKROOM_SCREENSHOTS=1.
func TestConsoleScreenshots(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test in headless Chromium: not run with -short")
	}
	if os.Getenv("HOOKROOM_SCREENSHOTS") != "1" {
		t.Skip("screenshots are taken with HOOKROOM_SCREENSHOTS=1")
	}
	ctx, w, base := browserConsole(t, consoletest.New(time.Now()))
	for name, p := range map[string]string{
		"overview": "/", "conversations": "/turns", "turn": "/turns/2", "hooks": "/hooks", "usage": "/usage",
		"schedules": "/schedules", "approvals": "/approvals", "config": "/config", "logs": "/logs",
	} {
		browsertest.Navigate(t, ctx, base+p, "main h1")
		browsertest.Screenshot(t, ctx, filepath.Join("..", "docs", "console", name+".png"))
	}
	w.Clean(t)
}
