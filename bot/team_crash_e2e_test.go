package bot

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/pgtest"
	"github.com/hookroom/hookroom/team"
	"github.com/hookroom/hookroom/tracking"
)

// Sizes and seed of TestTeamCrashAnswersEveryMessageOnce: the number of
// messages (default 12, with a kill for every 3), and the seed of its
// random choices (default: the time), logged so that a failure can be
// replayed.
const (
	teamCrashSizeEnv = "HOOKROOM_TEAM_CRASH_MESSAGES"
	teamCrashSeedEnv = "HOOKROOM_TEAM_CRASH_SEED"
)

// synthesisMarker ends the user message of a team leader's synthesis call
// (team.SynthesisPrompt), and no other request's.
const synthesisMarker = "Write the team's reply now."

// modelCall is one request to the scripted model server, as the modelLog
// proxy in front of it saw it.
type modelCall struct {
	Req        llmtest.Request // Body decoded
	Start, End time.Time       // End: when its answer ended (zero while it runs)
	// Complete: the whole answer reached hookroom (HTTP 200, every byte
	// written to the client, and for a stream its "[DONE]").
	Complete bool
}

// modelLog is an HTTP proxy in front of an llmtest server that keeps every
// chat request with the time it arrived and the time its answer ended,
// and whether the answer reached the client whole: the request log of the
// team crash test and benchmark (llmtest keeps requests without times).
type modelLog struct {
	URL      string // the proxy's root; a model's base_url is URL+"/v1"
	upstream string

	mu      sync.Mutex
	calls   []*modelCall
	changed chan struct{} // closed and replaced when a call arrives
}

func newModelLog(t testing.TB, upstream string) *modelLog {
	l := &modelLog{upstream: strings.TrimSuffix(upstream, "/"), changed: make(chan struct{})}
	srv := httptest.NewServer(l)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	l.URL = srv.URL
	return l
}

func (l *modelLog) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	c := &modelCall{Start: time.Now()}
	_ = json.Unmarshal(raw, &c.Req.Body)
	if strings.HasSuffix(r.URL.Path, "/chat/completions") {
		l.mu.Lock()
		l.calls = append(l.calls, c)
		close(l.changed)
		l.changed = make(chan struct{})
		l.mu.Unlock()
	}
	complete := l.forward(w, r, raw)
	l.mu.Lock()
	c.End, c.Complete = time.Now(), complete
	l.mu.Unlock()
}

// forward sends the request on and streams the answer back, flushing as it
// goes; it reports whether the whole answer was delivered.
func (l *modelLog) forward(w http.ResponseWriter, r *http.Request, raw []byte) bool {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, l.upstream+r.URL.RequestURI(), bytes.NewReader(raw))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return false
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return false
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	flusher, _ := w.(http.Flusher)
	var tail []byte
	buf := make([]byte, 4096)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return false
			}
			if flusher != nil {
				flusher.Flush()
			}
			tail = append(tail, buf[:n]...)
			if len(tail) > 64 {
				tail = tail[len(tail)-64:]
			}
		}
		if rerr == io.EOF {
			stream := strings.Contains(resp.Header.Get("Content-Type"), "event-stream")
			return resp.StatusCode == http.StatusOK && (!stream || bytes.Contains(tail, []byte("[DONE]")))
		}
		if rerr != nil {
			return false
		}
	}
}

// snapshot returns a copy of the calls so far.
func (l *modelLog) snapshot() []modelCall {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]modelCall, len(l.calls))
	for i, c := range l.calls {
		out[i] = *c
	}
	return out
}

// waitFor waits up to timeout for a call after the first from calls that
// match; it reports whether one came.
func (l *modelLog) waitFor(from int, timeout time.Duration, match func(llmtest.Request) bool) bool {
	deadline := time.After(timeout)
	for {
		l.mu.Lock()
		changed := l.changed
		for _, c := range l.calls[min(from, len(l.calls)):] {
			if match(c.Req) {
				l.mu.Unlock()
				return true
			}
		}
		l.mu.Unlock()
		select {
		case <-changed:
		case <-deadline:
			return false
		}
	}
}

// teamCallKind classifies a request of the team tests: "member" (an agent
// of model agent-model answering as a member; member names it), "plan" or
// "synthesis" (the team's own leader, model lead-model), else "".
func teamCallKind(r llmtest.Request, members []string) (kind, member string) {
	switch r.Body.Model {
	case "lead-model":
		if strings.Contains(r.LastUser(), synthesisMarker) {
			return "synthesis", ""
		}
		return "plan", ""
	case "agent-model":
		for _, m := range members {
			if strings.Contains(r.System(), "You are "+m+",") {
				return "member", m
			}
		}
	}
	return "", ""
}

