package bot

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
	"github.com/hookroom/hookroom/plugins"
)

// Long-term memory with the clients people use, in two encrypted rooms
// hookroom created: alice (matrix-nio with libolm) tells helper a fact in
// room one (the model calls remember); in a new thread of hers in room two
// the model request holds it, while the request for bob's question there
// (matrix-js-sdk with its Rust crypto, Element's stack) lacks it. Alice's
// `!memory` lists it, decrypted by nio, and `!memory forget <id>` with the
// listed id deletes the row and its full-text entry, and her next request
// lacks the fact. Extraction runs after every turn (encrypted_rooms on),
// and a turn by bob whose extraction a memory:extracted hook vetoes stores
// nothing. Embeddings are configured, but memories and queries of
// encrypted rooms never leave the database: the embeddings endpoint gets no
// request at all and the fact has no vector.
func TestMemoryFromIndependentClients(t *testing.T) {
	e := &reloadEnv{turnEnv: &turnEnv{testEnv: newEnv(t), llm: llmtest.NewServer(t), rec: &events{}}}
	alice, bob := e.hs.RegisterUser(t, "alice"), e.hs.RegisterUser(t, "bob")
	e.person = alice
	const (
		fact     = "Alice rides a red bicycle called Zephyr."
		vetoText = "I keep a diary in a green notebook"
	)
	url := e.llm.URL
	e.cfg = agentSetup{
		LLM: url, Model: "agent-model", Admins: []id.UserID{alice.UserID, bob.UserID},
		Rooms: fmt.Sprintf("  one:\n    alias: %s\n    invite: [%q]\n  two:\n    alias: %s\n    invite: [%q, %q]\n",
			e.localpart("one"), alice.UserID, e.localpart("two"), alice.UserID, bob.UserID),
		AgentRooms: "one, two",
		Extra: "plugins:\n  - builtin: memory\n    settings:\n      agents:\n        helper: {scopes: [person], extract: true}\n" +
			"      embeddings: {base_url: " + url + ", model: embedder}\n" +
			"      extract: {base_url: " + url + ", model: extractor, encrypted_rooms: true}\n" +
			"  - builtin: e2e_memory_veto_all\n",
	}.body(e.testEnv)
	// Every turn of helper is followed by an extraction request: bob's
	// diary turn proposes a memory (which the hook vetoes), the other four
	// turns propose none.
	e.llm.On(func(r *llmtest.Request) bool {
		return r.Body.Model == "extractor" && strings.Contains(string(r.Raw), vetoText)
	}, llmtest.Text(`{"memories":[{"text":"Bob keeps a diary in a green notebook."}]}`))
	none := llmtest.Text(`{"memories":[]}`)
	e.llm.On(llmtest.ModelIs("extractor"), none, none, none, none)

	e.bot = e.run(e.config(e.cfg), Options{ConfigOptions: e.configOptions()}, e.testLog(zerolog.InfoLevel))
	cs := e.hs.StartClients(t, hstest.ClientSpec{Kind: hstest.Nio, User: alice}, hstest.ClientSpec{Kind: hstest.JS, User: bob})
	phone, browser := cs[0], cs[1]
	e.waitLog("rooms provisioned", 1)
	e.waitLog("account caught up", 2)
	one, two := e.bot.bot.w().rooms["one"], e.bot.bot.w().rooms["two"]
	joinInvited(t, one, phone)
	joinInvited(t, two, phone, browser)
	helper, router := e.userID("helper"), e.userID("router")
	mention := "@" + helper.Localpart() + " "

	// chatRequest is the last request of helper's model whose messages
	// hold text, joined (extraction requests, on model extractor, hold the
	// turn's text too).
	chatRequest := func(text string) string {
		t.Helper()
		reqs := e.llm.Requests()
		for i := len(reqs) - 1; i >= 0; i-- {
			all := strings.Join(messageContents(reqs[i].Body.Messages), "\n")
			if reqs[i].Body.Model == "agent-model" && strings.Contains(all, text) {
				return all
			}
		}
		t.Fatalf("no request of helper's model holds %q", text)
		return ""
	}
	// ask sends text from c into room (a new thread), waits for helper's
	// reply there, and returns the model request that answered it.
	ask := func(c *hstest.Client, room id.RoomID, text, reply string) string {
		t.Helper()
		e.llm.Script(llmtest.Text(reply))
		q := c.SendText(t, room, mention+text)
		c.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: reply, ThreadRoot: q})
		return chatRequest(text)
	}

	// Alice tells helper in a thread of room one.
	e.llm.Script(
		llmtest.Calls(llmtest.ToolCall("c1", "remember", `{"text":"`+fact+`"}`)),
		llmtest.Text("I'll remember your bicycle."),
	)
	q := phone.SendText(t, one, mention+"remember: my red bicycle is called Zephyr")
	phone.WaitMessage(t, one, hstest.Match{Sender: helper, Contains: "I'll remember your bicycle.", ThreadRoot: q})

	db := (&memoryEnv{reloadEnv: e}).db()
	var (
		memID               string
		encrypted, noVector bool
	)
	if err := db.QueryRow(context.Background(), `SELECT id, encrypted, embedding IS NULL FROM memory WHERE text=$1`, fact).
		Scan(&memID, &encrypted, &noVector); err != nil {
		t.Fatalf("the remembered fact is not in the database: %v", err)
	}
	if !encrypted || !noVector {
		t.Errorf("the fact told in an encrypted room is stored with encrypted=%v and a vector=%v, want encrypted and no vector", encrypted, !noVector)
	}
	const ftsHits = `SELECT COUNT(*) FROM memory_fts WHERE memory_fts MATCH 'zephyr'`
	if n := count(t, db, ftsHits); n != 1 {
		t.Fatalf("%d full-text index entries for the fact, want 1", n)
	}

	// A new thread in room two: alice's request recalls it, bob's does not.
	if req := ask(phone, two, "what is my bicycle called?", "It is Zephyr."); !strings.Contains(req, fact) {
		t.Fatalf("alice's request in room two lacks her memory:\n%s", req)
	}
	const bobAsks = "which bicycle do I ride, helper?"
	if req := ask(browser, two, bobAsks, "I don't know, Bob."); strings.Contains(req, "Zephyr") {
		t.Fatalf("bob's request holds alice's memory:\n%s", req)
	}

	// !memory, decrypted by nio, lists the fact with its id.
	cmd := phone.SendText(t, two, "!memory")
	listing := phone.WaitMessage(t, two, hstest.Match{Sender: router, Contains: fact, After: cmd})
	m := regexp.MustCompile("`([^`]+)` \\(person, [0-9-]+\\) " + regexp.QuoteMeta(fact)).FindStringSubmatch(listing.FinalBody)
	if m == nil || !listing.Encrypted {
		t.Fatalf("the !memory listing is %+v, want an encrypted message listing the fact with its id", listing)
	}
	if m[1] != memID {
		t.Errorf("!memory lists the fact as %q, the database as %q", m[1], memID)
	}

	// !memory forget <the listed id>: the row and its index entry are gone,
	// and alice's next request lacks the fact.
	cmd = phone.SendText(t, two, "!memory forget "+m[1])
	phone.WaitMessage(t, two, hstest.Match{Sender: router, Contains: "Forgot `" + memID + "`", After: cmd})
	if n := count(t, db, `SELECT COUNT(*) FROM memory WHERE id=$1 OR text LIKE '%Zephyr%' OR embedding IS NOT NULL`, memID); n != 0 {
		t.Errorf("%d memory rows (or vectors) left after forget", n)
	}
	if n := count(t, db, ftsHits); n != 0 {
		t.Errorf("%d full-text index entries left after forget", n)
	}
	if req := ask(phone, two, "what is my bicycle called, again?", "I don't know."); strings.Contains(req, "Zephyr") {
		t.Errorf("a forgotten memory is still in the request:\n%s", req)
	}

	// Bob's turn whose extraction proposes a memory: the hook vetoes it,
	// nothing is stored. The barrier is the end of that extraction: the
	// memory plugin logs the veto, or (were the veto ignored) a row appears.
	ask(browser, two, vetoText, "Noted, Bob.")
	vetoed := `"reason":"e2e veto for ` + string(bob.UserID) + `"`
	testkit.Eventually(t, 30*time.Second, "the extraction of bob's turn is vetoed (or stored)", func() bool {
		return strings.Contains(e.logs.String(), vetoed) || count(t, db, `SELECT COUNT(*) FROM memory`) > 0
	})
	if !strings.Contains(e.logs.String(), vetoed) {
		t.Errorf("the memory plugin did not log the veto of bob's extraction (%s)", vetoed)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM memory`); n != 0 {
		t.Errorf("%d memories stored after the vetoed extraction, want none", n)
	}
	if n := count(t, db, `SELECT COUNT(*) FROM memory_fts WHERE memory_fts MATCH 'notebook'`); n != 0 {
		t.Errorf("%d full-text index entries for the vetoed memory", n)
	}

	// Every one of helper's five turns was sent to extraction (so it ran in
	// these encrypted rooms), each scripted; no other request came.
	extractions := func() int {
		n := 0
		for _, r := range e.llm.Requests() {
			if r.Body.Model == "extractor" {
				n++
			}
		}
		return n
	}
	testkit.Eventually(t, 30*time.Second, "five extraction requests", func() bool { return extractions() == 5 })
	if n := e.llm.Unscripted(); n != 0 {
		t.Errorf("%d model requests found no scripted reply", n)
	}
	// No request made for bob (his turns and their extraction) holds
	// alice's memory; the embeddings endpoint got nothing from these rooms.
	for i, r := range e.llm.Requests() {
		if raw := string(r.Raw); (strings.Contains(raw, bobAsks) || strings.Contains(raw, vetoText)) && strings.Contains(raw, "Zephyr") {
			t.Errorf("model request %d (%s), made for bob, holds alice's memory", i, r.Body.Model)
		}
	}
	if n := e.llm.EmbeddingCount(); n != 0 {
		t.Errorf("%d embeddings requests, want none: memories and queries of encrypted rooms never leave the database", n)
	}
}

// The e2e_memory_veto_all plugin's memory:extracted hook vetoes every
// extraction, naming the requester in the reason (logged by the memory
// plugin).
func init() {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name: "e2e_memory_veto_all", Description: "vetoes every memory:extracted (tests)",
		New: func(context.Context, plugins.Env) (plugins.Instance, error) {
			return plugins.HookList{hooks.Handle(hooks.MemoryExtracted, "veto", func(_ context.Context, c *hooks.MemoryExtractedContext) error {
				c.Veto("e2e veto for " + string(c.RequesterID))
				return nil
			})}, nil
		},
	})
}
