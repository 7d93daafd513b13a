package console_test

import (
	"bytes"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/console/consoletest"
	"github.com/hookroom/hookroom/trace"
)

const adminToken = "adm1n-T0KEN-never-rendered"

// env is a console over fake backends, with a clock and an admin token the
// test controls.
type env struct {
	t    *testing.T
	h    http.Handler
	fake *consoletest.Fake

	mu    sync.Mutex
	now   time.Time
	token string
	log   bytes.Buffer
}

func newEnv(t *testing.T, mod ...func(*console.Options)) *env {
	t.Helper()
	e := &env{t: t, now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC), token: adminToken}
	e.fake = consoletest.NewEvil(e.now)
	o := e.fake.Options(func() string { e.mu.Lock(); defer e.mu.Unlock(); return e.token })
	o.Now = func() time.Time { e.mu.Lock(); defer e.mu.Unlock(); return e.now }
	for _, m := range mod {
		m(&o)
	}
	e.h = console.New(o)
	return e
}

func (e *env) advance(d time.Duration) { e.mu.Lock(); e.now = e.now.Add(d); e.mu.Unlock() }
func (e *env) setToken(s string)       { e.mu.Lock(); e.token = s; e.mu.Unlock() }

// req is one request to the console.
type req struct {
	method, path string
	form         url.Values
	cookies      []*http.Cookie
	header       map[string]string
	tls          bool
	remote       string
}

func (e *env) do(r req) *httptest.ResponseRecorder {
	e.t.Helper()
	var body *strings.Reader
	if r.form != nil {
		body = strings.NewReader(r.form.Encode())
	} else {
		body = strings.NewReader("")
	}
	if r.method == "" {
		r.method = http.MethodGet
	}
	hr := httptest.NewRequest(r.method, r.path, body)
	if r.form != nil {
		hr.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range r.header {
		hr.Header.Set(k, v)
	}
	for _, c := range r.cookies {
		hr.AddCookie(c)
	}
	if r.tls {
		hr.TLS = &tls.ConnectionState{}
	}
	if r.remote != "" {
		hr.RemoteAddr = r.remote
	}
	log := zerolog.New(&e.log)
	hr = hr.WithContext(log.WithContext(hr.Context()))
	w := httptest.NewRecorder()
	e.h.ServeHTTP(w, hr)
	return w
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func csrfOf(t *testing.T, body string) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", body)
	}
	return m[1]
}

