package matrixio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// scriptedServer answers requests with a fixed sequence of responses (the
// last one repeats) and records the paths it saw. It tests our HTTP retry
// behaviour, not Matrix semantics.
type scriptedServer struct {
	mu       sync.Mutex
	steps    []step
	paths    []string
	requests int
}

type step struct {
	status int
	body   string
	header map[string]string
}

func (s *scriptedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
	}
	s.mu.Lock()
	st := s.steps[min(s.requests, len(s.steps)-1)]
	s.requests++
	s.paths = append(s.paths, r.URL.Path)
	s.mu.Unlock()
	for k, v := range st.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st.status)
	_, _ = io.WriteString(w, st.body)
}

func (s *scriptedServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests
}

const (
	okWhoami      = `{"user_id":"@bot:example.org","device_id":"DEV"}`
	limitExceeded = `{"errcode":"M_LIMIT_EXCEEDED","error":"Too many requests","retry_after_ms":1234}`
	badGateway    = `<html>bad gateway</html>`
)

// recordingRetrier returns a retrier whose waits are recorded instead of
// taken.
func recordingRetrier(p RetryPolicy) (*retrier, *[]time.Duration) {
	r := newRetrier(p)
	var waits []time.Duration
	r.sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	return r, &waits
}

func newTestClient(t *testing.T, url string) *mautrix.Client {
	t.Helper()
	cli, err := mautrix.NewClient(url, "@bot:example.org", "token")
	if err != nil {
		t.Fatal(err)
	}
	return cli
}

func TestRetry(t *testing.T) {
	policy := RetryPolicy{MaxAttempts: 5, InitialBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond, MaxRetryAfter: 10 * time.Second}
	tests := []struct {
		name      string
		mode      retryMode
		steps     []step
		wantErr   error // nil: success expected
		wantCalls int
		wantWaits []time.Duration
	}{
		{
			name:      "429 honours retry_after_ms",
			steps:     []step{{status: 429, body: limitExceeded}, {status: 200, body: okWhoami}},
			wantCalls: 2,
			wantWaits: []time.Duration{1234 * time.Millisecond},
		},
		{
			name:      "429 without body uses Retry-After header",
			steps:     []step{{status: 429, body: `{}`, header: map[string]string{"Retry-After": "3"}}, {status: 200, body: okWhoami}},
			wantCalls: 2,
			wantWaits: []time.Duration{3 * time.Second},
		},
		{
			name:      "429 without any delay backs off exponentially",
			steps:     []step{{status: 429, body: `{"errcode":"M_LIMIT_EXCEEDED"}`}, {status: 429, body: `{"errcode":"M_LIMIT_EXCEEDED"}`}, {status: 200, body: okWhoami}},
			wantCalls: 3,
			wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond},
		},
		{
			name:      "502 503 504 back off exponentially with a cap",
			steps:     []step{{status: 502, body: badGateway}, {status: 503, body: badGateway}, {status: 504, body: badGateway}, {status: 502, body: badGateway}, {status: 200, body: okWhoami}},
			wantCalls: 5,
			wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
		},
		{
			name:      "500 is retried",
			steps:     []step{{status: 500, body: `{"errcode":"M_UNKNOWN","error":"internal"}`}, {status: 200, body: okWhoami}},
			wantCalls: 2,
			wantWaits: []time.Duration{100 * time.Millisecond},
		},
		{
			name:      "gives up after MaxAttempts",
			steps:     []step{{status: 502, body: badGateway}},
			wantErr:   errAnyHTTP,
			wantCalls: 5,
			wantWaits: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
		},
		{
			name:      "400 is not retried",
			steps:     []step{{status: 400, body: `{"errcode":"M_BAD_JSON","error":"no"}`}},
			wantErr:   mautrix.MBadJSON,
			wantCalls: 1,
		},
		{
			name:      "403 is not retried",
			steps:     []step{{status: 403, body: `{"errcode":"M_FORBIDDEN","error":"no"}`}},
			wantErr:   mautrix.MForbidden,
			wantCalls: 1,
		},
		{
			name:      "501 is not retried",
			steps:     []step{{status: 501, body: `{"errcode":"M_UNRECOGNIZED","error":"no"}`}},
			wantErr:   errAnyHTTP,
			wantCalls: 1,
		},
		{
			name:      "retry_after_ms beyond MaxRetryAfter fails at once",
			steps:     []step{{status: 429, body: `{"errcode":"M_LIMIT_EXCEEDED","retry_after_ms":60000}`}},
			wantErr:   mautrix.MLimitExceeded,
			wantCalls: 1,
		},
		{
			name:      "rejected-only mode does not retry 502",
			mode:      retryRejected,
			steps:     []step{{status: 502, body: badGateway}},
			wantErr:   errAnyHTTP,
			wantCalls: 1,
		},
		{
			name:      "rejected-only mode retries 429",
			mode:      retryRejected,
			steps:     []step{{status: 429, body: limitExceeded}, {status: 200, body: okWhoami}},
			wantCalls: 2,
			wantWaits: []time.Duration{1234 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &scriptedServer{steps: tt.steps}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			cli := newTestClient(t, ts.URL)
			obs := &retryLog{}
			p := policy
			p.Observer = obs
			r, waits := recordingRetrier(p)
			var resp *mautrix.RespWhoami
			err := r.do(t.Context(), "whoami", tt.mode, func(ctx context.Context) (err error) {
				resp, err = cli.Whoami(ctx)
				return err
			})
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tt.wantErr == nil && resp.UserID != "@bot:example.org":
				t.Errorf("response = %+v", resp)
			case tt.wantErr == errAnyHTTP:
				var httpErr mautrix.HTTPError
				if !errors.As(err, &httpErr) {
					t.Errorf("error = %v, want an HTTP error", err)
				}
			case tt.wantErr != nil && !errors.Is(err, tt.wantErr):
				t.Errorf("error = %v, want %v", err, tt.wantErr)
			}
			if got := srv.count(); got != tt.wantCalls {
				t.Errorf("server saw %d requests, want %d", got, tt.wantCalls)
			}
			if fmt.Sprint(*waits) != fmt.Sprint(tt.wantWaits) {
				t.Errorf("waits = %v, want %v", *waits, tt.wantWaits)
			}
			// The observer hears of every retry, before its wait.
			var want []Retry
			for i, w := range tt.wantWaits {
				st := tt.steps[min(i, len(tt.steps)-1)]
				want = append(want, Retry{Request: "whoami", Attempt: i + 1, Wait: w, RateLimited: st.status == 429})
			}
			if fmt.Sprint(obs.retries) != fmt.Sprint(want) {
				t.Errorf("observed %+v, want %+v", obs.retries, want)
			}
		})
	}
}

