package bot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// crashSizeEnv sets the number of messages of TestCrashAnswersEveryMessageOnce
// (default 48, with a kill for every 6 messages; the size is 120).
const crashSizeEnv = "HOOKROOM_CRASH_MESSAGES"

// sendFreezer is an HTTP proxy in front of the homeserver that can freeze
// the next message send (PUT …/send/…) of a kind: the request is held,
// unanswered, until release. Released, it is sent on to the homeserver and
// completes there although its client is gone, under the r0 path, whose
// transaction cache Dendrite does not share with v3: the homeserver does
// not remember its transaction id, as happens when a client dies while
// Dendrite handles its request (it caches the id only once it answered).
type sendFreezer struct {
	upstream string
	client   *http.Client

	mu      sync.Mutex
	armed   string        // "new" (a new message), "edit", or "" (none)
	frozen  chan struct{} // receives when a request was frozen
	release chan struct{} // closed to release it
	landed  chan error    // the released request's outcome
}

func newSendFreezer(t *testing.T, upstream string) (*sendFreezer, string) {
	f := &sendFreezer{upstream: strings.TrimSuffix(upstream, "/"), client: &http.Client{}}
	srv := httptest.NewServer(f)
	t.Cleanup(func() {
		f.disarm()
		srv.CloseClientConnections()
		srv.Close()
	})
	return f, srv.URL
}

// arm freezes the next send of kind.
func (f *sendFreezer) arm(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = kind
	f.frozen = make(chan struct{}, 1)
	f.release = make(chan struct{})
	f.landed = make(chan error, 1)
}

// disarm stops freezing; a request frozen already stays frozen.
func (f *sendFreezer) disarm() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.armed = ""
}

// releaseFrozen lets the frozen request through and waits until the
// homeserver answered it.
func (f *sendFreezer) releaseFrozen() error {
	f.mu.Lock()
	release, landed := f.release, f.landed
	f.mu.Unlock()
	close(release)
	select {
	case err := <-landed:
		return err
	case <-time.After(30 * time.Second):
		return errors.New("the released send did not complete within 30s")
	}
}

// take reports whether a send with body is to be frozen, and disarms.
func (f *sendFreezer) take(r *http.Request, body []byte) (frozen chan struct{}, release chan struct{}, landed chan error, ok bool) {
	if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/send/") {
		return nil, nil, nil, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	edit := bytes.Contains(body, []byte(`"m.new_content"`))
	if f.armed == "" || (f.armed == "edit") != edit {
		return nil, nil, nil, false
	}
	f.armed = ""
	return f.frozen, f.release, f.landed, true
}

func (f *sendFreezer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if frozen, release, landed, ok := f.take(r, body); ok {
		frozen <- struct{}{}
		<-release
		uri := strings.Replace(r.URL.RequestURI(), "/_matrix/client/v3/", "/_matrix/client/r0/", 1)
		resp, err := f.forward(context.Background(), r, uri, body)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("released send answered %s", resp.Status)
			}
		}
		landed <- err
		return // its client is gone
	}
	resp, err := f.forward(r.Context(), r, r.URL.RequestURI(), body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

func (f *sendFreezer) forward(ctx context.Context, r *http.Request, uri string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, f.upstream+uri, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = r.Header.Clone()
	return f.client.Do(req)
}

// crashChild is one hookroom process of the crash test.
type crashChild struct {
	cmd  *exec.Cmd
	done chan error
}

func startCrashChild(t *testing.T, yaml, secret, logPath string) *crashChild {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+yaml, childSecret+"="+secret, childLog+"=1")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &crashChild{cmd: cmd, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait(); _ = logFile.Close() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return c
}

// kill SIGKILLs the child and waits until it is gone.
func (c *crashChild) kill(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGKILL)
	var ee *exec.ExitError
	if err := <-c.done; !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("hookroom did not die by SIGKILL: %v", err)
	}
}