func cookieOf(w *httptest.ResponseRecorder, name string) *http.Cookie {
	for _, c := range w.Result().Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// signIn signs in through the form and returns the session cookie and the
// session's CSRF token.
func (e *env) signIn(r req) (*http.Cookie, string) {
	e.t.Helper()
	page := e.do(req{path: "/signin", tls: r.tls, remote: r.remote})
	form := url.Values{"csrf": {csrfOf(e.t, page.Body.String())}, "token": {adminToken}, "next": {"/"}}
	w := e.do(req{method: http.MethodPost, path: "/signin", form: form, cookies: page.Result().Cookies(), tls: r.tls, remote: r.remote})
	if w.Code != http.StatusSeeOther {
		e.t.Fatalf("sign-in: %d %s", w.Code, w.Body)
	}
	sc := cookieOf(w, "hookroom_session")
	if sc == nil {
		e.t.Fatal("sign-in set no session cookie")
	}
	home := e.do(req{path: "/", cookies: []*http.Cookie{sc}})
	if home.Code != http.StatusOK {
		e.t.Fatalf("overview after sign-in: %d", home.Code)
	}
	return sc, csrfOf(e.t, home.Body.String())
}

// pages are every GET route that needs a session.
var pages = []string{
	"/", "/turns", "/turns?agent=helper&part=rows", "/turns/1", "/hooks", "/hooks?part=rows", "/usage", "/usage?days=30",
	"/schedules", "/schedules?cancel=s1", "/approvals", "/config", "/logs", "/logs?level=warn&part=rows",
}

// posts are every POST route that needs a session, with a valid form
// (less the CSRF token).
var posts = []req{
	{path: "/signout", form: url.Values{}},
	{path: "/schedules", form: url.Values{"id": {"s1"}}},
	{path: "/approvals", form: url.Values{"id": {"a1"}, "decision": {"approve"}}},
	{path: "/config", form: url.Values{"action": {"preview"}, "text": {"x: 1"}, "version": {"v"}}},
}

func TestConsoleOffWithoutToken(t *testing.T) {
	e := newEnv(t)
	e.setToken("")
	all := append([]string{"/signin", "/assets/htmx.min.js", "/assets/console.css"}, pages...)
	for _, p := range all {
		if w := e.do(req{path: p}); w.Code != http.StatusNotFound {
			t.Errorf("GET %s without an admin token: %d, want 404", p, w.Code)
		}
	}
	for _, p := range append(posts, req{path: "/signin", form: url.Values{"token": {""}}}) {
		p.method = http.MethodPost
		if w := e.do(p); w.Code != http.StatusNotFound {
			t.Errorf("POST %s without an admin token: %d, want 404", p.path, w.Code)
		}
	}
}

func TestWithoutSession(t *testing.T) {
	e := newEnv(t)
	for _, p := range pages {
		w := e.do(req{path: p})
		if w.Code != http.StatusSeeOther {
			t.Errorf("GET %s: %d, want 303", p, w.Code)
			continue
		}
		if loc, want := w.Header().Get("Location"), "/signin?next="+url.QueryEscape(p); loc != want {
			t.Errorf("GET %s: Location %q, want %q", p, loc, want)
		}
		if w := e.do(req{path: p, header: map[string]string{"HX-Request": "true"}}); w.Code != http.StatusUnauthorized {
			t.Errorf("htmx GET %s: %d, want 401", p, w.Code)
		}
	}
	for _, p := range posts {
		p.method = http.MethodPost
		if w := e.do(p); w.Code != http.StatusUnauthorized {
			t.Errorf("POST %s: %d, want 401", p.path, w.Code)
		}
	}
	// A cookie that names no session is no session.
	bogus := &http.Cookie{Name: "hookroom_session", Value: "made-up"}
	if w := e.do(req{path: "/", cookies: []*http.Cookie{bogus}}); w.Code != http.StatusSeeOther {
		t.Errorf("GET / with a made-up session: %d, want 303", w.Code)
	}
	// Assets need no session.
	for _, a := range []string{"/assets/htmx.min.js", "/assets/console.js", "/assets/console.css"} {
		if w := e.do(req{path: a}); w.Code != http.StatusOK {
			t.Errorf("GET %s: %d, want 200", a, w.Code)
		}
	}
	if w := e.do(req{path: "/assets/nope.js"}); w.Code != http.StatusNotFound {
		t.Errorf("GET a missing asset: %d, want 404", w.Code)
	}
}

func TestCSRF(t *testing.T) {
	e := newEnv(t)
	sc, csrf := e.signIn(req{})
	for _, p := range posts {
		for _, tc := range []struct {
			name, form, header string
		}{
			{name: "none"},
			{name: "wrong field", form: csrf + "x"},
			{name: "wrong header", header: "nope"},
		} {
			r := p
			r.method, r.cookies = http.MethodPost, []*http.Cookie{sc}
			r.form = url.Values{}
			for k, v := range p.form {
				r.form[k] = v
			}
			if tc.form != "" {
				r.form.Set("csrf", tc.form)
			}
			if tc.header != "" {
				r.header = map[string]string{"X-CSRF-Token": tc.header}
			}
			if w := e.do(r); w.Code != http.StatusForbidden {
				t.Errorf("POST %s with CSRF %s: %d, want 403", p.path, tc.name, w.Code)
			}
		}
	}
	// The header htmx sends is accepted as well as the field.
	w := e.do(req{method: http.MethodPost, path: "/config", cookies: []*http.Cookie{sc},
		form: url.Values{"action": {"preview"}, "text": {"a: 1"}}, header: map[string]string{"X-CSRF-Token": csrf}})
	if w.Code != http.StatusOK {
		t.Errorf("POST /config with the X-CSRF-Token header: %d, want 200", w.Code)
	}
	// The sign-in form's own token.
	page := e.do(req{path: "/signin"})
	tok := csrfOf(t, page.Body.String())
	for _, tc := range []struct {
		name    string
		cookies []*http.Cookie
		field   string
	}{
		{"no cookie", nil, tok},
		{"no field", page.Result().Cookies(), ""},
		{"other field", page.Result().Cookies(), tok + "x"},
	} {
		w := e.do(req{method: http.MethodPost, path: "/signin", cookies: tc.cookies, form: url.Values{"csrf": {tc.field}, "token": {adminToken}}})
		if w.Code != http.StatusForbidden {
			t.Errorf("sign-in with %s: %d, want 403", tc.name, w.Code)
		}
	}
}

func TestCookieFlags(t *testing.T) {
	for _, tc := range []struct {
		name       string
		publicURL  string
		tls        bool
		wantSecure bool
	}{
		{"plain http", "http://console.example.org", false, false},
		{"no public URL", "", false, false},
		{"TLS", "", true, true},
		{"https public URL behind a proxy", "https://console.example.org", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(o *console.Options) { o.PublicURL = tc.publicURL })
			page := e.do(req{path: "/signin", tls: tc.tls})
			form := url.Values{"csrf": {csrfOf(t, page.Body.String())}, "token": {adminToken}}
			w := e.do(req{method: http.MethodPost, path: "/signin", form: form, cookies: page.Result().Cookies(), tls: tc.tls})
			for _, name := range []string{"hookroom_signin", "hookroom_session"} {
				var c *http.Cookie
				if name == "hookroom_signin" {
					c = cookieOf(page, name)
				} else {
					c = cookieOf(w, name)
				}
				if c == nil {
					t.Fatalf("no cookie %s", name)
				}
				if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure != tc.wantSecure {
					t.Errorf("%s: HttpOnly=%v SameSite=%v Path=%q Secure=%v; want HttpOnly, Strict, /, Secure=%v",
						name, c.HttpOnly, c.SameSite, c.Path, c.Secure, tc.wantSecure)
				}
			}
			if c := cookieOf(w, "hookroom_session"); len(c.Value) < 43 {
				t.Errorf("session id %q is shorter than 32 random bytes", c.Value)
			}
		})
	}
}

