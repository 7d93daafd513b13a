package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
)

// warnLog keeps the log lines at warn level and above.
type warnLog struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnLog) Write(p []byte) (int, error) {
	line := string(p)
	if strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`) {
		w.mu.Lock()
		w.lines = append(w.lines, line)
		w.mu.Unlock()
	}
	return len(p), nil
}

// The agent's typing notice is cleared after each reply (long before its
// 30 s timeout would), and no typing request is cancelled on the way: the
// log has no warning about one.
func TestTypingEndsAfterReply(t *testing.T) {
	e := newEnv(t)
	var warns warnLog
	e.logs = &warns
	llm := llmtest.NewServerWith(t, []llmtest.Option{llmtest.Instant(), llmtest.WithFallback(llmtest.Text("ok"))})
	alice := e.hs.RegisterUser(t, "alice")
	room := createRoom(t, alice, e.userID("router"), e.userID("helper"))
	cfg := e.configAgents(agentSetup{LLM: llm.URL, Room: room, Admins: []id.UserID{alice.UserID}})
	var rec events
	r := e.start(cfg, &rec, Options{})
	agent := e.userID("helper")

	messages := make(chan *event.Event, 64)
	typing := make(chan []string, 64) // who types in the room, as each m.typing says
	syncer := mautrix.NewDefaultSyncer()
	syncer.OnEventType(event.EventMessage, func(_ context.Context, ev *event.Event) { messages <- ev })
	syncer.OnEventType(event.EphemeralEventTyping, func(_ context.Context, ev *event.Event) {
		if ev.RoomID != room {
			return
		}
		var users []string
		for _, u := range ev.Content.AsTyping().UserIDs {
			users = append(users, string(u))
		}
		typing <- users
	})
	alice.Client.Syncer = syncer
	alice.Client.Store = mautrix.NewMemorySyncStore()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = alice.Client.SyncWithContext(ctx) }()
	defer func() { cancel(); <-done }()

	for i := range 3 {
		if _, err := alice.Client.SendText(ctx, room, fmt.Sprintf("hello %d", i)); err != nil {
			t.Fatal(err)
		}
		waitFrom(t, messages, agent)
		// Typing was set when the turn began; it must be cleared now, well
		// within the 30 s it would take to time out.
		deadline := time.After(10 * time.Second)
		for cleared := false; !cleared; {
			select {
			case users := <-typing:
				cleared = !slices.Contains(users, string(agent))
			case <-deadline:
				t.Fatalf("message %d: the agent still types 10s after its reply", i)
			}
		}
	}
	r.stop(t) // waits for the last typing requests
	warns.mu.Lock()
	defer warns.mu.Unlock()
	for _, l := range warns.lines {
		if strings.Contains(l, "typing") {
			t.Errorf("warning about a typing request: %s", l)
		}
	}
}