// stop SIGTERMs the child and waits for its orderly exit.
func (c *crashChild) stop(t *testing.T) {
	t.Helper()
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		if err != nil {
			t.Errorf("hookroom exited with %v after SIGTERM", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("hookroom did not stop within 60s of SIGTERM")
	}
}

var crashTag = regexp.MustCompile(`\[q\d+\]`)

// crashMessage is one person message of the crash test.
type crashMessage struct {
	room   id.RoomID
	id     id.EventID
	answer string // the final answer the model gives
}

// crashEnv is the setup of the crash tests: rooms with a person and the
// helper agent on a scripted model, set up once by an in-process hookroom,
// and config.yaml pointing at a sendFreezer in front of the homeserver for
// the hookroom processes the tests start.
type crashEnv struct {
	env            *testEnv
	llm            *llmtest.Server
	person         *hstest.User
	helper, router id.UserID
	rooms          []id.RoomID
	since          []string // the person's sync position in each room before the test
	freezer        *sendFreezer
	log            string // the children's log file
}

// newCrashEnv sets up nRooms rooms with the helper agent; databaseYAML is a
// database section for config.yaml ("" for SQLite in data_dir).
func newCrashEnv(t *testing.T, nRooms int, databaseYAML string) *crashEnv {
	e := newEnv(t)
	c := &crashEnv{env: e, llm: llmtest.NewServer(t), person: e.hs.RegisterUser(t, "alice"),
		helper: e.userID("helper"), router: e.userID("router"), log: filepath.Join(e.dir, "hookroom.log")}
	for range nRooms {
		c.rooms = append(c.rooms, createRoom(t, c.person, c.router, c.helper))
	}
	rooms, names := roomsByID("r", c.rooms)
	cfg := e.configAgents(agentSetup{
		LLM: c.llm.URL, Model: "agent-model", Models: "  default:\n    provider: echo\n",
		Rooms: rooms, AgentRooms: names, Admins: []id.UserID{c.person.UserID},
		AgentYAML: "    model: agent\n", Extra: databaseYAML,
	})
	// Set up accounts and rooms once, directly on the homeserver.
	e.start(cfg, &events{}, Options{}).stop(t)

	// From here on hookroom talks to the homeserver through the proxy.
	freezer, proxyURL := newSendFreezer(t, e.hs.URL)
	c.freezer = freezer
	raw, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}
	raw = bytes.Replace(raw, []byte("homeserver: "+e.hs.URL), []byte("homeserver: "+proxyURL), 1)
	if err := os.WriteFile(e.yaml, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range c.rooms {
		c.since = append(c.since, roomSyncToken(t, c.person, r))
	}
	return c
}

// start starts a hookroom process.
func (c *crashEnv) start(t *testing.T) *crashChild {
	return startCrashChild(t, c.env.yaml, c.env.hs.Secret, c.log)
}

// barrier waits until the person's sync shows a message they send now in
// every room: it then shows everything hookroom sent before.
func (c *crashEnv) barrier(t *testing.T) {
	t.Helper()
	for i, r := range c.rooms {
		bar, err := c.person.Client.SendText(context.Background(), r, "barrier")
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "the barrier shows in "+string(r), func() bool {
			return slices.ContainsFunc(roomEventsSince(t, c.person, r, c.since[i]), func(ev *event.Event) bool { return ev.ID == bar.EventID })
		})
	}
}

// logLines returns the lines of the children's log that contain s.
func (c *crashEnv) logLines(t *testing.T, s string) []string {
	data, err := os.ReadFile(c.log)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if strings.Contains(line, s) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

// hookroom is SIGKILLed over and over at random points while people write
// in several rooms and threads: while a placeholder or reply send is in
// flight (frozen by a proxy, and completed on the homeserver after the
// kill, which then does not remember its transaction id), while a
// streaming edit is, and at random moments. In the end every message has
// exactly one agent message, showing its final answer: none lost, none
// doubled, no stray placeholder. On SQLite and on PostgreSQL.
func TestCrashAnswersEveryMessageOnce(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { crashAnswersEveryMessageOnce(t, "") })
	t.Run("postgres", func(t *testing.T) {
		crashAnswersEveryMessageOnce(t, fmt.Sprintf("database:\n  type: postgres\n  uri: %q\n", pgtest.URL(t)))
	})
}