func TestSessionExpiry(t *testing.T) {
	e := newEnv(t, func(o *console.Options) { o.SessionTTL = time.Hour })
	sc, _ := e.signIn(req{})
	e.advance(59 * time.Minute)
	if w := e.do(req{path: "/", cookies: []*http.Cookie{sc}}); w.Code != http.StatusOK {
		t.Fatalf("GET / before expiry: %d", w.Code)
	}
	e.advance(time.Minute)
	if w := e.do(req{path: "/", cookies: []*http.Cookie{sc}}); w.Code != http.StatusSeeOther {
		t.Fatalf("GET / after expiry: %d, want 303", w.Code)
	}
}

func TestDefaultSessionTTL(t *testing.T) {
	e := newEnv(t)
	sc, _ := e.signIn(req{})
	if sc.MaxAge != int(console.DefaultSessionTTL/time.Second) {
		t.Errorf("cookie Max-Age %d, want %v", sc.MaxAge, console.DefaultSessionTTL)
	}
	e.advance(console.DefaultSessionTTL - time.Second)
	if w := e.do(req{path: "/", cookies: []*http.Cookie{sc}}); w.Code != http.StatusOK {
		t.Fatalf("GET / before 12h: %d", w.Code)
	}
	e.advance(time.Second)
	if w := e.do(req{path: "/", cookies: []*http.Cookie{sc}}); w.Code != http.StatusSeeOther {
		t.Fatalf("GET / after 12h: %d, want 303", w.Code)
	}
}

func TestTokenChangeEndsSessions(t *testing.T) {
	e := newEnv(t)
	sc, _ := e.signIn(req{})
	e.setToken("a-new-token")
	if w := e.do(req{path: "/", cookies: []*http.Cookie{sc}}); w.Code != http.StatusSeeOther {
		t.Fatalf("GET / after the token changed: %d, want 303", w.Code)
	}
	// Changing it back does not bring the session back either.
	e.setToken(adminToken)
	if w := e.do(req{path: "/", cookies: []*http.Cookie{sc}}); w.Code != http.StatusSeeOther {
		t.Fatalf("GET / after the token changed back: %d, want 303", w.Code)
	}
}

