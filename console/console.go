package console

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

//go:embed assets/htmx.min.js assets/console.js assets/console.css
var assetFS embed.FS

// ContentSecurityPolicy is the policy of every console response: scripts,
// styles and images only from the console itself, no inline script or
// style, no frames, forms posting only back to the console.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"

// DefaultSessionTTL is how long a session lasts when Options.SessionTTL is
// zero.
const DefaultSessionTTL = 12 * time.Hour

// Options configure the console.
type Options struct {
	// Token returns the admin token at the time of each request (it
	// reloads live). "" turns the console off: every route answers 404.
	// Changing it ends every session.
	Token func() string
	// SessionTTL is how long a sign-in lasts (DefaultSessionTTL when 0).
	SessionTTL time.Duration
	// PublicURL is the URL operators reach the listener at; when it is
	// https, cookies are Secure even if a proxy terminates TLS.
	PublicURL string
	// Now is the clock (time.Now when nil); tests set it.
	Now func() time.Time

	// Logs feeds the logs page; nil: "not available".
	Logs *LogBuffer

	// The data of the pages; a nil one shows "not available".
	Status    Status
	Turns     Turns
	Hooks     Hooks
	Usage     Usage
	Schedules Schedules
	Approvals Approvals
	Config    Config
}

// console is the handler New returns.
type console struct {
	o        Options
	assets   map[string]asset
	sessions *sessions
	limiter  *limiter
	mux      *http.ServeMux
	secure   bool
}

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// New returns the console's handler, to be mounted at "/" of the HTTP
// listener (whose other routes, such as /api/v1, take precedence). It
// loads the embedded assets once; an asset that does not load is a bug in
// the binary, so New panics on it.
func New(o Options) http.Handler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	c := &console{
		o:        o,
		sessions: &sessions{m: map[[32]byte]*session{}, ttl: o.SessionTTL, now: o.Now},
		limiter:  &limiter{fails: map[string][]time.Time{}, max: signinFailures, window: signinWindow, now: o.Now},
		secure:   strings.HasPrefix(strings.ToLower(o.PublicURL), "https://"),
	}
	var err error
	if c.assets, err = loadAssets(); err != nil {
		panic(err)
	}
	m := http.NewServeMux()
	m.HandleFunc("GET /assets/{name}", c.asset)
	m.HandleFunc("GET /signin", c.signinPage)
	m.HandleFunc("POST /signin", c.signin)
	m.Handle("POST /signout", c.auth(c.signout))
	m.Handle("GET /{$}", c.auth(c.overview))
	m.Handle("GET /turns", c.auth(c.turns))
	m.Handle("GET /turns/{id}", c.auth(c.turn))
	m.Handle("GET /hooks", c.auth(c.hooks))
	m.Handle("GET /usage", c.auth(c.usage))
	m.Handle("GET /schedules", c.auth(c.schedules))
	m.Handle("POST /schedules", c.auth(c.cancelSchedule))
	m.Handle("GET /approvals", c.auth(c.approvals))
	m.Handle("POST /approvals", c.auth(c.decide))
	m.Handle("GET /config", c.auth(c.config))
	m.Handle("POST /config", c.auth(c.configPost))
	m.Handle("GET /logs", c.auth(c.logs))
	c.mux = m
	return c
}

// ServeHTTP answers 404 for everything while there is no admin token, and
// sets the security headers of every response.
func (c *console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.token() == "" {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method == http.MethodPost {
		r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	}
	c.mux.ServeHTTP(w, r)
}

// maxForm bounds a POST's body (config.yaml is the largest form).
const maxForm = 2 << 20

func (c *console) token() string {
	if c.o.Token == nil {
		return ""
	}
	return c.o.Token()
}

type sessionKey struct{}

// auth lets a request through to next only with a live session, and a POST
// only with the session's CSRF token (form field "csrf" or header
// X-CSRF-Token). Without a session a page view is sent to the sign-in page;
// a live update (HX-Request) or a POST gets 401.
func (c *console) auth(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ss *session
		if ck, err := r.Cookie(sessionCookie); err == nil {
			ss = c.sessions.get(ck.Value, c.token())
		}
		if ss == nil {
			if r.Method == http.MethodGet && r.Header.Get("HX-Request") == "" {
				http.Redirect(w, r, "/signin?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			c.errorPage(w, nil, http.StatusUnauthorized, "Your session has ended: sign in again.")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			got := r.Header.Get("X-CSRF-Token")
			if got == "" {
				got = r.PostFormValue("csrf")
			}
			if got == "" || !equalSecret(got, ss.csrf) {
				zerolog.Ctx(r.Context()).Warn().Str("path", r.URL.Path).Str("client", clientAddr(r)).
					Msg("Console request without a valid CSRF token refused")
				c.errorPage(w, ss, http.StatusForbidden, "This form has expired or did not come from the console. Reload the page and try again.")
				return
			}
		}
		next(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, ss)))
	})
}