func crashAnswersEveryMessageOnce(t *testing.T, databaseYAML string) {
	nMessages := 48
	if v := os.Getenv(crashSizeEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 12 {
			t.Fatalf("%s=%q: want a number of messages, at least 12", crashSizeEnv, v)
		}
		nMessages = n
	}
	kills := nMessages / 6
	const nRooms = 3
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	var rngMu sync.Mutex // the sender goroutine and the killer both draw
	intN := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}
	t.Logf("%d messages in %d rooms, %d kills (seed %d)", nMessages, nRooms, kills, seed)

	c := newCrashEnv(t, nRooms, databaseYAML)
	llm, person, rooms, since, freezer := c.llm, c.person, c.rooms, c.since, c.freezer
	helper, router := c.helper, c.router

	// The messages: each has its own scripted answer, as often as it may
	// be asked for (every kill may cut a turn short). A third are answered
	// at once (a reply without placeholder); the rest stream for a while
	// (a placeholder, then edits).
	var mu sync.Mutex
	msgs := map[string]*crashMessage{} // by tag
	var roots [nRooms][]id.EventID
	send := func(i int) {
		tag := fmt.Sprintf("[q%d]", i)
		answer := fmt.Sprintf("Answer to %s: %s", tag, strings.Repeat(fmt.Sprintf("word%d ", i), 12))
		reply := llmtest.Reply{Text: llmtest.Split(answer, 8)}
		if i%3 != 0 {
			reply.ChunkDelay = time.Duration(20+intN(50)) * time.Millisecond
		}
		replies := make([]llmtest.Reply, kills+3)
		for k := range replies {
			replies[k] = reply
		}
		llm.On(llmtest.LastUserContains(tag), replies...)
		r := i % nRooms
		content := &event.MessageEventContent{MsgType: event.MsgText, Body: "question " + tag}
		mu.Lock()
		if len(roots[r]) > 0 && intN(3) == 0 { // in an earlier message's thread
			root := roots[r][intN(len(roots[r]))]
			content.RelatesTo = (&event.RelatesTo{}).SetThread(root, root)
		}
		mu.Unlock()
		resp, err := person.Client.SendMessageEvent(context.Background(), rooms[r], event.EventMessage, content)
		if err != nil {
			t.Errorf("send: %v", err)
			return
		}
		mu.Lock()
		msgs[tag] = &crashMessage{room: rooms[r], id: resp.EventID, answer: answer}
		if content.RelatesTo == nil {
			roots[r] = append(roots[r], resp.EventID)
		}
		mu.Unlock()
	}

	batch := nMessages / (kills + 1)
	next := 0
	sendBatch := func(n int) *sync.WaitGroup {
		var wg sync.WaitGroup
		first := next
		next = min(next+n, nMessages)
		last := next
		wg.Go(func() {
			for i := first; i < last; i++ {
				send(i)
				time.Sleep(time.Duration(intN(60)) * time.Millisecond)
			}
		})
		return &wg
	}
	modes := []string{"new", "edit", "new", "random"}
	frozenSends := map[string]int{}
	began := time.Now()
	for k := range kills {
		child := c.start(t)
		mode := modes[k%len(modes)]
		if mode != "random" {
			freezer.arm(mode)
		}
		sending := sendBatch(batch)
		froze := false
		if mode == "random" {
			time.Sleep(time.Duration(300+intN(1500)) * time.Millisecond)
		} else {
			select {
			case <-freezer.frozen:
				froze = true
				time.Sleep(time.Duration(intN(30)) * time.Millisecond)
			case <-time.After(30 * time.Second):
				t.Logf("kill %d: no %s send to freeze within 30s", k+1, mode)
			}
		}
		child.kill(t)
		c.mark(t, "killed run %d (%s, froze a send: %v)", k+1, mode, froze)
		freezer.disarm()
		if froze {
			if err := freezer.releaseFrozen(); err != nil {
				t.Fatalf("kill %d: %v", k+1, err)
			}
			frozenSends[mode]++
		}
		sending.Wait()
	}
	child := c.start(t)
	sendBatch(nMessages - next).Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Wait until every message shows its final answer, then stop hookroom
	// in order: nothing is sent after that.
	var problems []string
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var done bool
		problems, done = crashCheck(t, person, rooms, since, msgs, helper, router)
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	answerTime := time.Since(began)
	child.stop(t)
	c.barrier(t)
	problems, _ = crashCheck(t, person, rooms, since, msgs, helper, router)
	for _, p := range problems {
		t.Error(p)
	}
	logData, _ := os.ReadFile(c.log)
	adopted := bytes.Count(logData, []byte("found a message an earlier run posted"))
	swept := bytes.Count(logData, []byte("removed a message that was posted late"))
	t.Logf("%d messages, %d kills (frozen sends: %v): all answered %v after the first start; %d messages of killed runs adopted by their replays, %d late duplicates removed; %d problems",
		len(msgs), kills, frozenSends, answerTime.Round(time.Millisecond), adopted, swept, len(problems))
	if len(problems) > 0 {
		// What the runs did with the messages concerned, between the kills.
		ids := regexp.MustCompile(`\$[A-Za-z0-9_-]+`).FindAllString(strings.Join(problems, " "), -1)
		for line := range strings.Lines(string(logData)) {
			if strings.Contains(line, "=== ") || strings.Contains(line, `"level":"error"`) ||
				slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(line, id) }) {
				t.Log(strings.TrimSpace(line))
			}
		}
	}
}

// mark writes a line into the children's log.
func (c *crashEnv) mark(t *testing.T, format string, args ...any) {
	f, err := os.OpenFile(c.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "=== "+format+"\n", args...)
}