func TestSignOut(t *testing.T) {
	e := newEnv(t)
	sc, csrf := e.signIn(req{})
	w := e.do(req{method: http.MethodPost, path: "/signout", cookies: []*http.Cookie{sc}, form: url.Values{"csrf": {csrf}}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/signin" {
		t.Fatalf("sign-out: %d to %q", w.Code, w.Header().Get("Location"))
	}
	if c := cookieOf(w, "hookroom_session"); c == nil || c.MaxAge >= 0 {
		t.Errorf("sign-out did not clear the cookie: %v", c)
	}
	if w := e.do(req{path: "/", cookies: []*http.Cookie{sc}}); w.Code != http.StatusSeeOther {
		t.Errorf("GET / after sign-out: %d, want 303", w.Code)
	}
}

func TestSignInRateLimit(t *testing.T) {
	e := newEnv(t)
	attempt := func(remote, token string) *httptest.ResponseRecorder {
		page := e.do(req{path: "/signin", remote: remote})
		form := url.Values{"csrf": {csrfOf(t, page.Body.String())}, "token": {token}}
		return e.do(req{method: http.MethodPost, path: "/signin", form: form, cookies: page.Result().Cookies(), remote: remote})
	}
	const wrong = "guess-WRONG-token"
	for i := range 5 {
		if w := attempt("192.0.2.1:1234", wrong); w.Code != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d: %d, want 401", i+1, w.Code)
		}
	}
	w := attempt("192.0.2.1:5678", adminToken)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("sign-in after 5 failures: %d, want 429", w.Code)
	}
	if ra := w.Header().Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After %q", ra)
	}
	// Another client is not limited.
	if w := attempt("198.51.100.7:1", adminToken); w.Code != http.StatusSeeOther {
		t.Errorf("sign-in of another client: %d, want 303", w.Code)
	}
	e.advance(time.Minute)
	if w := attempt("192.0.2.1:1234", adminToken); w.Code != http.StatusSeeOther {
		t.Errorf("sign-in a minute later: %d, want 303", w.Code)
	}
	logged := e.log.String()
	if !strings.Contains(logged, "sign-in failed") || !strings.Contains(logged, "192.0.2.1") {
		t.Errorf("failed sign-ins not logged with the client:\n%s", logged)
	}
	if strings.Contains(logged, wrong) || strings.Contains(logged, adminToken) {
		t.Errorf("the log has a submitted token:\n%s", logged)
	}
}

func TestSignInNext(t *testing.T) {
	for _, tc := range []struct{ next, want string }{
		{"/turns?agent=helper", "/turns?agent=helper"},
		{"/turns/1", "/turns/1"},
		{"//evil.example/x", "/"},
		{"https://evil.example/", "/"},
		{"/\\evil.example", "/"},
		{"javascript:alert(1)", "/"},
		{"", "/"},
	} {
		e := newEnv(t)
		page := e.do(req{path: "/signin?next=" + url.QueryEscape(tc.next)})
		form := url.Values{"csrf": {csrfOf(t, page.Body.String())}, "token": {adminToken}, "next": {tc.next}}
		w := e.do(req{method: http.MethodPost, path: "/signin", form: form, cookies: page.Result().Cookies()})
		if loc := w.Header().Get("Location"); loc != tc.want {
			t.Errorf("next %q: redirected to %q, want %q", tc.next, loc, tc.want)
		}
	}
}

func TestSecurityHeaders(t *testing.T) {
	e := newEnv(t)
	sc, _ := e.signIn(req{})
	for _, p := range append([]string{"/signin", "/assets/console.css"}, pages...) {
		w := e.do(req{path: p, cookies: []*http.Cookie{sc}})
		h := w.Header()
		csp := h.Get("Content-Security-Policy")
		if csp != console.ContentSecurityPolicy || strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("%s: CSP %q", p, csp)
		}
		if h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "no-referrer" {
			t.Errorf("%s: headers %v", p, h)
		}
		if !strings.HasPrefix(p, "/assets/") && h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q", p, h.Get("Cache-Control"))
		}
	}
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'", "object-src 'none'", "base-uri 'none'", "frame-ancestors 'none'", "form-action 'self'"} {
		if !strings.Contains(console.ContentSecurityPolicy, want) {
			t.Errorf("CSP lacks %q", want)
		}
	}
}

