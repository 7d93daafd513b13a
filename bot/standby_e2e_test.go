package bot

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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

// standbyKillsEnv sets the number of SIGKILLs of TestHotStandbyTakesOver
// (default 2; the measurement takes 5, for a median).
const standbyKillsEnv = "HOOKROOM_STANDBY_KILLS"

// standbyWaiting is what a standby logs once while it waits.
const standbyWaiting = "standby: another hookroom holds the database; waiting to take over"

// standbyChild is one hookroom process of the standby test, with its
// own log file and HTTP listener.
type standbyChild struct {
	*crashChild
	name string
	log  string
	addr string // the HTTP listener's address
}

// startStandbyChild starts a hookroom process for the config.yaml at yaml
// and waits until its HTTP listener runs.
func startStandbyChild(t *testing.T, e *testEnv, name string) *standbyChild {
	t.Helper()
	c := &standbyChild{name: name, log: filepath.Join(e.dir, name+".log")}
	c.crashChild = startCrashChild(t, e.yaml, e.hs.Secret, c.log)
	testkit.Eventually(t, 60*time.Second, name+"'s HTTP listener", func() bool {
		for _, line := range c.logLines(t, "HTTP listener started") {
			var l struct{ Address string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Address != "" {
				c.addr = l.Address
				return true
			}
		}
		return false
	})
	return c
}

// logLines returns the lines of c's log that contain s.
func (c *standbyChild) logLines(t *testing.T, s string) []string {
	t.Helper()
	f, err := os.Open(c.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// readyz returns c's /readyz status and reasons.
func (c *standbyChild) readyz(t *testing.T) (int, []string) {
	t.Helper()
	resp, err := http.Get("http://" + c.addr + "/readyz")
	if err != nil {
		t.Fatalf("%s: /readyz: %v", c.name, err)
	}
	defer resp.Body.Close()
	var body struct{ Reasons []string }
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return resp.StatusCode, body.Reasons
}

// isStandby reports whether c's /readyz says it is a standby.
func (c *standbyChild) isStandby(t *testing.T) bool {
	code, reasons := c.readyz(t)
	return code == http.StatusServiceUnavailable && slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, "standby: ") })
}

// waitStandby waits until c logged that it waits and /readyz says so.
func (c *standbyChild) waitStandby(t *testing.T) {
	t.Helper()
	testkit.Eventually(t, 60*time.Second, c.name+" waits as the standby", func() bool {
		return len(c.logLines(t, standbyWaiting)) > 0 && c.isStandby(t)
	})
}