type retryLog struct{ retries []Retry }

func (l *retryLog) Retrying(_ context.Context, r Retry) { l.retries = append(l.retries, r) }

// errAnyHTTP marks test cases that expect some mautrix.HTTPError.
var errAnyHTTP = errors.New("any HTTP error")

func TestRetryNetworkError(t *testing.T) {
	ts := httptest.NewServer(http.NotFoundHandler())
	url := ts.URL
	ts.Close() // connection refused from now on
	cli := newTestClient(t, url)
	r, waits := recordingRetrier(RetryPolicy{MaxAttempts: 3, InitialBackoff: time.Second})
	err := r.do(t.Context(), "whoami", retryTransient, func(ctx context.Context) error {
		_, err := cli.Whoami(ctx)
		return err
	})
	if err == nil {
		t.Fatal("expected an error from a closed server")
	}
	if want := []time.Duration{time.Second, 2 * time.Second}; fmt.Sprint(*waits) != fmt.Sprint(want) {
		t.Errorf("waits = %v, want %v", *waits, want)
	}

	r, waits = recordingRetrier(RetryPolicy{MaxAttempts: 3})
	_ = r.do(t.Context(), "create room", retryRejected, func(ctx context.Context) error {
		_, err := cli.Whoami(ctx)
		return err
	})
	if len(*waits) != 0 {
		t.Errorf("network error retried in rejected-only mode: waits %v", *waits)
	}
}

