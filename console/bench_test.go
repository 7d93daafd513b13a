package console_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/console/consoletest"
)

// benchConsole is a console over fake backends, signed in.
func benchConsole(b *testing.B) (http.Handler, *http.Cookie, *consoletest.Fake) {
	b.Helper()
	fake := consoletest.New(time.Now())
	h := console.New(fake.Options(func() string { return adminToken }))
	e := &env{t: &testing.T{}, h: h}
	sc, _ := e.signIn(req{})
	return h, sc, fake
}

func benchPage(b *testing.B, h http.Handler, sc *http.Cookie, path string) {
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.AddCookie(sc)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("GET %s: %d", path, w.Code)
		}
	}
}

func BenchmarkOverview(b *testing.B) {
	h, sc, _ := benchConsole(b)
	benchPage(b, h, sc, "/")
}

// BenchmarkTurnInspector renders a turn with 200 hook runs (the trace's
// limit).
func BenchmarkTurnInspector(b *testing.B) {
	h, sc, fake := benchConsole(b)
	fake.AddTurn(consoletest.LargeTrace(100, 200))
	benchPage(b, h, sc, "/turns/100")
}
