package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"sync"
	"time"
)

// Cookie names.
const (
	sessionCookie = "hookroom_session"
	// signinCookie carries the sign-in form's CSRF token (double submit:
	// there is no session yet to keep it in).
	signinCookie = "hookroom_signin"
)

// session is one signed-in browser.
type session struct {
	csrf    string
	expires time.Time
	// token is the SHA-256 of the admin token it signed in with: a session
	// ends when the admin token changes.
	token [32]byte
}

// sessions are kept in memory only: a restart signs everyone out.
type sessions struct {
	mu sync.Mutex
	// m is keyed by the SHA-256 of the session id, so that the map's
	// lookup time says nothing about the id.
	m   map[[32]byte]*session
	ttl time.Duration
	now func() time.Time
}

// maxSessions bounds the sessions kept; past it the oldest is dropped.
const maxSessions = 1000

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// create starts a session for admin token tok and returns its id.
func (s *sessions) create(tok string) (string, *session) {
	id := randomToken()
	ss := &session{csrf: randomToken(), expires: s.now().Add(s.ttl), token: sha256.Sum256([]byte(tok))}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, v := range s.m {
		if !now.Before(v.expires) {
			delete(s.m, k)
		}
	}
	if len(s.m) >= maxSessions {
		var oldest [32]byte
		first := true
		for k, v := range s.m {
			if first || v.expires.Before(s.m[oldest].expires) {
				oldest, first = k, false
			}
		}
		delete(s.m, oldest)
	}
	s.m[sha256.Sum256([]byte(id))] = ss
	return id, ss
}

// get returns the live session id names, if it was started with the admin
// token tok; an expired one, or one of another token, is ended.
func (s *sessions) get(id, tok string) *session {
	if id == "" {
		return nil
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[k]
	if ss == nil {
		return nil
	}
	th := sha256.Sum256([]byte(tok))
	if !s.now().Before(ss.expires) || subtle.ConstantTimeCompare(th[:], ss.token[:]) != 1 {
		delete(s.m, k)
		return nil
	}
	return ss
}

// end ends the session id.
func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, sha256.Sum256([]byte(id)))
}

// equalSecret compares two secrets in constant time (of their SHA-256, so
// that the length does not leak either).
func equalSecret(a, b string) bool {
	ha, hb := sha256.Sum256([]byte(a)), sha256.Sum256([]byte(b))
	return subtle.ConstantTimeCompare(ha[:], hb[:]) == 1
}

// limiter counts failed sign-ins per client address.
type limiter struct {
	mu     sync.Mutex
	fails  map[string][]time.Time
	max    int
	window time.Duration
	now    func() time.Time
}

// Sign-in rate limit: at most signinFailures failures per client address in
// signinWindow.
const (
	signinFailures = 5
	signinWindow   = time.Minute
)

// blocked reports whether client has used up its failures, and when it may
// try again.
func (l *limiter) blocked(client string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.prune(client, now)
	if len(f) < l.max {
		return 0, false
	}
	return f[0].Add(l.window).Sub(now), true
}

// fail records a failed sign-in of client.
func (l *limiter) fail(client string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if len(l.fails) > 10000 { // a flood of addresses: forget the stale ones
		for c := range l.fails {
			l.prune(c, now)
		}
	}
	l.fails[client] = append(l.prune(client, now), now)
}

// prune drops client's failures older than the window. l.mu is held.
func (l *limiter) prune(client string, now time.Time) []time.Time {
	f := l.fails[client]
	i := 0
	for i < len(f) && !now.Before(f[i].Add(l.window)) {
		i++
	}
	f = f[i:]
	if len(f) == 0 {
		delete(l.fails, client)
		return nil
	}
	l.fails[client] = f
	return f
}

// clientAddr is the address a request came from: the peer's IP. Headers
// such as X-Forwarded-For are not trusted (a proxy in front of the
// listener makes every client one address, which only makes the limit
// stricter).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
