package bot

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
	"github.com/hookroom/hookroom/plugins"
	"github.com/hookroom/hookroom/tracking"
)

// Long-term memory on a real homeserver, through the built-in plugin: the
// model stores a fact with the remember tool; in a new thread the fact is
// in the model request (recalled for this person); !memory lists it;
// !memory forget all deletes it, and the next request no longer holds it.
func TestMemoryPlugin(t *testing.T) {
	e := &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	e.person = e.hs.RegisterUser(t, "alice")
	e.room = createRoom(t, e.person, e.userID("router"), e.userID("helper"))
	e.cfg = e.body("plugins:\n  - builtin: memory\n    settings:\n      agents:\n        helper: {scopes: [person]}\n", "")
	cfg := e.config(e.cfg)
	e.bot = e.run(cfg, Options{ConfigOptions: e.configOptions()}, e.testLog(zerolog.InfoLevel))
	e.waitLog("account caught up", 2)
	router, helper := e.userID("router"), e.userID("helper")

	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("c1", "remember", `{"text":"Alice's cat is called Tom."}`)),
		llmtest.Text("I'll remember that."),
	)
	e.say("please remember: my cat is called Tom", "")
	waitMessageFrom(t, e.person, e.room, helper, "I'll remember that.")

	e.llm.Script(llmtest.Text("Your cat is Tom."))
	e.say("what is my cat called?", "")
	waitMessageFrom(t, e.person, e.room, helper, "Your cat is Tom.")
	reqs := e.llm.Requests()
	if all := strings.Join(messageContents(reqs[len(reqs)-1].Body.Messages), "\n"); !strings.Contains(all, "cat is called Tom") {
		t.Fatalf("the new thread's request lacks the recalled memory:\n%s", all)
	}

	e.say("!memory", "")
	waitMessageFrom(t, e.person, e.room, router, "cat is called Tom")
	e.say("!memory forget all", "")
	waitMessageFrom(t, e.person, e.room, router, "1")

	e.llm.Script(llmtest.Text("I don't know."))
	e.say("what is my cat called, again?", "")
	waitMessageFrom(t, e.person, e.room, helper, "I don't know.")
	reqs = e.llm.Requests()
	if all := strings.Join(messageContents(reqs[len(reqs)-1].Body.Messages), "\n"); strings.Contains(all, "Tom") {
		t.Errorf("a forgotten memory is still in the request:\n%s", all)
	}
}

// memoryEnv is hookroom with the memory plugin (pluginsYAML), agent helper
// in two rooms (one and two) where two people, alice and bob, talk to it.
type memoryEnv struct {
	*reloadEnv
	alice, bob *hstest.User
	one, two   id.RoomID
}

func newMemoryEnv(t *testing.T, pluginsYAML func(llmURL string) string) *memoryEnv {
	e := &memoryEnv{reloadEnv: &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}}
	e.alice = e.hs.RegisterUser(t, "alice")
	e.bob = e.hs.RegisterUser(t, "bob")
	e.person = e.alice
	router, helper := e.userID("router"), e.userID("helper")
	e.one = createRoom(t, e.alice, router, helper)
	e.two = createRoom(t, e.alice, router, helper, e.bob.UserID)
	if _, err := e.bob.Client.JoinRoomByID(context.Background(), e.two); err != nil {
		t.Fatal(err)
	}
	e.room = e.one
	e.cfg = agentSetup{LLM: e.llm.URL, Model: "agent-model", Admins: []id.UserID{e.alice.UserID, e.bob.UserID},
		Rooms:      fmt.Sprintf("  one:\n    id: %q\n  two:\n    id: %q\n", e.one, e.two),
		AgentRooms: "one, two", Extra: pluginsYAML(e.llm.URL)}.body(e.testEnv)
	e.bot = e.run(e.config(e.cfg), Options{ConfigOptions: e.configOptions()}, e.testLog(zerolog.DebugLevel))
	e.waitLog("account caught up", 2)
	return e
}

