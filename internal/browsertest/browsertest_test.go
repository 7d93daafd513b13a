package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/internal/browsertest"
	"github.com/hookroom/hookroom/internal/testkit"
)

// TestWatcher shows that a Watcher sees what it is for: a dialog, and the
// inline script and style a strict CSP blocks.
func TestWatcher(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test in headless Chromium: not run with -short")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		switch r.URL.Path {
		case "/alert":
			_, _ = w.Write([]byte(`<p id="p">alert</p><script>alert("hi")</script>`))
		case "/csp":
			w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'")
			_, _ = w.Write([]byte(`<p id="p" style="color:red">x &lt;b&gt;</p><script>document.title = "ran"</script>`))
		default:
			_, _ = w.Write([]byte(`<p id="p">plain <b>text</b></p>`))
		}
	}))
	defer srv.Close()

	ctx := browsertest.New(t)
	w := browsertest.Watch(t, ctx)

	browsertest.Navigate(t, ctx, srv.URL+"/", "#p")
	if got := browsertest.Text(t, ctx, "#p"); got != "plain text" {
		t.Errorf("Text = %q", got)
	}
	if n := browsertest.Count(t, ctx, "b"); n != 1 {
		t.Errorf("Count(b) = %d", n)
	}
	if len(w.Dialogs())+len(w.Problems()) > 0 {
		t.Fatalf("a plain page had dialogs %v or problems %v", w.Dialogs(), w.Problems())
	}

	browsertest.Navigate(t, ctx, srv.URL+"/alert", "#p")
	testkit.Eventually(t, 5*time.Second, "a dialog was seen", func() bool { return len(w.Dialogs()) > 0 })
	if d := w.Dialogs(); !strings.Contains(d[0], "hi") {
		t.Errorf("dialogs %v", d)
	}

	browsertest.Navigate(t, ctx, srv.URL+"/csp", "#p")
	testkit.Eventually(t, 5*time.Second, "both CSP violations were seen", func() bool { return len(w.Problems()) >= 2 })
	if title := browsertest.Eval[string](t, ctx, "document.title"); title == "ran" {
		t.Error("the inline script ran despite the CSP")
	}
	if p := strings.Join(w.Problems(), "\n"); !strings.Contains(p, "CSP violation: script-src") || !strings.Contains(p, "CSP violation: style-src") {
		t.Errorf("CSP violations not seen:\n%s", p)
	}

	shot := filepath.Join(t.TempDir(), "shot.png")
	browsertest.Screenshot(t, ctx, shot)
	if b, err := os.ReadFile(shot); err != nil || !strings.HasPrefix(string(b), "\x89PNG") {
		t.Errorf("screenshot: %v", err)
	}
}