// teamCrashMessage is one person message of the team crash test.
type teamCrashMessage struct {
	tag     string
	team    string   // crew (collaborate) or squad (coordinate)
	members []string // the team's members, in order
	*crashMessage
}

// hookroom is SIGKILLed at random points of team runs — while a member is
// asked, while the coordinate team's leader plans, while the leader
// writes the synthesis, at random moments — and restarted, while a person
// writes to a configured collaborate team (crew: alpha and beta) and a
// coordinate team (squad: beta and gamma, planned by the team's own
// model). In the end every message has exactly one team reply in the room,
// showing both members' answers and the synthesis, and nothing else was
// posted.
//
// "Completed" member run: one whose answer hookroom recorded in the
// database (team_step row of the message, team, member and step "answer"
// with status done; its ended_at is when the answer was in). From then on
// a replay reuses the answer: the model must never be asked for it again.
// A request that a kill cut short (the answer had not reached team_step:
// the kill fell while the model streamed, or after the answer arrived and
// before it was recorded) may be asked again. Checked from the request log
// of a proxy in front of the scripted model server (every request with the
// time it arrived) against team_step: for every step of every message
// (member answers, plan, synthesis) the row is done, no request for it
// arrived after its ended_at, there are at most as many requests as the
// row counts attempts, and between any two requests for it hookroom was
// killed. The seed of the random choices (team, room, pace of the
// answers, kill points and delays) is logged; HOOKROOM_TEAM_CRASH_SEED
// replays it. On SQLite and on PostgreSQL.
func TestTeamCrashAnswersEveryMessageOnce(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		teamCrashAnswersEveryMessageOnce(t, "", func(dir string) (*dbutil.Database, error) {
			return tracking.OpenSQLite(context.Background(), filepath.Join(dir, "data", "hookroom.db"))
		})
	})
	t.Run("postgres", func(t *testing.T) {
		uri := pgtest.URL(t)
		teamCrashAnswersEveryMessageOnce(t, fmt.Sprintf("database:\n  type: postgres\n  uri: %q\n", uri), func(string) (*dbutil.Database, error) {
			return dbutil.NewWithDialect(uri, "postgres")
		})
	})
}