// TestPagesRenderSafely renders every page with a session over backends
// full of XSS: the admin token never appears, no backend string reaches the
// page unescaped, and no page has inline script or style.
func TestPagesRenderSafely(t *testing.T) {
	e := newEnv(t)
	sc, csrf := e.signIn(req{})
	bodies := map[string]string{}
	for _, p := range pages {
		w := e.do(req{path: p, cookies: []*http.Cookie{sc}})
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", p, w.Code, w.Body)
		}
		bodies["GET "+p] = w.Body.String()
	}
	w := e.do(req{method: http.MethodPost, path: "/config", cookies: []*http.Cookie{sc},
		form: url.Values{"csrf": {csrf}, "action": {"preview"}, "text": {"invalid: " + consoletest.XSS}, "version": {"x"}}})
	bodies["POST /config"] = w.Body.String()
	bodies["GET /turns/999"] = e.do(req{path: "/turns/999", cookies: []*http.Cookie{sc}}).Body.String()
	bodies["GET /signin"] = e.do(req{path: "/signin"}).Body.String()

	inline := regexp.MustCompile(`(?i)<script>|<script [^>]*>[^<]|<[^>]*\sstyle=|<[^>]*\son[a-z]+=|<style`)
	for name, b := range bodies {
		if strings.Contains(b, adminToken) {
			t.Errorf("%s renders the admin token", name)
		}
		if strings.Contains(b, "<script>alert") || strings.Contains(b, "<img src=x") {
			t.Errorf("%s renders backend data as HTML", name)
		}
		if m := inline.FindString(b); m != "" {
			t.Errorf("%s has inline script or style: %q", name, m)
		}
	}
	for _, want := range []string{"GET /", "GET /turns/1", "GET /hooks", "GET /schedules", "GET /approvals", "GET /logs", "GET /config", "GET /usage"} {
		if !strings.Contains(bodies[want], "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s does not show the XSS string as text", want)
		}
	}
}

func TestPagesShowTheirData(t *testing.T) {
	e := newEnv(t)
	sc, _ := e.signIn(req{})
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/", []string{"not ready", "first sync not caught up", "@helper:example.org", "HELPERDEV", "backing off: 502", "#lobby:example.org", "encrypted", "invited", "geo", "4242", "filesystem", "agents &#43;ops", "unknown field", "v0.9.0-test"}},
		{"/turns", []string{`href="/turns/3"`, "@alice:example.org", "responded", `hx-trigger="every 1s"`, "3 failed"}},
		{"/turns?agent=nobody", []string{"No turns match this filter"}},
		{"/turns/2", []string{"https://matrix.to/#/%21lobby:example.org/$event2", "1.84 s", "fx-approval-required", "fx-abandoned", "response_text", "gpt-4o-mini", "Berlin", "12°C", "approved", "placeholder", "<svg class=\"timeline\""}},
		{"/hooks", []string{"message:enrich", "fail_closed", "every 2s", "weather", "2.00 s"}},
		{"/usage", []string{"Tokens per day", "Tokens per agent", "@alice:example.org", "45,900", "<rect"}},
		{"/schedules", []string{"every day at 09:00", `href="/schedules?cancel=s1"`}},
		{"/schedules?cancel=s1", []string{"Yes, cancel it"}},
		{"/approvals", []string{"shell", "rm -rf /tmp/cache", `value="approve"`, `value="deny"`}},
		{"/config", []string{"matrix.example.org", `name="version"`, "Preview"}},
		{"/logs", []string{"Agent ready", "agent=helper", "Process plugin restarted", "every 2s"}},
		{"/logs?level=error", []string{"Hook failed"}},
	} {
		b := e.do(req{path: tc.path, cookies: []*http.Cookie{sc}}).Body.String()
		for _, w := range tc.want {
			if !strings.Contains(b, w) {
				t.Errorf("%s lacks %q", tc.path, w)
			}
		}
	}
	if b := e.do(req{path: "/logs?level=error", cookies: []*http.Cookie{sc}}).Body.String(); strings.Contains(b, "Agent ready") {
		t.Error("the error level shows info lines")
	}
	if w := e.do(req{path: "/turns/999", cookies: []*http.Cookie{sc}}); w.Code != http.StatusNotFound {
		t.Errorf("a missing turn: %d, want 404", w.Code)
	}
	if w := e.do(req{path: "/turns/abc", cookies: []*http.Cookie{sc}}); w.Code != http.StatusNotFound {
		t.Errorf("a bad turn id: %d, want 404", w.Code)
	}
	// The rows fragment is not a whole page.
	if b := e.do(req{path: "/turns?part=rows", cookies: []*http.Cookie{sc}}).Body.String(); strings.Contains(b, "<html") || !strings.Contains(b, "/turns/1") {
		t.Errorf("the rows fragment:\n%s", b)
	}
}

