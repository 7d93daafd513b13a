package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Timeout bounds each helper's wait (a navigation, a selector, a
// screenshot).
const Timeout = 20 * time.Second

// lockedBuffer is the browser's output, read when a start fails.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Path returns the Chromium binary tests run: $HOOKROOM_CHROMIUM, or the
// first of chromium, chromium-browser, google-chrome on $PATH (and
// /usr/bin/chromium).
func Path() (string, error) {
	if p := os.Getenv("HOOKROOM_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("HOOKROOM_CHROMIUM=%s: %w", p, err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "/usr/bin/chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no Chromium found (apt-get install chromium, or set HOOKROOM_CHROMIUM)")
}

// New starts a headless Chromium for t and returns the context of a tab in
// it, for chromedp's actions and this package's helpers. The browser and its
// profile directory go away when t ends. A missing or broken Chromium fails
// t at once.
func New(t testing.TB) context.Context {
	t.Helper()
	bin, err := Path()
	if err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	out := &lockedBuffer{}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox, // root in CI: Chromium's sandbox refuses to run as root
		chromedp.Flag("headless", "new"),
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("lang", "en-US"),
		chromedp.WindowSize(1280, 900),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.CombinedOutput(out),
	)
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); acancel() })

	started := make(chan error, 1)
	go func() { started <- chromedp.Do(ctx) }() // starts the browser, bound to ctx
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("browsertest: failed to start %s: %v\n%s", bin, err, out.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("browsertest: %s did not start within a minute\n%s", bin, out.String())
	}
	return ctx
}

// Watcher records a tab's JavaScript dialogs (dismissing each), uncaught
// exceptions, console errors, browser log errors and Content-Security-Policy
// violations.
type Watcher struct {
	mu       sync.Mutex
	dialogs  []string
	problems []string
}

// cspProbe runs in every document before its own scripts: it reports each
// CSP violation on the console, where the Watcher sees it. The browser runs
// it outside the page's CSP.
const cspProbe = `document.addEventListener("securitypolicyviolation", function (e) {
  console.error("CSP violation: " + e.violatedDirective + " blocked " + (e.blockedURI || "inline") + " at " + e.sourceFile + ":" + e.lineNumber);
});`

// Watch starts recording what happens in ctx's tab; call it before the
// first navigation.
func Watch(t testing.TB, ctx context.Context) *Watcher {
	t.Helper()
	w := &Watcher{}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: cspProbe}); err != nil {
		t.Fatalf("browsertest: failed to add the CSP probe: %v", err)
	}
	err := chromedp.Listen(ctx, func(ev any) {
		switch ev := ev.(type) {
		case *page.EventJavascriptDialogOpening:
			w.add(&w.dialogs, fmt.Sprintf("%s dialog: %q", ev.Type, ev.Message))
			go func() { // the page is blocked until the dialog closes; not from the listener
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			w.add(&w.problems, fmt.Sprintf("exception: %s at %s:%d", msg, d.URL, d.LineNumber))
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var parts []string
				for _, a := range ev.Args {
					if a.Value != nil {
						parts = append(parts, strings.Trim(string(a.Value), `"`))
					} else {
						parts = append(parts, a.Description)
					}
				}
				w.add(&w.problems, "console."+string(ev.Type)+": "+strings.Join(parts, " "))
			}
		case *cdplog.EventEntryAdded:
			e := ev.Entry
			if e.Level == cdplog.EntryLevelError || e.Source == cdplog.EntrySourceSecurity || strings.Contains(e.Text, "Content Security Policy") {
				w.add(&w.problems, fmt.Sprintf("browser log (%s, %s): %s %s", e.Source, e.Level, e.Text, e.URL))
			}
		}
	})
	if err != nil {
		t.Fatalf("browsertest: failed to listen to the tab: %v", err)
	}
	return w
}

func (w *Watcher) add(to *[]string, s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*to = append(*to, s)
}

// Dialogs returns the dialogs that opened so far.
func (w *Watcher) Dialogs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.dialogs...)
}

// Problems returns the exceptions, errors and CSP violations so far.
func (w *Watcher) Problems() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.problems...)
}

// NoDialogs fails t if a JavaScript dialog opened.
func (w *Watcher) NoDialogs(t testing.TB) {
	t.Helper()
	if d := w.Dialogs(); len(d) > 0 {
		t.Errorf("browsertest: JavaScript dialogs opened:\n%s", strings.Join(d, "\n"))
	}
}

// Clean fails t if a dialog opened or the page threw, logged an error or
// violated its CSP.
func (w *Watcher) Clean(t testing.TB) {
	t.Helper()
	w.NoDialogs(t)
	if p := w.Problems(); len(p) > 0 {
		t.Errorf("browsertest: the page had problems:\n%s", strings.Join(p, "\n"))
	}
}

// Navigate loads url in ctx's tab and waits until an element matching the
// CSS selector sel is visible.
func Navigate(t testing.TB, ctx context.Context, url, sel string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("browsertest: navigate to %s and wait for %q: %v\n%s", url, sel, err, bodyText(ctx))
	}
}

// WaitVisible waits until an element matching the CSS selector sel is
// visible.
func WaitVisible(t testing.TB, ctx context.Context, sel string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(tctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("browsertest: wait for %q: %v\n%s", sel, err, bodyText(ctx))
	}
}

// Do runs chromedp actions in ctx's tab (clicks, keys, waits), failing t on
// an error.
func Do(t testing.TB, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(tctx, actions...); err != nil {
		t.Fatalf("browsertest: %v\n%s", err, bodyText(ctx))
	}
}

// Eval evaluates a JavaScript expression in the page (outside its CSP) and
// returns its value.
func Eval[T any](t testing.TB, ctx context.Context, expr string) T {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(tctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("browsertest: evaluate %s: %v", expr, err)
	}
	return v
}

// Text returns the textContent of the first element matching the CSS
// selector sel ("" when none does) — the text as the DOM has it, which is
// what a person reads.
func Text(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	return Eval[string](t, ctx, fmt.Sprintf(`(function(){ var e = document.querySelector(%q); return e ? e.textContent : ""; })()`, sel))
}

// Count returns how many elements match the CSS selector sel.
func Count(t testing.TB, ctx context.Context, sel string) int {
	t.Helper()
	return Eval[int](t, ctx, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel))
}

// bodyText is the page's text for failure messages, cut short.
func bodyText(ctx context.Context) string {
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	s, err := chromedp.Run(tctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		return ""
	}
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return "page text:\n" + s
}

// Screenshot writes a full-page PNG screenshot of ctx's tab to path,
// creating its directory.
func Screenshot(t testing.TB, ctx context.Context, path string) {
	t.Helper()
	tctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	png, err := chromedp.Run(tctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("browsertest: screenshot: %v", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatalf("browsertest: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatalf("browsertest: failed to write the screenshot: %v", err)
	}
}