// teamCrashAnswersEveryMessageOnce runs the team crash test with
// databaseYAML in config.yaml ("" for SQLite in data_dir); openDB opens
// that database (dir: the test's config directory) for the checks, once
// hookroom stopped.
func teamCrashAnswersEveryMessageOnce(t *testing.T, databaseYAML string, openDB func(dir string) (*dbutil.Database, error)) {
	nMessages := 12
	if v := os.Getenv(teamCrashSizeEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 6 {
			t.Fatalf("%s=%q: want a number of messages, at least 6", teamCrashSizeEnv, v)
		}
		nMessages = n
	}
	kills := nMessages / 3
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(teamCrashSeedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a number", teamCrashSeedEnv, v)
		}
		seed = s
	}
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	var rngMu sync.Mutex
	intN := func(n int) int {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(n)
	}
	const nRooms = 2
	t.Logf("%d messages in %d rooms, %d kills (seed %d; %s=%d replays it)", nMessages, nRooms, kills, seed, teamCrashSeedEnv, seed)

	e := newEnv(t)
	llm := llmtest.NewServer(t)
	ml := newModelLog(t, llm.RootURL)
	person := e.hs.RegisterUser(t, "alice")
	agentNames := []string{"alpha", "beta", "gamma"}
	accounts := []id.UserID{e.userID("router"), e.userID("crew"), e.userID("squad")}
	for _, a := range agentNames {
		accounts = append(accounts, e.userID(a))
	}
	var rooms []id.RoomID
	for range nRooms {
		rooms = append(rooms, createRoom(t, person, accounts...))
	}
	roomYAML, roomNames := roomsByID("r", rooms)
	teams := fmt.Sprintf("teams:\n"+
		"  crew:\n    username: %s\n    members: [alpha, beta]\n    mode: collaborate\n    model: lead\n    rooms: [%s]\n"+
		"  squad:\n    username: %s\n    members: [beta, gamma]\n    mode: coordinate\n    model: lead\n    rooms: [%s]\n",
		e.localpart("crew"), roomNames, e.localpart("squad"), roomNames)
	cfg := e.configAgents(agentSetup{
		LLM: ml.URL + "/v1", Model: "agent-model",
		Models: fmt.Sprintf("  default:\n    provider: echo\n  lead:\n    provider: openai\n    base_url: %s/v1\n    model: lead-model\n", ml.URL),
		Rooms:  roomYAML, AgentRooms: roomNames, Admins: []id.UserID{person.UserID},
		Agents: agentNames, AgentYAML: "    model: agent\n", Extra: teams + databaseYAML,
	})
	// Set up accounts and rooms once, in process.
	e.start(cfg, &events{}, Options{}).stop(t)
	c := &crashEnv{env: e, llm: llm, person: person, router: accounts[0], rooms: rooms, log: filepath.Join(e.dir, "hookroom.log")}
	for _, r := range rooms {
		c.since = append(c.since, roomSyncToken(t, person, r))
	}

	// The messages: even ones to crew, odd ones to squad, each with its
	// own scripted answers (as often as kills may cut them short).
	var mu sync.Mutex
	msgs := map[string]*teamCrashMessage{}
	repeat := func(r llmtest.Reply) []llmtest.Reply { return slices.Repeat([]llmtest.Reply{r}, kills+3) }
	pace := func() time.Duration { return time.Duration(30+intN(50)) * time.Millisecond }
	send := func(i int) {
		tag := fmt.Sprintf("[q%d]", i)
		m := &teamCrashMessage{tag: tag, team: "crew", members: []string{"alpha", "beta"}}
		if i%2 == 1 {
			m.team, m.members = "squad", []string{"beta", "gamma"}
		}
		res := team.Result{Synthesis: fmt.Sprintf("Synthesis of %s:%s", tag, strings.Repeat(fmt.Sprintf(" s%d", i), 8))}
		var plan []string
		for _, member := range m.members {
			text := fmt.Sprintf("%s on %s:%s", member, tag, strings.Repeat(" "+member, 6))
			res.Contributions = append(res.Contributions, team.Contribution{Member: hooks.AgentName(member), Text: text})
			llm.On(func(r *llmtest.Request) bool {
				k, who := teamCallKind(*r, m.members)
				return k == "member" && who == member && strings.Contains(r.LastUser(), tag)
			}, repeat(llmtest.Reply{Text: llmtest.Split(text, 8), ChunkDelay: pace()})...)
			plan = append(plan, fmt.Sprintf(`{"member": %q, "task": "%s the part of %s"}`, member, tag, member))
		}
		if m.team == "squad" {
			llm.On(func(r *llmtest.Request) bool {
				k, _ := teamCallKind(*r, nil)
				return k == "plan" && strings.Contains(r.LastUser(), tag)
			}, repeat(llmtest.Reply{Text: llmtest.Split(`{"assignments": [`+strings.Join(plan, ", ")+`]}`, 6), ChunkDelay: pace()})...)
		}
		llm.On(func(r *llmtest.Request) bool {
			k, _ := teamCallKind(*r, nil)
			return k == "synthesis" && strings.Contains(r.LastUser(), tag)
		}, repeat(llmtest.Reply{Text: llmtest.Split(res.Synthesis, 8), ChunkDelay: pace()})...)
		room := rooms[intN(nRooms)]
		resp, err := person.Client.SendText(context.Background(), room, fmt.Sprintf("@%s question %s", e.localpart(m.team), tag))
		if err != nil {
			t.Errorf("send: %v", err)
			return
		}
		m.crashMessage = &crashMessage{room: room, id: resp.EventID, answer: team.RenderFolded(res, nil)}
		mu.Lock()
		msgs[tag] = m
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
				time.Sleep(time.Duration(intN(200)) * time.Millisecond)
			}
		})
		return &wg
	}

	// The kills: at a member's request, the plan's, the synthesis', or at
	// random, after a random delay.
	isKind := func(kind string) func(llmtest.Request) bool {
		return func(r llmtest.Request) bool { k, _ := teamCallKind(r, agentNames); return k == kind }
	}
	modes := []string{"member", "synthesis", "plan", "random"}
	var killedAt []time.Time
	synthesisKills := 0
	began := time.Now()
	for k := range kills {
		child := c.start(t)
		from := len(ml.snapshot())
		sending := sendBatch(batch)
		mode := modes[k%len(modes)]
		var delay time.Duration
		switch mode {
		case "random":
			delay = time.Duration(500+intN(3000)) * time.Millisecond
			time.Sleep(delay)
		default:
			// A synthesis streams for 7 chunk delays of at least 30 ms:
			// a kill within 100 ms of its request falls while it streams,
			// after the members' answers were recorded.
			maxDelay := map[string]int{"member": 400, "plan": 200, "synthesis": 100}[mode]
			delay = time.Duration(intN(maxDelay)) * time.Millisecond
			if ml.waitFor(from, 60*time.Second, isKind(mode)) {
				time.Sleep(delay)
				if mode == "synthesis" {
					synthesisKills++
				}
			} else {
				t.Logf("kill %d: no %s request within 60s", k+1, mode)
			}
		}
		child.kill(t)
		killedAt = append(killedAt, time.Now())
		c.mark(t, "killed run %d (%s, %v after)", k+1, mode, delay)
		sending.Wait()
	}
	child := c.start(t)
	sendBatch(nMessages - next).Wait()
	if t.Failed() {
		t.FailNow()
	}

	// Every message shows its one team reply; then hookroom stops in order.
	plain := map[string]*crashMessage{}
	for tag, m := range msgs {
		plain[tag] = m.crashMessage
	}
	var problems []string
	deadline := time.Now().Add(3 * time.Minute)
	for {
		var done bool
		problems, done = crashCheck(t, person, rooms, c.since, plain, accounts...)
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	answerTime := time.Since(began)
	child.stop(t)
	c.barrier(t)
	problems, _ = crashCheck(t, person, rooms, c.since, plain, accounts...)
	for _, p := range problems {
		t.Error(p)
	}

	// No step recorded done was asked of the model again.
	ctx := context.Background()
	db, err := openDB(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := team.NewStore(db)
	calls := ml.snapshot()
	killedBetween := func(a, b time.Time) bool {
		return slices.ContainsFunc(killedAt, func(k time.Time) bool { return k.After(a) && k.Before(b) })
	}
	var asked, askedAgain, memberSteps int
	for _, tag := range slices.Sorted(func(yield func(string) bool) {
		for tag := range msgs {
			if !yield(tag) {
				return
			}
		}
	}) {
		m := msgs[tag]
		recs, err := store.List(ctx, m.id, hooks.AgentName(m.team))
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{"synthesis": true}
		if m.team == "squad" {
			want["plan"] = true
		}
		for _, member := range m.members {
			want["member:"+member] = true
		}
		for _, rec := range recs {
			step := string(rec.Step)
			if rec.Step == team.StepAnswer {
				step = "member:" + string(rec.Member)
				memberSteps++
			}
			if !want[step] {
				t.Errorf("%s: an unexpected step %s recorded", tag, rec.Key)
				continue
			}
			delete(want, step)
			if rec.Status != team.StatusDone {
				t.Errorf("%s: step %s is %s (%s), want done", tag, rec.Key, rec.Status, rec.Error)
				continue
			}
			var mine []modelCall
			for _, call := range calls {
				kind, who := teamCallKind(call.Req, m.members)
				if kind == "member" {
					kind += ":" + who
				}
				if kind == step && strings.Contains(call.Req.LastUser(), tag) {
					mine = append(mine, call)
				}
			}
			asked += len(mine)
			if len(mine) > 1 {
				askedAgain += len(mine) - 1
			}
			switch {
			case len(mine) == 0:
				t.Errorf("%s: step %s is done but the model was never asked for it", tag, rec.Key)
			case len(mine) > rec.Attempts:
				t.Errorf("%s: the model was asked %d times for step %s, which was begun %d times", tag, len(mine), rec.Key, rec.Attempts)
			}
			for j, call := range mine {
				if call.Start.UnixMilli() > rec.EndedAt.UnixMilli() {
					t.Errorf("%s: step %s was asked of the model at %s, after its answer was recorded at %s",
						tag, rec.Key, call.Start.Format(time.StampMilli), rec.EndedAt.Format(time.StampMilli))
				}
				if j > 0 && !killedBetween(mine[j-1].Start, call.Start) {
					t.Errorf("%s: step %s was asked again at %s without a kill since the request of %s",
						tag, rec.Key, call.Start.Format(time.StampMilli), mine[j-1].Start.Format(time.StampMilli))
				}
			}
		}
		for step := range want {
			t.Errorf("%s: step %s was not recorded", tag, step)
		}
	}
	reuse := regexp.MustCompile(`"reused_steps":[1-9]`)
	replaysReusing := len(slices.DeleteFunc(c.logLines(t, `"team answered"`), func(l string) bool { return !reuse.MatchString(l) }))
	if synthesisKills > 0 && replaysReusing == 0 {
		t.Errorf("%d kills fell during a synthesis, yet no replay reused a recorded step", synthesisKills)
	}
	t.Logf("%d messages, %d kills: all answered %v after the first start; %d member steps, %d model requests for team steps (%d repeated after a kill), %d team runs reused recorded steps; %d problems",
		len(msgs), kills, answerTime.Round(time.Millisecond), memberSteps, asked, askedAgain, replaysReusing, len(problems))
	if t.Failed() {
		for _, line := range c.logLines(t, "") {
			if strings.Contains(line, "=== ") || strings.Contains(line, `"level":"error"`) || strings.Contains(line, "team") {
				t.Log(line)
			}
		}
	}
}