func TestNotAvailable(t *testing.T) {
	e := newEnv(t, func(o *console.Options) {
		*o = console.Options{Token: o.Token, Now: o.Now}
	})
	sc, _ := e.signIn(req{})
	for _, p := range []string{"/", "/turns", "/hooks", "/usage", "/schedules", "/approvals", "/config", "/logs"} {
		w := e.do(req{path: p, cookies: []*http.Cookie{sc}})
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Not available") {
			t.Errorf("GET %s without a backend: %d\n%s", p, w.Code, w.Body)
		}
	}
}

func TestActions(t *testing.T) {
	e := newEnv(t)
	sc, csrf := e.signIn(req{})
	post := func(path string, form url.Values) *httptest.ResponseRecorder {
		form.Set("csrf", csrf)
		return e.do(req{method: http.MethodPost, path: path, form: form, cookies: []*http.Cookie{sc}})
	}
	if w := post("/approvals", url.Values{"id": {"a1"}, "decision": {"deny"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("deny: %d %s", w.Code, w.Body)
	}
	if got := e.fake.Decided; len(got) != 1 || got[0] != (consoletest.Decision{ID: "a1", Approve: false, By: console.Operator}) {
		t.Errorf("decisions %+v", got)
	}
	if b := e.do(req{path: "/approvals?done=denied", cookies: []*http.Cookie{sc}}).Body.String(); !strings.Contains(b, "The call was denied.") || !strings.Contains(b, "No tool call is waiting") {
		t.Errorf("approvals after deciding:\n%s", b)
	}
	if w := post("/approvals", url.Values{"id": {"a1"}, "decision": {"approve"}}); w.Code != http.StatusUnprocessableEntity {
		t.Errorf("deciding twice: %d, want 422", w.Code)
	}
	if w := post("/schedules", url.Values{"id": {"s1"}}); w.Code != http.StatusSeeOther {
		t.Fatalf("cancel: %d %s", w.Code, w.Body)
	}
	if got := e.fake.Cancelled; len(got) != 1 || got[0].ID != "s1" || got[0].By != console.Operator {
		t.Errorf("cancelled %+v", got)
	}

	cfg := e.do(req{path: "/config", cookies: []*http.Cookie{sc}}).Body.String()
	version := regexp.MustCompile(`name="version" value="([^"]+)"`).FindStringSubmatch(cfg)[1]
	w := post("/config", url.Values{"action": {"preview"}, "text": {"a: 1\ninvalid: 2\n"}, "version": {version}})
	if b := w.Body.String(); !strings.Contains(b, "config.yaml:2: unknown field") || !strings.Contains(b, `<span class="add">&#43;a: 1</span>`) {
		t.Errorf("preview:\n%s", b)
	}
	if len(e.fake.Saved) != 0 {
		t.Fatal("preview saved")
	}
	if w := post("/config", url.Values{"action": {"save"}, "text": {"invalid: 2\n"}, "version": {version}}); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "nothing was written") {
		t.Errorf("saving an invalid edit: %d\n%s", w.Code, w.Body)
	}
	if w := post("/config", url.Values{"action": {"save"}, "text": {"a: 1\n"}, "version": {"stale"}}); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "changed on disk") {
		t.Errorf("saving a stale edit: %d\n%s", w.Code, w.Body)
	}
	w = post("/config", url.Values{"action": {"save"}, "text": {"a: 1\r\n"}, "version": {version}})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "agents: changed helper") {
		t.Errorf("save: %d\n%s", w.Code, w.Body)
	}
	if e.fake.ConfigText != "a: 1\n" || len(e.fake.Saved) != 1 || e.fake.Saved[0] != console.Operator {
		t.Errorf("saved %q by %v", e.fake.ConfigText, e.fake.Saved)
	}
}

// The trace store serves the conversations page and the inspector as it is.
var _ console.Turns = (*trace.Store)(nil)