// ask sends text from u into room (a new thread), waits for helper's reply
// reply there and returns the model request that answered it.
func (e *memoryEnv) ask(u *hstest.User, room id.RoomID, text, reply string) string {
	e.t.Helper()
	e.llm.Script(llmtest.Text(reply))
	if _, err := u.Client.SendMessageEvent(context.Background(), room, event.EventMessage,
		&event.MessageEventContent{MsgType: event.MsgText, Body: text}); err != nil {
		e.t.Fatalf("send: %v", err)
	}
	waitMessageFrom(e.t, u, room, e.userID("helper"), reply)
	return e.requestWith(text)
}

// requestWith is the last model request whose messages hold text, joined.
func (e *memoryEnv) requestWith(text string) string {
	e.t.Helper()
	reqs := e.llm.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if all := strings.Join(messageContents(reqs[i].Body.Messages), "\n"); strings.Contains(all, text) {
			return all
		}
	}
	e.t.Fatalf("no model request holds %q", text)
	return ""
}

// db opens hookroom's own SQLite database, next to the running bot.
func (e *memoryEnv) db() *dbutil.Database {
	e.t.Helper()
	db, err := tracking.OpenSQLite(context.Background(), e.bot.bot.w().cfg.Database.URI.Reveal())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = db.Close() })
	return db
}