func sessionOf(r *http.Request) *session {
	ss, _ := r.Context().Value(sessionKey{}).(*session)
	return ss
}

// cookie returns a console cookie: HttpOnly, SameSite=Strict, Path=/ and
// Secure when the request came over TLS or the public URL is https.
func (c *console) cookie(r *http.Request, name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.secure || r.TLS != nil,
	}
}

// localPath returns next when it is a path on this server, else "/".
func localPath(next string) string {
	if next == "" || next[0] != '/' || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

type signinData struct {
	CSRF  string
	Next  string
	Error string
}

// signinPage shows the sign-in form, with a fresh CSRF token in a cookie
// and in the form.
func (c *console) signinPage(w http.ResponseWriter, r *http.Request) {
	tok := randomToken()
	http.SetCookie(w, c.cookie(r, signinCookie, tok, 3600))
	c.render(w, http.StatusOK, nil, page{Nav: "signin"}, &signinData{CSRF: tok, Next: localPath(r.URL.Query().Get("next"))})
}

// signin exchanges the admin token for a session. Failures are rate
// limited per client address and logged (without what was submitted).
func (c *console) signin(w http.ResponseWriter, r *http.Request) {
	log := zerolog.Ctx(r.Context())
	client := clientAddr(r)
	next := localPath(r.PostFormValue("next"))
	if wait, blocked := c.limiter.blocked(client); blocked {
		secs := int(wait/time.Second) + 1
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		log.Warn().Str("client", client).Msg("Console sign-in refused: too many failed attempts")
		c.errorPage(w, nil, http.StatusTooManyRequests, fmt.Sprintf("Too many failed sign-ins. Try again in %d seconds.", secs))
		return
	}
	ck, err := r.Cookie(signinCookie)
	if err != nil || ck.Value == "" || !equalSecret(ck.Value, r.PostFormValue("csrf")) {
		log.Warn().Str("client", client).Msg("Console sign-in without a valid CSRF token refused")
		c.errorPage(w, nil, http.StatusForbidden, "The sign-in form has expired. Reload it and try again.")
		return
	}
	want := c.token()
	if !equalSecret(r.PostFormValue("token"), want) {
		c.limiter.fail(client)
		log.Warn().Str("client", client).Msg("Console sign-in failed: wrong admin token")
		tok := randomToken()
		http.SetCookie(w, c.cookie(r, signinCookie, tok, 3600))
		c.render(w, http.StatusUnauthorized, nil, page{Nav: "signin"}, &signinData{CSRF: tok, Next: next, Error: "That is not the admin token."})
		return
	}
	id, _ := c.sessions.create(want)
	http.SetCookie(w, c.cookie(r, sessionCookie, id, int(c.o.SessionTTL/time.Second)))
	http.SetCookie(w, c.cookie(r, signinCookie, "", -1))
	log.Info().Str("client", client).Msg("Console sign-in")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signout ends the session.
func (c *console) signout(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(sessionCookie); err == nil {
		c.sessions.end(ck.Value)
	}
	http.SetCookie(w, c.cookie(r, sessionCookie, "", -1))
	zerolog.Ctx(r.Context()).Info().Str("client", clientAddr(r)).Msg("Console sign-out")
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

// asset serves an embedded static file; it needs no session.
func (c *console) asset(w http.ResponseWriter, r *http.Request) {
	a, ok := c.assets[r.PathValue("name")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", a.ctype)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("ETag", a.etag)
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	_, _ = w.Write(a.body)
}

func loadAssets() (map[string]asset, error) {
	m := map[string]asset{}
	err := fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFS.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		ct := mime.TypeByExtension(path.Ext(p))
		if ct == "" {
			ct = "application/octet-stream"
		}
		m[path.Base(p)] = asset{body: b, ctype: ct, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("failed to load the console's assets: %w", err)
	}
	return m, nil
}

type errorData struct {
	Status  int
	Text    string
	Message string
}

// errorPage answers status with a page saying msg.
func (c *console) errorPage(w http.ResponseWriter, ss *session, status int, msg string) {
	c.render(w, status, ss, page{Nav: "error"}, &errorData{Status: status, Text: http.StatusText(status), Message: msg})
}