// takeOver polls c's /readyz every 50 ms from since (the active one's
// end) until it answers 200, failing after 15 s; it returns when /readyz
// stopped saying "standby" (the lock was taken) and when it said ready.
func (c *standbyChild) takeOver(t *testing.T, since time.Time) (locked, ready time.Duration) {
	t.Helper()
	for {
		code, _ := c.readyz(t)
		if locked == 0 && !c.isStandby(t) {
			locked = time.Since(since)
		}
		if code == http.StatusOK {
			return locked, time.Since(since)
		}
		if time.Since(since) > 15*time.Second {
			t.Fatalf("%s did not take over within 15s (lock taken after %v)", c.name, locked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two hookroom processes on one PostgreSQL database, database.standby on:
// the second waits (/readyz 503 "standby", logged once) while the first
// answers a person in an encrypted room (matrix-nio with libolm). The
// active one is SIGKILLed in the middle of streaming an answer, after a
// second question arrived that no process took in (the active one was
// stopped with SIGSTOP first); the standby takes over within 15 s, on the
// same devices, and answers both, which the person decrypts. The killed
// one comes back as the new standby, and the next kill goes the other way.
// At the end a clean stop hands over within a second or so. Every
// question has exactly one answer.
func TestHotStandbyTakesOver(t *testing.T) {
	kills := 2
	if v := os.Getenv(standbyKillsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of kills, at least 1", standbyKillsEnv, v)
		}
		kills = n
	}
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice := e.hs.RegisterUser(t, "alice")
	setup := e.secretRoomSetup(llm, alice)
	pgURL := pgtest.URL(t)
	setup.Extra = fmt.Sprintf("database:\n  type: postgres\n  uri: %q\n  standby: true\nhttp:\n  listen: 127.0.0.1:0\n", pgURL)
	cfg := e.configAgents(setup)
	// The accounts and the encrypted room, set up once in process.
	r := e.start(cfg, &events{}, Options{})
	room := r.bot.w().rooms["secret"]
	r.stop(t)
	agent := e.userID("helper")
	mention := "@" + e.localpart("helper")

	n := 0
	var children []*standbyChild
	start := func() *standbyChild {
		c := startStandbyChild(t, e, fmt.Sprintf("hookroom%d", n))
		children = append(children, c)
		n++
		return c
	}
	active := start()
	testkit.Eventually(t, 60*time.Second, "the first hookroom is ready", func() bool {
		code, _ := active.readyz(t)
		return code == http.StatusOK
	})
	phone := e.joinEncrypted(t, hstest.Nio, alice, room)
	since := roomSyncToken(t, alice, room)
	standby := start()
	standby.waitStandby(t)

	questions := map[id.EventID]string{} // question → its final answer
	ask := func(tag string, reply llmtest.Reply, times int) id.EventID {
		replies := make([]llmtest.Reply, times)
		for i := range replies {
			replies[i] = reply
		}
		llm.On(llmtest.LastUserContains(tag), replies...)
		q := phone.SendText(t, room, mention+" question "+tag)
		questions[q] = strings.Join(reply.Text, "")
		return q
	}
	// answered waits until the person decrypts the answer to q and the
	// turn is over (the message is marked handled with the turn; the
	// final text shows a moment before: the model's stream is not over).
	answered := func(q id.EventID) {
		t.Helper()
		got := phone.WaitMessage(t, room, hstest.Match{Sender: agent, ThreadRoot: q, Contains: questions[q], Timeout: 60 * time.Second})
		if !got.Encrypted || got.Undecryptable || got.UndecryptableEdits > 0 {
			t.Errorf("answer to %s: encrypted %v, undecryptable %v (%d edits undecryptable), want an encrypted answer that decrypts",
				q, got.Encrypted, got.Undecryptable, got.UndecryptableEdits)
		}
		testkit.Eventually(t, 30*time.Second, "the turn of "+string(q)+" is over", func() bool {
			return slices.ContainsFunc(children, func(c *standbyChild) bool {
				return slices.ContainsFunc(c.logLines(t, string(q)), func(l string) bool { return strings.Contains(l, `"message":"answered"`) })
			})
		})
	}
	answered(ask("[warm-up]", llmtest.Text("Answer to [warm-up]."), 1))

	var locked, ready []time.Duration
	for k := range kills {
		// A streamed answer in progress when the active one dies.
		mid := fmt.Sprintf("[k%d-mid]", k)
		text := fmt.Sprintf("Answer to %s, streamed slowly in many pieces so that the kill lands in the middle.", mid)
		qMid := ask(mid, llmtest.Reply{Text: llmtest.Split(text, 10), ChunkDelay: 200 * time.Millisecond}, 3)
		testkit.Eventually(t, 30*time.Second, "the model streams the answer to "+mid, func() bool {
			return slices.ContainsFunc(llm.Requests(), func(r llmtest.Request) bool { return strings.Contains(r.LastUser(), mid) })
		})
		// A question that arrives while no hookroom takes anything in: the
		// active one is stopped (it still holds the lock), the standby waits.
		if err := active.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		gap := fmt.Sprintf("[k%d-gap]", k)
		qGap := ask(gap, llmtest.Text(fmt.Sprintf("Answer to %s.", gap)), 2)
		if !standby.isStandby(t) {
			t.Fatal("the standby took over while the active one held the lock")
		}
		active.kill(t)
		killed := time.Now()
		l, rd := standby.takeOver(t, killed)
		locked, ready = append(locked, l), append(ready, rd)
		t.Logf("kill %d: the standby took the lock %v and was ready %v after the SIGKILL", k+1, l.Round(time.Millisecond), rd.Round(time.Millisecond))
		answered(qMid)
		answered(qGap)
		if got := len(standby.logLines(t, standbyWaiting)); got != 1 {
			t.Errorf("%s logged %q %d times, want once", standby.name, standbyWaiting, got)
		}
		if len(standby.logLines(t, "standby: took over the database")) != 1 {
			t.Errorf("%s did not log its take-over once", standby.name)
		}
		// The killed one comes back, as the standby.
		active, standby = standby, start()
		standby.waitStandby(t)
	}

	// A clean stop hands over at once.
	qBefore := ask("[before-stop]", llmtest.Text("Answer to [before-stop]."), 1)
	answered(qBefore)
	active.stop(t)
	stopped := time.Now()
	l, rd := standby.takeOver(t, stopped)
	t.Logf("clean stop: the standby took the lock %v and was ready %v after the active one exited", l.Round(time.Millisecond), rd.Round(time.Millisecond))
	if l > 3*time.Second {
		t.Errorf("after a clean stop the standby took the lock only after %v, want within a poll (1s)", l)
	}
	answered(ask("[after-stop]", llmtest.Text("Answer to [after-stop]."), 1))

	// Stopped in order, nothing more is sent: every question has exactly
	// one agent message in its thread, and there is no other.
	standby.stop(t)
	perQuestion := map[id.EventID]int{}
	redacted := map[id.EventID]bool{}
	evs := roomEventsSince(t, alice, room, since)
	for _, ev := range evs {
		if ev.Sender == agent && ev.Type == event.EventRedaction {
			redacted[ev.Redacts] = true
		}
	}
	for _, ev := range evs {
		if ev.Sender != agent || ev.Type != event.EventEncrypted || ev.Unsigned.RedactedBecause != nil || redacted[ev.ID] {
			continue
		}
		rel := ev.Content.AsEncrypted().RelatesTo
		if rel != nil && rel.Type == event.RelReplace {
			continue // an edit
		}
		root := rel.GetThreadParent()
		if _, ok := questions[root]; !ok {
			t.Errorf("a stray agent message %s (thread %q)", ev.ID, root)
			continue
		}
		perQuestion[root]++
	}
	for q := range questions {
		if perQuestion[q] != 1 {
			t.Errorf("question %s has %d agent messages, want 1", q, perQuestion[q])
		}
	}
	adopted := 0
	for _, c := range children {
		adopted += len(c.logLines(t, "found a message an earlier run posted"))
	}
	t.Logf("%d kills: lock taken after %v (median %v), ready after %v (median %v); %d questions answered once each, %d answers of killed runs adopted by the replay",
		kills, roundAll(locked), median(locked), roundAll(ready), median(ready), len(questions), adopted)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond)
}