func count(t *testing.T, db *dbutil.Database, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// The privacy of person memories, end to end: what alice tells helper in
// room one is in the model request of a new thread of hers in room two,
// and absent from the request when bob asks the same there. `!memory
// forget <id>` removes it: the database row, its full-text index entry and
// its vector go, and alice's next request lacks it.
func TestMemoryPrivacyAndForget(t *testing.T) {
	e := newMemoryEnv(t, func(llmURL string) string {
		return "plugins:\n  - builtin: memory\n    settings:\n      agents:\n        helper: {scopes: [person]}\n" +
			"      embeddings: {base_url: " + llmURL + ", model: embedder}\n"
	})
	const fact = "Alice rides a red bicycle called Zephyr."

	// Alice tells helper in a thread of room one.
	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("c1", "remember", `{"text":"`+fact+`"}`)),
		llmtest.Text("I'll remember your bicycle."),
	)
	if _, err := e.alice.Client.SendMessageEvent(context.Background(), e.one, event.EventMessage,
		&event.MessageEventContent{MsgType: event.MsgText, Body: "remember: my red bicycle is called Zephyr"}); err != nil {
		t.Fatal(err)
	}
	waitMessageFrom(t, e.alice, e.one, e.userID("helper"), "I'll remember your bicycle.")

	db := e.db()
	var memID string
	if err := db.QueryRow(context.Background(), `SELECT id FROM memory WHERE text=$1`, fact).Scan(&memID); err != nil {
		t.Fatalf("the remembered fact is not in the database: %v", err)
	}
	const ftsHits = `SELECT COUNT(*) FROM memory_fts WHERE memory_fts MATCH 'zephyr'`
	if n := count(t, db, ftsHits); n != 1 {
		t.Fatalf("%d full-text index entries for the fact, want 1", n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM memory WHERE id=$1 AND embedding IS NOT NULL`, memID); n != 1 {
		t.Fatal("the fact has no vector")
	}

	// A new thread in room two: alice's request recalls it, bob's does not.
	if req := e.ask(e.alice, e.two, "what is my bicycle called?", "It is Zephyr."); !strings.Contains(req, fact) {
		t.Fatalf("alice's request in room two lacks her memory:\n%s", req)
	}
	if req := e.ask(e.bob, e.two, "what is my bicycle called? (bob)", "I don't know, Bob."); strings.Contains(req, "Zephyr") {
		t.Fatalf("bob's request holds alice's memory:\n%s", req)
	}

	// !memory forget <id>, in room two: the row, its index entry and its
	// vector are gone, and the next request lacks it.
	if _, err := e.alice.Client.SendMessageEvent(context.Background(), e.two, event.EventMessage,
		&event.MessageEventContent{MsgType: event.MsgText, Body: "!memory forget " + memID}); err != nil {
		t.Fatal(err)
	}
	waitMessageFrom(t, e.alice, e.two, e.userID("router"), "Forgot `"+memID+"`")
	if n := count(t, db, `SELECT COUNT(*) FROM memory WHERE id=$1 OR text LIKE '%Zephyr%' OR embedding IS NOT NULL`, memID); n != 0 {
		t.Errorf("%d memory rows (or vectors) left after forget", n)
	}
	if n := count(t, db, ftsHits); n != 0 {
		t.Errorf("%d full-text index entries left after forget", n)
	}
	if req := e.ask(e.alice, e.two, "what is my bicycle called, again?", "I don't know."); strings.Contains(req, "Zephyr") {
		t.Errorf("a forgotten memory is still in the request:\n%s", req)
	}
}

// Extraction (memory's extract: the scripted model proposes memories after
// a turn) goes through memory:extracted hooks, here a built-in plugin of
// the test: when it vetoes, nothing is stored; when it drops one of two,
// exactly the other is stored.
func TestMemoryExtractedHookVetoesExtraction(t *testing.T) {
	e := newMemoryEnv(t, func(llmURL string) string {
		return "plugins:\n  - builtin: memory\n    settings:\n      agents:\n        helper: {scopes: [person], extract: true}\n" +
			"      extract: {base_url: " + llmURL + ", model: extractor}\n  - builtin: e2e_memory_filter\n"
	})
	db := e.db()
	extract := func(text string, facts ...string) {
		t.Helper()
		var items []string
		for _, f := range facts {
			items = append(items, `{"text":"`+f+`"}`)
		}
		before := e.llm.Count()
		e.llm.Script(llmtest.Text("Noted."), llmtest.Text(`{"memories":[`+strings.Join(items, ",")+`]}`))
		if _, err := e.alice.Client.SendMessageEvent(context.Background(), e.one, event.EventMessage,
			&event.MessageEventContent{MsgType: event.MsgText, Body: text}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "the extract model is asked", func() bool { return e.llm.Count() >= before+2 })
		if last := e.llm.LastRequest(t); last.Body.Model != "extractor" || !strings.Contains(string(last.Raw), text) {
			t.Fatalf("the last model request is not the extraction of %q: %s", text, last.Raw)
		}
	}

	extract("I keep a diary and I like tea", "Alice keeps a diary.", "Alice likes tea.")
	e.waitLog("A memory:extracted hook vetoed the extracted memories", 1)
	if n := count(t, db, `SELECT COUNT(*) FROM memory`); n != 0 {
		t.Fatalf("%d memories stored after a veto", n)
	}

	extract("my dog is Rex and my password is hunter2", "Alice's password is hunter2.", "Alice has a dog called Rex.")
	e.waitLog("Stored extracted memories", 1)
	rows, err := db.Query(context.Background(), `SELECT text, owner, source FROM memory`)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var text, owner, source string
		if err := rows.Scan(&text, &owner, &source); err != nil {
			t.Fatal(err)
		}
		got = append(got, text+"|"+owner+"|"+source)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"Alice has a dog called Rex.|" + string(e.alice.UserID) + "|extracted"}; !slices.Equal(got, want) {
		t.Errorf("stored %q, want %q", got, want)
	}
}

// The e2e_memory_filter plugin's memory:extracted hook vetoes every
// candidate when one mentions a diary, and drops those mentioning a
// password.
func init() {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name: "e2e_memory_filter", Description: "vetoes and filters memory:extracted (tests)",
		New: func(context.Context, plugins.Env) (plugins.Instance, error) {
			return plugins.HookList{hooks.Handle(hooks.MemoryExtracted, "filter", func(_ context.Context, c *hooks.MemoryExtractedContext) error {
				if slices.ContainsFunc(c.Memories, func(m hooks.ExtractedMemory) bool { return strings.Contains(m.Text, "diary") }) {
					c.Veto("nothing from diaries")
					return nil
				}
				c.Drop(func(m hooks.ExtractedMemory) bool { return strings.Contains(m.Text, "password") })
				return nil
			})}, nil
		},
	})
}
