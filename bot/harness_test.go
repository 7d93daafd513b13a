package bot

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild()
		return
	}
	hstest.Main(pgtest.Wrap(m))
}

// events records what the hooks of a test bot saw, for assertions.
type events struct {
	mu   sync.Mutex
	seen []string
	cond chan struct{}
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = append(e.seen, s)
	if e.cond != nil {
		close(e.cond)
		e.cond = nil
	}
}

func (e *events) list(prefix string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, s := range e.seen {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// waitFor waits until at least n recorded entries start with prefix.
func (e *events) waitFor(t testing.TB, prefix string, n int, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := e.list(prefix)
		if len(got) >= n {
			return got
		}
		e.mu.Lock()
		if e.cond == nil {
			e.cond = make(chan struct{})
		}
		c := e.cond
		e.mu.Unlock()
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("timed out waiting for %d %q events; got %d: %v", n, prefix, len(got), got)
		}
		select {
		case <-c:
		case <-time.After(left):
		}
	}
}

// recorderPlugin records lifecycle, member and message events.
func (e *events) plugin() hooks.Plugin {
	lifecycle := func(kind string) func(context.Context, *hooks.AgentLifecycleContext) error {
		return func(_ context.Context, c *hooks.AgentLifecycleContext) error {
			e.add(fmt.Sprintf("%s:%s", kind, c.Agent))
			return nil
		}
	}
	return hooks.Plugin{Name: "recorder", Hooks: []hooks.Hook{
		hooks.Handle(hooks.AgentStarted, "started", lifecycle("started")),
		hooks.Handle(hooks.BotReady, "ready", lifecycle("ready")),
		hooks.Handle(hooks.AgentStopped, "stopped", lifecycle("stopped")),
		hooks.Handle(hooks.RoomMemberJoined, "joined", func(_ context.Context, c *hooks.RoomMemberContext) error {
			e.add(fmt.Sprintf("joined:%s:%s", c.RoomID, c.UserID))
			return nil
		}),
		hooks.Handle(hooks.RoomMemberLeft, "left", func(_ context.Context, c *hooks.RoomMemberContext) error {
			e.add(fmt.Sprintf("left:%s:%s", c.RoomID, c.UserID))
			return nil
		}),
		hooks.Handle(hooks.MessageReceived, "received", func(_ context.Context, c *hooks.MessageReceivedContext) error {
			e.add(fmt.Sprintf("msg:%s:%s", c.Envelope.RoomID, c.Envelope.SourceEventID))
			return nil
		}),
		hooks.Handle(hooks.ReactionReceived, "reaction", func(_ context.Context, c *hooks.ReactionReceivedContext) error {
			e.add(fmt.Sprintf("reaction:%s:%s", c.Key, c.TargetEventID))
			return nil
		}),
	}}
}

// testEnv is one test's hookroom setup on the shared homeserver.
type testEnv struct {
	t      testing.TB
	hs     *hstest.Server
	suffix string
	dir    string
	yaml   string
	// logs, when set, also receives the bots' log (JSON lines).
	logs io.Writer
}

func newEnv(t testing.TB) *testEnv {
	hs := hstest.Shared(t)
	return &testEnv{t: t, hs: hs, suffix: strings.ToLower(randomSuffix()), dir: t.TempDir()}
}

func randomSuffix() string { return fmt.Sprintf("%x", time.Now().UnixNano()&0xffffffff) }

// localpart returns a per-test unique localpart.
func (e *testEnv) localpart(name string) string { return name + "-" + e.suffix }

func (e *testEnv) userID(name string) id.UserID {
	return id.NewUserID(e.localpart(name), e.hs.ServerName)
}

// config writes config.yaml with body (the agents/rooms/authorization
// sections) below a matrix section for the shared homeserver.
func (e *testEnv) config(body string) *config.Config {
	e.t.Helper()
	text := fmt.Sprintf(`data_dir: ./data
log:
  level: debug
matrix:
  homeserver: %s
  server_name: %s
  registration:
    shared_secret: ${HS_SECRET}
  router:
    username: %s
%s`, e.hs.URL, e.hs.ServerName, e.localpart("router"), body)
	if !strings.Contains(body, "models:") {
		text += "models:\n  default:\n    provider: echo\n"
	}
	path := filepath.Join(e.dir, "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		e.t.Fatal(err)
	}
	e.yaml = path
	cfg, err := config.Load(context.Background(), path, config.WithLookupEnv(func(k string) (string, bool) {
		if k == "HS_SECRET" {
			return e.hs.Secret, true
		}
		return "", false
	}))
	if err != nil {
		e.t.Fatalf("config: %v", err)
	}
	return cfg
}

// running is a bot started by start.
type running struct {
	bot    *Bot
	cancel context.CancelFunc
	done   chan error
}

// start runs a bot for cfg with the recorder's hooks and waits until every
// account is ready.
func (e *testEnv) start(cfg *config.Config, rec *events, opts Options) *running {
	e.t.Helper()
	return e.startWithin(cfg, rec, opts, 60*time.Second)
}

// startWithin is start waiting up to timeout for the accounts to be ready.
func (e *testEnv) startWithin(cfg *config.Config, rec *events, opts Options, timeout time.Duration) *running {
	e.t.Helper()
	if opts.Registry == nil {
		opts.Registry = func(s hooks.Services) (*hooks.Registry, error) {
			return hooks.NewRegistry([]hooks.Plugin{rec.plugin()}, hooks.Options{Services: s})
		}
	}
	var out io.Writer = zerolog.NewTestWriter(e.t)
	if e.logs != nil {
		out = zerolog.MultiLevelWriter(out, e.logs)
	}
	log := zerolog.New(out).Level(zerolog.InfoLevel).With().Timestamp().Logger()
	ctx, cancel := context.WithCancel(log.WithContext(context.Background()))
	b, err := New(ctx, cfg, opts)
	if err != nil {
		cancel()
		e.t.Fatalf("New: %v", err)
	}
	r := &running{bot: b, cancel: cancel, done: make(chan error, 1)}
	before := len(rec.list("ready:"))
	go func() { r.done <- b.Run(ctx) }()
	e.t.Cleanup(func() { r.stop(e.t) })
	rec.waitFor(e.t, "ready:", before+1+len(cfg.Agents), timeout)
	return r
}

func (r *running) stop(t testing.TB) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("bot stopped with an error: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("bot did not stop within 30s")
	}
}
