package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/admin"
	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/metrics/metricstest"
)

// testAdminToken is the admin API token of the tests' http sections.
const testAdminToken = "e2e-admin-token-0123456789"

// httpYAML listens on a free loopback port with the test admin token.
const httpYAML = "http:\n  listen: 127.0.0.1:0\n  admin_token: " + testAdminToken + "\n"

// call makes one request to the bot's HTTP listener; token "" sends none.
func call(t testing.TB, method, url, token string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header
}

// After a real turn, /metrics (parsed with the Prometheus text parser)
// shows the hook, turn stage and token series; the admin API refuses a
// missing or wrong token, lists the hooks with the right one exactly as
// hookroom hooks --json does, lists the agents, and reloads.
func TestMetricsAndAdminAPI(t *testing.T) {
	e := newTurnEnvOn(t, httpYAML, []string{"helper"}, "")
	e.llm.Script(llmtest.Text("Hello ", "there.").WithCachedUsage(120, 100, 8))
	e.say("hello", "")
	if got := e.waitTerminal(1); got[0] != "after:Hello there." {
		t.Fatalf("terminal %v", got)
	}
	base := "http://" + e.bot.bot.HTTPAddr()

	if code, body, _ := call(t, "GET", base+"/healthz", ""); code != 200 || strings.TrimSpace(string(body)) != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, body, _ := call(t, "GET", base+"/readyz", ""); code != 200 {
		t.Errorf("/readyz = %d %s", code, body)
	}

	code, body, hdr := call(t, "GET", base+"/metrics", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics = %d (%s)", code, hdr.Get("Content-Type"))
	}
	f, err := metricstest.Parse(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	agent := metricstest.Labels{"agent": "helper", "model": "agent-model"}
	for _, c := range []struct {
		name   string
		labels metricstest.Labels
		min    float64 // at least
		max    float64 // at most (0: min)
	}{
		{"hookroom_hook_runs_total", metricstest.Labels{"event": "message:received", "plugin": "recorder", "hook": "received"}, 1, 5},
		{"hookroom_hook_runs_total", metricstest.Labels{"event": "message:after_response", "plugin": "test", "hook": "after"}, 1, 0},
		{"hookroom_hook_errors_total", metricstest.Labels{"plugin": "test", "hook": "after"}, 0, 0},
		{"hookroom_hook_duration_seconds", metricstest.Labels{"event": "message:after_response", "hook": "after"}, 1, 0},
		{"hookroom_turn_stage_seconds", metricstest.Labels{"stage": "routed"}, 1, 0},
		{"hookroom_turn_stage_seconds", metricstest.Labels{"stage": "first_token"}, 1, 0},
		{"hookroom_turn_stage_seconds", metricstest.Labels{"stage": "first_visible"}, 1, 0},
		{"hookroom_turn_stage_seconds", metricstest.Labels{"stage": "final"}, 1, 0},
		{"hookroom_turns_total", metricstest.Labels{"outcome": "responded"}, 1, 0},
		{"hookroom_model_requests_total", agent, 1, 0},
		{"hookroom_model_errors_total", agent, 0, 0},
		{"hookroom_model_input_tokens_total", agent, 120, 0},
		{"hookroom_model_output_tokens_total", agent, 8, 0},
		{"hookroom_model_cached_tokens_total", agent, 100, 0},
		{"hookroom_inbox_backlog", nil, 0, 5}, // the reply's own event may be in handling
		{"hookroom_reloads_total", metricstest.Labels{"result": "ok"}, 0, 0},
	} {
		hi := c.max
		if hi == 0 {
			hi = c.min
		}
		v, ok, err := f.Value(c.name, c.labels)
		if err != nil || !ok || v < c.min || v > hi {
			t.Errorf("%s%v = %v (found %v, %v), want %v..%v; families: %v", c.name, c.labels, v, ok, err, c.min, hi, f.Names("hookroom_"))
		}
	}
	// The stages come in turn order: every later stage took at least as
	// long as the earlier ones (one turn: sums compare like the values).
	var last float64
	for _, st := range []string{"routed", "first_token", "first_visible", "final"} {
		h := f.Series("hookroom_turn_stage_seconds", metricstest.Labels{"stage": st})[0].GetHistogram()
		if h.GetSampleSum() < last {
			t.Errorf("stage %s at %.4fs, before the previous stage (%.4fs)", st, h.GetSampleSum(), last)
		}
		last = h.GetSampleSum()
	}
	if v, ok, _ := f.Value("hookroom_build_info", nil); !ok || v != 1 {
		t.Errorf("hookroom_build_info = %v, %v", v, ok)
	}

	// The admin API: refused without the right token, with a challenge.
	for _, tok := range []string{"", "wrong-token-0123456789", testAdminToken[:len(testAdminToken)-1]} {
		code, body, hdr := call(t, "GET", base+"/api/v1/hooks", tok)
		if code != 401 || hdr.Get("WWW-Authenticate") == "" || bytes.Contains(body, []byte("recorder")) {
			t.Errorf("token %q: %d (WWW-Authenticate %q) %s", tok, code, hdr.Get("WWW-Authenticate"), body)
		}
	}
	if code, _, _ := call(t, "POST", base+"/api/v1/reload", "nope"); code != 401 {
		t.Errorf("reload with a wrong token: %d", code)
	}
	// With it: the hooks, as hookroom hooks --json prints them.
	code, body, _ = call(t, "GET", base+"/api/v1/hooks", testAdminToken)
	if code != 200 {
		t.Fatalf("/api/v1/hooks = %d %s", code, body)
	}
	var want bytes.Buffer
	enc := json.NewEncoder(&want)
	enc.SetIndent("", "  ")
	if err := enc.Encode(e.bot.bot.Registry().Hooks()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(body, want.Bytes()) {
		t.Errorf("/api/v1/hooks differs from hookroom hooks --json:\n%s\nwant\n%s", body, want.Bytes())
	}
	var listed []hooks.HookInfo
	if err := json.Unmarshal(body, &listed); err != nil || !slices.ContainsFunc(listed, func(h hooks.HookInfo) bool {
		return h.Plugin == "recorder" && h.Hook == "received" && h.Event == "message:received"
	}) {
		t.Errorf("hooks %s (%v): recorder's received hook missing", body, err)
	}
	// The agents, with their accounts, rooms and state.
	code, body, _ = call(t, "GET", base+"/api/v1/agents", testAdminToken)
	var agents []admin.Agent
	if err := json.Unmarshal(body, &agents); code != 200 || err != nil {
		t.Fatalf("/api/v1/agents = %d %s (%v)", code, body, err)
	}
	i := slices.IndexFunc(agents, func(a admin.Agent) bool { return a.Name == "helper" })
	if len(agents) != 2 || !agents[0].Router || i < 0 || agents[i].UserID != e.userID("helper").String() ||
		agents[i].State != admin.AgentReady || !slices.Contains(agents[i].Rooms, e.room.String()) || agents[i].Model != "agent-model" {
		t.Errorf("agents = %+v, want the router and helper (ready, in %s)", agents, e.room)
	}
	if code, body, _ := call(t, "GET", base+"/api/v1/plugins", testAdminToken); code != 200 || strings.TrimSpace(string(body)) != "[]" {
		t.Errorf("/api/v1/plugins = %d %s, want an empty list (the test's hooks are not plugins)", code, body)
	}

	// A reload through the API returns its report and is counted.
	code, body, _ = call(t, "POST", base+"/api/v1/reload", testAdminToken)
	var res struct {
		OK      bool   `json:"ok"`
		Summary string `json:"summary"`
		Report  struct {
			NeedsRestart []string `json:"needs_restart"`
		} `json:"report"`
	}
	if err := json.Unmarshal(body, &res); code != 200 || err != nil || !res.OK || res.Summary != "nothing changed" {
		t.Errorf("reload = %d %s (%v)", code, body, err)
	}
	// A broken config.yaml: 422 with the problem (file:line), the running
	// configuration stays, and the failure is counted.
	good, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(e.yaml, append(slices.Clone(good), "hooks:\n  max_depth: -1\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body, _ = call(t, "POST", base+"/api/v1/reload", testAdminToken)
	var failed admin.ReloadResult
	if err := json.Unmarshal(body, &failed); code != 422 || err != nil || failed.OK || len(failed.Errors) == 0 ||
		!strings.Contains(failed.Errors[0], "config.yaml:") || !strings.Contains(failed.Errors[0], "hooks.max_depth") {
		t.Errorf("reload of a broken config = %d %s (%v)", code, body, err)
	}
	if bytes.Contains(body, []byte(e.hs.Secret)) {
		t.Error("the reload report shows the registration secret")
	}
	if err := os.WriteFile(e.yaml, good, 0o600); err != nil {
		t.Fatal(err)
	}
	_, body, _ = call(t, "GET", base+"/metrics", "")
	if f, err = metricstest.Parse(bytes.NewReader(body)); err != nil {
		t.Fatal(err)
	}
	for result, want := range map[string]float64{"ok": 1, "failed": 1} {
		if v, _, _ := f.Value("hookroom_reloads_total", metricstest.Labels{"result": result}); v != want {
			t.Errorf("reloads %s = %v, want %v", result, v, want)
		}
	}
}

// syncHold is an HTTP proxy in front of the homeserver that holds every
// /sync request until released: the accounts log in and provision, but
// none catches up its first sync.
type syncHold struct {
	URL      string
	proxy    *httputil.ReverseProxy
	released chan struct{}
	release  func()
	mu       sync.Mutex
	held     map[string]bool // access tokens with a /sync held
	changed  chan struct{}
}

func newSyncHold(t testing.TB, target string) *syncHold {
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	h := &syncHold{proxy: httputil.NewSingleHostReverseProxy(u), released: make(chan struct{}), held: map[string]bool{}, changed: make(chan struct{}, 1)}
	h.proxy.FlushInterval = -1
	h.release = sync.OnceFunc(func() { close(h.released) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { h.release(); _ = srv.Close() })
	h.URL = "http://" + ln.Addr().String()
	return h
}

func (h *syncHold) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/sync") {
		select {
		case <-h.released:
		default:
			h.mu.Lock()
			h.held[r.Header.Get("Authorization")] = true
			h.mu.Unlock()
			select {
			case h.changed <- struct{}{}:
			default:
			}
			select {
			case <-h.released:
			case <-r.Context().Done():
				return
			}
		}
	}
	h.proxy.ServeHTTP(w, r)
}

// heldAccounts counts the accounts with a /sync held.
func (h *syncHold) heldAccounts() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.held)
}

// /readyz answers 503 with reasons while the accounts have not caught up
// their first sync (the proxy holds it), and 200 once they have.
func TestReadyzAfterAccountsCaughtUp(t *testing.T) {
	e := newEnv(t)
	person := e.hs.RegisterUser(t, "alice")
	room := createRoom(t, person, e.userID("router"), e.userID("helper"))
	cfg := e.config(fmt.Sprintf(`rooms:
  main:
    id: "%s"
agents:
  helper:
    username: %s
    rooms: [main]
%s`, room, e.localpart("helper"), httpYAML))
	hold := newSyncHold(t, e.hs.URL)
	cfg.Matrix.Homeserver = hold.URL

	var rec events
	ctx, cancel := context.WithCancel(zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.InfoLevel).WithContext(context.Background()))
	b, err := New(ctx, cfg, Options{Registry: func(s hooks.Services) (*hooks.Registry, error) {
		return hooks.NewRegistry([]hooks.Plugin{rec.plugin()}, hooks.Options{Services: s})
	}})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	r := &running{bot: b, cancel: cancel, done: done}
	t.Cleanup(func() { hold.release(); r.stop(t) })

	// The listener answers while the accounts log in.
	deadline := time.Now().Add(60 * time.Second)
	testkit.Eventually(t, 60*time.Second, "the HTTP listener started", func() bool { return b.HTTPAddr() != "" })
	base := "http://" + b.HTTPAddr()
	readyz := func() (int, []string) {
		code, body, _ := call(t, "GET", base+"/readyz", "")
		var v struct {
			Ready   bool     `json:"ready"`
			Reasons []string `json:"reasons"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			t.Fatalf("/readyz body %q: %v", body, err)
		}
		if v.Ready != (code == 200) || (code == 503) != (len(v.Reasons) > 0) {
			t.Errorf("/readyz = %d %s: status and body disagree", code, body)
		}
		return code, v.Reasons
	}
	if code, _, _ := call(t, "GET", base+"/healthz", ""); code != 200 {
		t.Errorf("/healthz during start-up = %d", code)
	}
	if code, reasons := readyz(); code != 503 {
		t.Errorf("/readyz during start-up = %d %v, want 503", code, reasons)
	}
	// Both accounts in their sync loops, each with its first sync held.
	for hold.heldAccounts() < 2 {
		select {
		case <-hold.changed:
		case <-time.After(time.Until(deadline)):
			t.Fatalf("%d accounts reached /sync", hold.heldAccounts())
		}
	}
	code, reasons := readyz()
	if code != 503 || !slices.ContainsFunc(reasons, func(s string) bool { return strings.Contains(s, "first sync not caught up") }) {
		t.Errorf("/readyz with the first syncs held = %d %v, want 503 naming the accounts not caught up", code, reasons)
	}
	if n := len(rec.list("ready:")); n != 0 {
		t.Fatalf("%d accounts caught up while their syncs were held", n)
	}
	hold.release()
	rec.waitFor(t, "ready:", 2, 60*time.Second)
	testkit.Eventually(t, time.Until(deadline), "/readyz answers 200 after the accounts caught up", func() bool {
		code, _ := readyz()
		return code == 200
	})
}

// A listen address that cannot be bound stops the start-up at once with an
// error naming it, before any account logs in.
func TestHTTPListenerThatCannotBind(t *testing.T) {
	e := newEnv(t)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	cfg := e.config(fmt.Sprintf("agents:\n  helper:\n    username: %s\nhttp:\n  listen: %s\n", e.localpart("helper"), addr))
	ctx := zerolog.New(zerolog.NewTestWriter(t)).WithContext(t.Context())
	b, err := New(ctx, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = b.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "http.listen") {
		t.Fatalf("Run = %v, want an error naming %s and http.listen", err, addr)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Errorf("error %v does not wrap the listen error", err)
	}
	if b.router != nil {
		t.Error("an account logged in before the listener failed")
	}
	t.Logf("failed after %v: %v", time.Since(start), err)
}