// TestRetryRealTimer checks the real timer path with a fake clock: the
// wait lasts exactly retry_after_ms, and cancellation ends it at once.
func TestRetryRealTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := &scriptedServer{steps: []step{{status: 429, body: limitExceeded}, {status: 200, body: okWhoami}}}
		cli := newTestClient(t, "http://homeserver.invalid")
		cli.Client = &http.Client{Transport: handlerTransport{srv}}
		r := newRetrier(RetryPolicy{})
		start := time.Now()
		err := r.do(t.Context(), "whoami", retryTransient, func(ctx context.Context) error {
			_, err := cli.Whoami(ctx)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got != 1234*time.Millisecond {
			t.Errorf("waited %v, want exactly 1.234s", got)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		srv := &scriptedServer{steps: []step{{status: 429, body: limitExceeded}}}
		cli := newTestClient(t, "http://homeserver.invalid")
		cli.Client = &http.Client{Transport: handlerTransport{srv}}
		r := newRetrier(RetryPolicy{})
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(500*time.Millisecond, cancel)
		start := time.Now()
		err := r.do(ctx, "whoami", retryTransient, func(ctx context.Context) error {
			_, err := cli.Whoami(ctx)
			return err
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error = %v, want context.Canceled", err)
		}
		if got := time.Since(start); got != 500*time.Millisecond {
			t.Errorf("returned after %v, want 500ms (at cancellation)", got)
		}
		if srv.count() != 1 {
			t.Errorf("server saw %d requests after cancellation, want 1", srv.count())
		}
	})
}

// handlerTransport serves requests in-process, so synctest's fake clock
// can run (real sockets would not let the bubble settle).
type handlerTransport struct{ h http.Handler }

func (ht handlerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	ht.h.ServeHTTP(rec, req)
	return rec.Result(), nil
}

// TestSendRetryKeepsTxnID checks that a send retried after rate limiting
// and a gateway error reuses its transaction id (same request path), which
// is what makes the retry safe.
func TestSendRetryKeepsTxnID(t *testing.T) {
	srv := &scriptedServer{steps: []step{
		{status: 429, body: limitExceeded},
		{status: 502, body: badGateway},
		// After a server error the retry first looks for the first
		// attempt: a sync that shows nothing sent.
		{status: 200, body: `{"next_batch":"s2"}`},
		{status: 200, body: `{"event_id":"$sent"}`},
	}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	acct := newTestAccount(t, ts.URL)
	r, waits := recordingRetrier(RetryPolicy{InitialBackoff: time.Second})
	acct.m.retry = r
	room := id.RoomID("!room:example.org")
	evtID, err := acct.SendText(t.Context(), room, "hello", SendOptions{TxnKey: TxnKey("$src", "reply")})
	if err != nil {
		t.Fatal(err)
	}
	if evtID != "$sent" {
		t.Errorf("event id = %s", evtID)
	}
	if len(srv.paths) != 4 || !strings.HasSuffix(srv.paths[2], "/sync") {
		t.Fatalf("paths = %v, want 3 attempts and a sync before the third", srv.paths)
	}
	wantSuffix := "/send/m.room.message/" + wireTxnID(TxnKey("$src", "reply"), room, event.EventMessage)
	for _, p := range slices.Delete(slices.Clone(srv.paths), 2, 3) {
		if !strings.HasSuffix(p, wantSuffix) {
			t.Errorf("attempt path %q does not end in %q", p, wantSuffix)
		}
	}
	if want := []time.Duration{1234 * time.Millisecond, time.Second}; fmt.Sprint(*waits) != fmt.Sprint(want) {
		t.Errorf("waits = %v, want %v", *waits, want)
	}
}

func newTestAccount(t *testing.T, url string) *Account {
	t.Helper()
	cfg, err := Config{HomeserverURL: url, ServerName: "example.org"}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{cfg: cfg, retry: newRetrier(cfg.Retry), accounts: map[id.UserID]*Account{}}
	a := &Account{m: m, client: newTestClient(t, url), userID: "@bot:example.org", seen: newRecentSet(16)}
	a.setPosition("s1")
	return a
}

// A send retried after a failure that may have posted it looks for it
// first; only a rate limit (the server did nothing) is retried without.
func TestSendRetryLooksForFirstAttempt(t *testing.T) {
	room := id.RoomID("!room:example.org")
	key := TxnKey("$src", "placeholder")
	found := fmt.Sprintf(`{"next_batch":"s2","rooms":{"join":{%q:{"timeline":{"events":[
		{"type":"m.room.message","event_id":"$other","sender":"@bot:example.org","content":{},"unsigned":{"transaction_id":"other"}},
		{"type":"m.room.message","event_id":"$first","sender":"@bot:example.org","content":{},"unsigned":{"transaction_id":%q}}]}}}}}`,
		room, wireTxnID(key, room, event.EventMessage))
	tests := []struct {
		name  string
		steps []step
		want  id.EventID
		paths []string // the last path element of each request
	}{
		{"server error, first attempt posted", []step{{status: 502, body: badGateway}, {status: 200, body: found}},
			"$first", []string{"send", "sync"}},
		{"server error, not posted", []step{{status: 500, body: `{}`}, {status: 200, body: `{"next_batch":"s2"}`}, {status: 200, body: `{"event_id":"$second"}`}},
			"$second", []string{"send", "sync", "send"}},
		{"rate limited", []step{{status: 429, body: limitExceeded}, {status: 200, body: `{"event_id":"$second"}`}},
			"$second", []string{"send", "send"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &scriptedServer{steps: tt.steps}
			ts := httptest.NewServer(srv)
			defer ts.Close()
			acct := newTestAccount(t, ts.URL)
			acct.m.retry, _ = recordingRetrier(RetryPolicy{})
			got, err := acct.SendText(t.Context(), room, "…", SendOptions{TxnKey: key})
			if err != nil || got != tt.want {
				t.Fatalf("SendText = %s, %v; want %s", got, err, tt.want)
			}
			var kinds []string
			for _, p := range srv.paths {
				if strings.HasSuffix(p, "/sync") {
					kinds = append(kinds, "sync")
				} else {
					kinds = append(kinds, "send")
				}
			}
			if !slices.Equal(kinds, tt.paths) {
				t.Errorf("requests %v, want %v", srv.paths, tt.paths)
			}
		})
	}
}