// crashCheck reads what the person sees in rooms and compares it with
// msgs: every message must have exactly one agent message (by agents),
// whose text, after its latest edit, is the message's answer, and there
// must be no other agent message. It returns what is wrong, and whether
// every message shows its final answer.
func crashCheck(t *testing.T, person *hstest.User, rooms []id.RoomID, since []string, msgs map[string]*crashMessage, agents ...id.UserID) ([]string, bool) {
	t.Helper()
	type agentMsg struct {
		room id.RoomID
		id   id.EventID
		text string
	}
	var posted []*agentMsg
	byID := map[id.EventID]*agentMsg{}
	redacted := map[id.EventID]bool{}
	for i, r := range rooms {
		for _, ev := range roomEventsSince(t, person, r, since[i]) {
			if ev.Type == event.EventRedaction && slices.Contains(agents, ev.Sender) {
				redacted[ev.Redacts] = true
			}
			if !slices.Contains(agents, ev.Sender) || ev.Type != event.EventMessage || ev.Unsigned.RedactedBecause != nil {
				continue
			}
			msg := ev.Content.AsMessage()
			if msg.RelatesTo != nil && msg.RelatesTo.Type == event.RelReplace {
				if target := byID[msg.RelatesTo.EventID]; target != nil && msg.NewContent != nil {
					target.text = msg.NewContent.Body
				}
				continue
			}
			m := &agentMsg{room: r, id: ev.ID, text: msg.Body}
			posted = append(posted, m)
			byID[ev.ID] = m
		}
	}
	var problems []string
	shown := map[string][]*agentMsg{}
	for _, m := range posted {
		if redacted[m.id] {
			continue
		}
		tag := crashTag.FindString(m.text)
		if tag == "" || msgs[tag] == nil {
			problems = append(problems, fmt.Sprintf("stray agent message %s in %s: %q", m.id, m.room, m.text))
			continue
		}
		shown[tag] = append(shown[tag], m)
	}
	done := true
	for tag, q := range msgs {
		got := shown[tag]
		switch {
		case len(got) == 0:
			problems = append(problems, fmt.Sprintf("%s (%s) has no answer", tag, q.id))
			done = false
		case len(got) > 1:
			problems = append(problems, fmt.Sprintf("%s (%s) has %d agent messages", tag, q.id, len(got)))
		}
		for _, m := range got {
			if m.text != q.answer {
				problems = append(problems, fmt.Sprintf("%s (%s): agent message %s shows %q, want the final answer", tag, q.id, m.id, m.text))
				done = false
			}
		}
	}
	slices.Sort(problems)
	return problems, done
}

// A placeholder send of a killed run that reaches the homeserver only
// after the replayed turn looked for it, and posted its own, is removed
// when the replayed turn ends: one agent message remains, showing the
// final answer.
func TestLateSendOfKilledRunIsRemoved(t *testing.T) {
	c := newCrashEnv(t, 1, "")
	const tag = "[q0]"
	answer := "Answer to " + tag + ": late but once"
	hold := make(chan struct{})
	c.llm.On(llmtest.LastUserContains(tag),
		// The killed run streams slowly: it posts a placeholder (frozen).
		llmtest.Reply{Text: llmtest.Split(answer, 8), ChunkDelay: 200 * time.Millisecond},
		// The replay answers once the frozen send has landed.
		llmtest.Reply{Text: llmtest.Split(answer, 8)}.WithHold(hold))
	c.freezer.arm("new")
	child := c.start(t)
	resp, err := c.person.Client.SendText(context.Background(), c.rooms[0], "question "+tag)
	if err != nil {
		t.Fatal(err)
	}
	msgs := map[string]*crashMessage{tag: {room: c.rooms[0], id: resp.EventID, answer: answer}}
	select {
	case <-c.freezer.frozen:
	case <-time.After(30 * time.Second):
		t.Fatal("hookroom posted no placeholder within 30s")
	}
	child.kill(t)
	c.freezer.disarm()

	// The replay does not find the frozen placeholder and posts its own.
	child = c.start(t)
	agentMessages := func() int {
		n := 0
		for _, ev := range roomEventsSince(t, c.person, c.rooms[0], c.since[0]) {
			if ev.Sender == c.helper && ev.Type == event.EventMessage {
				n++
			}
		}
		return n
	}
	waitUntil := func(what string, cond func() bool) {
		t.Helper()
		testkit.Eventually(t, 60*time.Second, what, cond)
	}
	waitUntil("the replay posted its placeholder", func() bool { return agentMessages() == 1 })
	// Now the killed run's placeholder lands: a second agent message.
	if err := c.freezer.releaseFrozen(); err != nil {
		t.Fatal(err)
	}
	waitUntil("the late placeholder shows", func() bool { return agentMessages() == 2 })
	close(hold)
	waitUntil("the late placeholder was removed", func() bool {
		return len(c.logLines(t, "removed a message that was posted late")) > 0
	})
	child.stop(t)
	c.barrier(t)
	if problems, done := crashCheck(t, c.person, c.rooms, c.since, msgs, c.helper, c.router); !done || len(problems) > 0 {
		t.Errorf("answered: %v; problems: %v", done, problems)
	}
}
