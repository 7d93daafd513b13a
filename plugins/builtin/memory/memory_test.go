package memory

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
	mem "github.com/hookroom/hookroom/memory"
	"github.com/hookroom/hookroom/plugins"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const (
	assistant = hooks.AgentName("assistant")
	helper    = hooks.AgentName("helper")
	stranger  = hooks.AgentName("stranger") // an agent the plugin does not serve
	alice     = id.UserID("@alice:x")
	bob       = id.UserID("@bob:x")
	roomA     = id.RoomID("!a:x")
	roomB     = id.RoomID("!b:x")
	secret    = id.RoomID("!secret:x") // end-to-end encrypted
)

// filter is the state of the test's memory:extracted plugin: what it
// does (mode) and what it saw.
var filter struct {
	sync.Mutex
	mode   string // "" observes; drop, veto, fail, stall (see init)
	events []hooks.MemoryExtractedContext
}

func setFilter(mode string) {
	filter.Lock()
	filter.mode, filter.events = mode, nil
	filter.Unlock()
}

func filterEvents() []hooks.MemoryExtractedContext {
	filter.Lock()
	defer filter.Unlock()
	return slices.Clone(filter.events)
}

func init() {
	// A plugin of the kind an operator would write: it sees what
	// extraction proposes and drops, edits or vetoes it.
	plugins.RegisterBuiltin(plugins.Builtin{
		Name: "extract_filter", Description: "filters memory:extracted",
		New: func(context.Context, plugins.Env) (plugins.Instance, error) {
			return plugins.HookList{hooks.Handle(hooks.MemoryExtracted, "filter", func(ctx context.Context, c *hooks.MemoryExtractedContext) error {
				filter.Lock()
				mode := filter.mode
				seen := *c
				seen.Memories = slices.Clone(c.Memories)
				filter.events = append(filter.events, seen)
				filter.Unlock()
				switch mode {
				case "drop": // drop the secret, edit the other
					c.Drop(func(m hooks.ExtractedMemory) bool { return strings.Contains(m.Text, "password") })
					for i := range c.Memories {
						c.Memories[i].Text = strings.Replace(c.Memories[i].Text, "Mochi", "Mochi (a tabby)", 1)
					}
				case "veto":
					c.Veto("no memories today")
				case "fail":
					c.Memories = nil
					return errors.New("the audit service is down")
				case "stall":
					c.Veto("too late")
					<-ctx.Done()
				}
				return nil
			}, hooks.Timeout(100*time.Millisecond))}, nil
		},
	})
}

// encryptedRooms is a host's answer for RoomEncrypted: secret is
// encrypted, the others are not.
func encryptedRooms(_ context.Context, room id.RoomID) (bool, error) { return room == secret, nil }

// loaded is the plugin set of one test configuration.
type loaded struct {
	t      *testing.T
	db     *dbutil.Database
	set    *plugins.Set
	reg    *hooks.Registry
	plugin *Plugin
}

// load loads a config.yaml whose plugins section is pluginsYAML through the
// real loader, on db, with the host's encryption answer enc.
func load(t *testing.T, db *dbutil.Database, enc func(context.Context, id.RoomID) (bool, error), pluginsYAML string, env map[string]string) (*loaded, error) {
	t.Helper()
	dir := t.TempDir()
	src := "matrix:\n  homeserver: http://localhost:8008\nplugins:\n" + pluginsYAML
	file := filepath.Join(dir, "config.yaml")
	cfg, err := config.Parse([]byte(src), file, config.WithLookupEnv(func(k string) (string, bool) { v, ok := env[k]; return v, ok }))
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	l := plugins.Loader{DB: db, RoomEncrypted: enc}
	set, err := l.Load(hooktest.Context(t), cfg, nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = set.Close() })
	reg, err := set.Registry(hooks.Options{})
	if err != nil {
		t.Fatal(err)
	}
	inst, ok := set.Instance(Name)
	if !ok {
		t.Fatal("no memory instance")
	}
	return &loaded{t: t, db: db, set: set, reg: reg, plugin: inst.(*Plugin)}, nil
}

func mustLoad(t *testing.T, db *dbutil.Database, enc func(context.Context, id.RoomID) (bool, error), pluginsYAML string) *loaded {
	t.Helper()
	l, err := load(t, db, enc, pluginsYAML, map[string]string{"EXTRACT_KEY": "sk-extract"})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return l
}

const basic = `  - builtin: memory
    settings:
      agents:
        assistant: {scopes: [person, room]}
        helper: {tools: false}
`

// tool calls a memory tool through the set, as the bot does.
func (l *loaded) tool(agent hooks.AgentName, person id.UserID, room id.RoomID, name, args string) (string, error) {
	return l.set.CallTool(hooktest.Context(l.t), l.reg, name, plugins.ToolCall{ToolCall: hooks.ToolCall{
		Tool: name, Arguments: json.RawMessage(args), Agent: agent, RoomID: room, RequesterID: person,
	}})
}

func (l *loaded) remember(agent hooks.AgentName, person id.UserID, room id.RoomID, text string) string {
	l.t.Helper()
	out, err := l.tool(agent, person, room, mem.ToolRemember, `{"text":`+quote(text)+`}`)
	if err != nil {
		l.t.Fatalf("remember %q: %v", text, err)
	}
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.ID == "" {
		l.t.Fatalf("remember answered %s", out)
	}
	return r.ID
}

// enrich runs message:enrich for a message of person to agent in room and
// returns the items' texts.
func (l *loaded) enrich(agent hooks.AgentName, person id.UserID, room id.RoomID, body string) []hooks.EnrichmentItem {
	l.t.Helper()
	c := hooktest.MessageEnrich(body)
	c.Envelope.AgentName, c.TargetAgent = agent, agent
	c.Envelope.RequesterID, c.Envelope.SenderID, c.Envelope.RoomID = person, person, room
	hooktest.Emit(l.t, l.reg, hooks.MessageEnrich, c)
	return c.Items
}

func (l *loaded) command(sender id.UserID, room id.RoomID, args ...string) string {
	l.t.Helper()
	c, ok := l.set.Command("memory")
	if !ok {
		l.t.Fatal("no !memory command")
	}
	out, err := c.Call(hooktest.Context(l.t), plugins.CommandRequest{Room: room, Sender: sender, Args: args})
	if err != nil {
		l.t.Fatalf("!memory %v: %v", args, err)
	}
	return out
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }

func itemText(items []hooks.EnrichmentItem) string {
	var s []string
	for _, it := range items {
		s = append(s, it.Key+": "+it.Text)
	}
	return strings.Join(s, "\n")
}

// Recall adds the requester's own memories, and the room's in that room,
// for the agents the plugin serves, and nothing else.
func TestRecallIsPrivate(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		l := mustLoad(t, d.Fresh(t), encryptedRooms, basic)
		l.remember(assistant, alice, roomA, "Alice is allergic to peanuts")
		l.remember(assistant, bob, roomA, "Bob is allergic to cats")
		if _, err := l.tool(assistant, alice, roomA, mem.ToolRemember, `{"text":"This room plans the allergy-free picnic","scope":"room"}`); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name        string
			agent       hooks.AgentName
			person      id.UserID
			room        id.RoomID
			want, never []string
		}{
			{"alice elsewhere", assistant, alice, roomB, []string{"peanuts"}, []string{"cats", "picnic"}},
			{"alice in the room", assistant, alice, roomA, []string{"peanuts", "picnic"}, []string{"cats"}},
			{"bob in the room", assistant, bob, roomA, []string{"cats", "picnic"}, []string{"peanuts"}},
			{"bob elsewhere", assistant, bob, roomB, []string{"cats"}, []string{"peanuts", "picnic"}},
			{"another agent of the plugin", helper, alice, roomA, nil, []string{"peanuts", "cats", "picnic"}},
			{"an agent without memory", stranger, alice, roomA, nil, []string{"peanuts", "cats", "picnic"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				items := l.enrich(tt.agent, tt.person, tt.room, "what am I allergic to, for the picnic?")
				text := itemText(items)
				for _, w := range tt.want {
					if !strings.Contains(text, w) {
						t.Errorf("items lack %q:\n%s", w, text)
					}
				}
				for _, n := range tt.never {
					if strings.Contains(text, n) {
						t.Errorf("items contain %q:\n%s", n, text)
					}
				}
				for _, it := range items {
					if it.Key != mem.ItemKey || !it.Transient {
						t.Errorf("item %+v: want the transient %q item", it, mem.ItemKey)
					}
				}
			})
		}
		// hookroom hooks shows the hook, limited to the plugin's agents.
		var found bool
		for _, h := range l.reg.Hooks() {
			if h.Plugin == Name && h.Hook == HookRecall && h.Event == hooks.MessageEnrich.Name() {
				found = true
				if !slices.Equal(h.Agents, []hooks.AgentName{assistant, helper}) {
					t.Errorf("recall's agents = %v", h.Agents)
				}
			}
		}
		if !found {
			t.Errorf("no memory/recall hook in %+v", l.reg.Hooks())
		}
	})
}

// The tools are offered only to the agents in the settings whose tools are
// on, and refuse the others.
func TestToolsOnlyForConfiguredAgents(t *testing.T) {
	l := mustLoad(t, dbtest.SQLite.Fresh(t), encryptedRooms, basic)
	var names []string
	for _, pt := range l.set.Tools() {
		names = append(names, pt.Name)
		if pt.Plugin != Name || !slices.Equal(pt.Agents, []hooks.AgentName{assistant}) {
			t.Errorf("tool %s: plugin %s, agents %v; want memory's, for assistant only", pt.Name, pt.Plugin, pt.Agents)
		}
		if !pt.ForAgent(assistant) || pt.ForAgent(helper) || pt.ForAgent(stranger) {
			t.Errorf("tool %s: ForAgent wrong", pt.Name)
		}
	}
	if want := []string{mem.ToolRemember, mem.ToolRecall, mem.ToolForget}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	for _, agent := range []hooks.AgentName{helper, stranger} {
		if out, err := l.tool(agent, alice, roomA, mem.ToolRemember, `{"text":"x"}`); err == nil || !strings.Contains(err.Error(), "not enabled") {
			t.Errorf("remember as %s = %q, %v; want refused", agent, out, err)
		}
	}
	// The model cannot act for someone else: who comes from the call.
	l.remember(assistant, alice, roomA, "Alice likes tea")
	out, err := l.tool(assistant, bob, roomA, mem.ToolRecall, `{"query":"tea"}`)
	if err != nil || strings.Contains(out, "tea") {
		t.Errorf("bob's recall = %s, %v", out, err)
	}

	// Without agents there are no tools, hooks or memories.
	none := mustLoad(t, dbtest.SQLite.Fresh(t), encryptedRooms, "  - builtin: memory\n")
	if len(none.set.Tools()) != 0 || len(none.plugin.Hooks()) != 0 {
		t.Errorf("no agents: tools %v, hooks %v", none.set.Tools(), none.plugin.Hooks())
	}
}

// !memory lists what the agents remember about the sender; !memory forget
// deletes it for real: the row, and it is gone from the next turn.
func TestMemoryCommand(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		db := d.Fresh(t)
		l := mustLoad(t, db, encryptedRooms, basic)
		tea := l.remember(assistant, alice, roomA, "Alice drinks green tea")
		bike := l.remember(assistant, alice, roomB, "Alice rides a red bike")
		bobs := l.remember(assistant, bob, roomA, "Bob drinks coffee")

		list := l.command(alice, roomA)
		for _, w := range []string{tea, bike, "green tea", "red bike", "!memory forget"} {
			if !strings.Contains(list, w) {
				t.Errorf("!memory lacks %q:\n%s", w, list)
			}
		}
		if strings.Contains(list, "coffee") || strings.Contains(list, bobs) {
			t.Errorf("alice's !memory shows bob's memory:\n%s", list)
		}
		if got := l.command(alice, roomA, "helper"); !strings.Contains(got, "helper remembers nothing") {
			t.Errorf("!memory helper = %q", got)
		}
		if got := l.command(alice, roomA, "stranger"); !strings.Contains(got, "stranger has no memory here") {
			t.Errorf("!memory stranger = %q", got)
		}

		// Bob cannot forget Alice's memory.
		if got := l.command(bob, roomA, "forget", tea); !strings.Contains(got, "No memory") {
			t.Errorf("bob forgetting alice's memory: %q", got)
		}
		if got := l.command(alice, roomA, "forget", tea); !strings.Contains(got, "Forgot `"+tea+"`") {
			t.Fatalf("!memory forget = %q", got)
		}
		if n := rows(t, db, tea); n != 0 {
			t.Errorf("%d rows of the forgotten memory left", n)
		}
		if text := itemText(l.enrich(assistant, alice, roomA, "what tea do I drink?")); strings.Contains(text, "green tea") {
			t.Errorf("the next turn still recalls it:\n%s", text)
		}

		if got := l.command(alice, roomB, "forget", "all"); !strings.Contains(got, "Forgot 1 memory") {
			t.Errorf("!memory forget all = %q", got)
		}
		if n := rows(t, db, bike); n != 0 {
			t.Errorf("forget all left alice's memory")
		}
		if n := rows(t, db, bobs); n != 1 {
			t.Errorf("forget all removed bob's memory")
		}
		if got := l.command(alice, roomA); !strings.Contains(got, "remember nothing") {
			t.Errorf("!memory after forget all = %q", got)
		}

		// The host names the agents of the room: only those are listed.
		c, _ := l.set.Command("memory")
		out, err := c.Call(t.Context(), plugins.CommandRequest{Room: roomA, Sender: bob, Agents: []hooks.AgentName{helper}})
		if err != nil || strings.Contains(out, "coffee") {
			t.Errorf("!memory with only helper here = %q, %v", out, err)
		}
	})
}

func rows(t *testing.T, db *dbutil.Database, memoryID string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(t.Context(), `SELECT COUNT(*) FROM memory WHERE id=$1`, memoryID).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Extraction asks the extract endpoint after a turn, emits memory:extracted
// to other plugins, and stores the facts; not in encrypted rooms, unless
// allowed; nothing when the answer is garbage.
func TestExtract(t *testing.T) {
	answer := llmtest.Reply{Text: []string{`{"memories":[{"text":"Alice has a cat called Mochi"}]}`}}
	tests := []struct {
		name      string
		enc       func(context.Context, id.RoomID) (bool, error)
		room      id.RoomID
		allowEnc  bool
		reply     llmtest.Reply
		wantAsked bool
		wantSaved bool
	}{
		{"plain room", encryptedRooms, roomA, false, answer, true, true},
		{"encrypted room", encryptedRooms, secret, false, answer, false, false},
		{"encrypted room, allowed", encryptedRooms, secret, true, answer, true, true},
		{"host cannot tell: encrypted", nil, roomA, false, answer, false, false},
		{"host fails: encrypted", func(context.Context, id.RoomID) (bool, error) { return false, errors.New("no store") }, roomA, false, answer, false, false},
		{"garbage answer", encryptedRooms, roomA, false, llmtest.Reply{Text: []string{"Sure! Alice has a cat."}}, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.NewServer(t, tt.reply)
			enc := "false"
			if tt.allowEnc {
				enc = "true"
			}
			l := mustLoad(t, dbtest.SQLite.Fresh(t), tt.enc, `  - builtin: memory
    settings:
      agents:
        assistant: {extract: true}
        helper: {}
      extract:
        base_url: `+srv.URL+`
        model: extractor
        api_key: ${EXTRACT_KEY}
        encrypted_rooms: `+enc+`
  - builtin: extract_filter
`)
			setFilter("")
			c := hooktest.AfterResponse("Mochi is a lovely name!")
			c.Result.Envelope.Body = "My cat is called Mochi."
			c.Result.Envelope.AgentName, c.Result.Envelope.RequesterID, c.Result.Envelope.RoomID = assistant, alice, tt.room
			hooktest.Emit(t, l.reg, hooks.MessageAfterResponse, c)

			if asked := srv.Count() > 0; asked != tt.wantAsked {
				t.Fatalf("extract model asked: %v, want %v", asked, tt.wantAsked)
			}
			if tt.wantAsked {
				req := srv.LastRequest(t)
				if req.Body.Model != "extractor" || !strings.Contains(string(req.Raw), "My cat is called Mochi.") ||
					req.Header.Get("Authorization") != "Bearer sk-extract" {
					t.Errorf("extraction request: %s", req.Raw)
				}
			}
			mems, err := l.plugin.Store().List(t.Context(), mem.Who{Agent: assistant, Person: alice, Room: tt.room})
			if err != nil {
				t.Fatal(err)
			}
			saved := len(mems) == 1 && mems[0].Text == "Alice has a cat called Mochi" && mems[0].Source == mem.SourceExtracted
			if saved != tt.wantSaved || (!tt.wantSaved && len(mems) > 0) {
				t.Errorf("stored %+v, want saved %v", mems, tt.wantSaved)
			}
			events := filterEvents()
			if tt.wantSaved {
				want := []hooks.ExtractedMemory{{Text: "Alice has a cat called Mochi", Scope: "person", Person: alice, Agent: assistant, Room: tt.room}}
				if len(events) != 1 || !slices.Equal(events[0].Memories, want) || events[0].Agent != assistant ||
					events[0].RequesterID != alice || events[0].RoomID != tt.room {
					t.Errorf("memory:extracted events %+v, want memories %+v", events, want)
				}
			} else if len(events) != 0 {
				t.Errorf("memory:extracted emitted for nothing stored: %+v", events)
			}

			// An agent without extract is never asked for.
			before := srv.Count()
			c.Result.Envelope.AgentName = helper
			hooktest.Emit(t, l.reg, hooks.MessageAfterResponse, c)
			if srv.Count() != before {
				t.Error("extraction ran for an agent without extract")
			}
		})
	}
}

// memory:extracted decides what extraction stores: a hook that drops one
// candidate and edits the other stores exactly the edited one; a veto
// stores nothing; a hook that fails or times out changes nothing (the
// engine's transformer rule: its draft is dropped), so every candidate is
// stored.
func TestExtractFiltered(t *testing.T) {
	answer := llmtest.Reply{Text: []string{`{"memories":[{"text":"Alice has a cat called Mochi"},{"text":"Alice's password is hunter2"}]}`}}
	both := []string{"Alice has a cat called Mochi", "Alice's password is hunter2"}
	tests := []struct {
		mode string
		want []string
	}{
		{"", both},
		{"drop", []string{"Alice has a cat called Mochi (a tabby)"}},
		{"veto", nil},
		{"fail", both},
		{"stall", both},
	}
	for _, tt := range tests {
		t.Run("mode "+tt.mode, func(t *testing.T) {
			srv := llmtest.NewServer(t, answer)
			l := mustLoad(t, dbtest.SQLite.Fresh(t), encryptedRooms, `  - builtin: memory
    settings:
      agents:
        assistant: {extract: true}
      extract: {base_url: `+srv.URL+`, model: extractor}
  - builtin: extract_filter
`)
			setFilter(tt.mode)
			c := hooktest.AfterResponse("Noted.")
			c.Result.Envelope.Body = "My cat is called Mochi and my password is hunter2."
			c.Result.Envelope.AgentName, c.Result.Envelope.RequesterID, c.Result.Envelope.RoomID = assistant, alice, roomA
			hooktest.Emit(t, l.reg, hooks.MessageAfterResponse, c)
			if n := len(filterEvents()); n != 1 {
				t.Fatalf("memory:extracted ran %d times", n)
			}
			mems, err := l.plugin.Store().List(t.Context(), mem.Who{Agent: assistant, Person: alice, Room: roomA})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range mems {
				got = append(got, m.Text)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("stored %q, want %q", got, tt.want)
			}
			var rows int
			if err := l.db.QueryRow(t.Context(), `SELECT COUNT(*) FROM memory`).Scan(&rows); err != nil {
				t.Fatal(err)
			}
			if rows != len(tt.want) {
				t.Errorf("%d rows in memory, want %d", rows, len(tt.want))
			}
		})
	}
}

// What is said in an encrypted room, or a room whose state the host cannot
// tell, never reaches the embeddings endpoint; elsewhere memories and
// queries are embedded.
func TestEmbeddingsNeverSeeEncryptedRooms(t *testing.T) {
	for _, hostKnows := range []bool{true, false} {
		t.Run(map[bool]string{true: "host knows", false: "host cannot tell"}[hostKnows], func(t *testing.T) {
			srv := llmtest.NewServer(t)
			enc := encryptedRooms
			if !hostKnows {
				enc = nil
			}
			l, err := load(t, dbtest.SQLite.Fresh(t), enc, `  - builtin: memory
    settings:
      agents:
        assistant: {}
      embeddings:
        base_url: `+srv.URL+`
        model: embedder
        api_key: ${EMB_KEY}
`, map[string]string{"EMB_KEY": "sk-secret-key"})
			if err != nil {
				t.Fatal(err)
			}
			l.remember(assistant, alice, secret, "Alice's door code is 4711")
			l.enrich(assistant, alice, secret, "what is my door code?")
			l.remember(assistant, alice, roomA, "Alice waters the plants on Fridays")
			l.enrich(assistant, alice, roomA, "when do I water the plants?")
			var sent []string
			for _, r := range srv.EmbeddingRequests() {
				sent = append(sent, r.Input...)
				if got := r.Header.Get("Authorization"); got != "Bearer sk-secret-key" {
					t.Errorf("Authorization %q", got)
				}
			}
			all := strings.Join(sent, "\n")
			if strings.Contains(all, "door code") {
				t.Errorf("an encrypted room's text reached the embeddings endpoint:\n%s", all)
			}
			wantPlain := hostKnows
			if got := strings.Contains(all, "plants"); got != wantPlain {
				t.Errorf("plain room's texts embedded: %v, want %v:\n%s", got, wantPlain, all)
			}
		})
	}
}

// Bad settings are reported at their line in config.yaml.
func TestInvalidSettings(t *testing.T) {
	tests := []struct {
		name, yaml string
		noDB       bool
		want       string // a regular expression
	}{
		{"unknown scope", "  - builtin: memory\n    settings:\n      agents:\n        assistant:\n          scopes: [everyone]\n",
			false, `config\.yaml:8: plugins\[0\]\.settings\.agents\.assistant\.scopes: unknown scope "everyone": want person, room or agent$`},
		{"extract without endpoint", "  - builtin: memory\n    settings:\n      agents:\n        assistant: {extract: true}\n",
			false, `config\.yaml:7: plugins\[0\]\.settings\.agents\.assistant\.extract: needs the extract endpoint`},
		{"extract without person scope", "  - builtin: memory\n    settings:\n      agents:\n        assistant: {extract: true, scopes: [room]}\n",
			false, `plugins\[0\]\.settings\.agents\.assistant\.extract: stores facts about the person`},
		{"bad embeddings URL", "  - builtin: memory\n    settings:\n      embeddings: {base_url: ftp://x, model: m}\n",
			false, `config\.yaml:6: plugins\[0\]\.settings\.embeddings\.base_url: want an http\(s\) URL`},
		{"extract model missing", "  - builtin: memory\n    settings:\n      extract: {base_url: http://127.0.0.1:1/v1}\n",
			false, `plugins\[0\]\.settings\.extract\.model: required`},
		{"unknown key", "  - builtin: memory\n    settings:\n      agent: {}\n",
			false, `config\.yaml:6: plugins\[0\]\.settings\.agent: unknown setting$`},
		{"no database", "  - builtin: memory\n",
			true, `plugins\[0\]: plugin "memory" failed to start: memory needs hookroom's database`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var db *dbutil.Database
			if !tt.noDB {
				db = dbtest.SQLite.Fresh(t)
			}
			_, err := load(t, db, nil, tt.yaml, nil)
			if err == nil || !regexp.MustCompile(tt.want).MatchString(err.Error()) {
				t.Fatalf("Load = %v\nwant %s", err, tt.want)
			}
		})
	}
}

// A reload with the same settings reuses the instance; Close of the set
// stops its background work.
func TestReloadAndClose(t *testing.T) {
	srv := llmtest.NewServer(t)
	db := dbtest.SQLite.Fresh(t)
	dir := t.TempDir()
	src := "matrix:\n  homeserver: http://localhost:8008\nplugins:\n  - builtin: memory\n    settings:\n      agents: {assistant: {}}\n      embeddings: {base_url: " + srv.URL + ", model: m}\n"
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(t.Context(), filepath.Join(dir, "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l := plugins.Loader{DB: db, RoomEncrypted: encryptedRooms}
	first, err := l.Load(hooktest.Context(t), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	second, err := l.Load(hooktest.Context(t), cfg, first)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := first.Instance(Name)
	b, _ := second.Instance(Name)
	if a != b {
		t.Error("unchanged settings: the instance was not reused")
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if err := second.Close(); err != nil { // the last user: stops the backfill
		t.Fatal(err)
	}
}

// Loaded only to be looked at (hookroom check, hooks, tools), the plugin
// declares everything but changes nothing: no tables, with or without a
// database.
func TestInspect(t *testing.T) {
	for _, withDB := range []bool{false, true} {
		var db *dbutil.Database
		if withDB {
			db = dbtest.SQLite.Fresh(t)
		}
		cfg, err := config.Parse([]byte("matrix:\n  homeserver: http://localhost:8008\nplugins:\n"+basic), filepath.Join(t.TempDir(), "config.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		l := plugins.Loader{DB: db, Inspect: true}
		set, err := l.Load(hooktest.Context(t), cfg, nil)
		if err != nil {
			t.Fatalf("with database %v: %v", withDB, err)
		}
		if len(set.Tools()) != 3 || len(set.Commands()) != 1 || len(set.HookPlugins()[0].Hooks) != 1 {
			t.Errorf("with database %v: tools %d, commands %d, hooks %d", withDB, len(set.Tools()), len(set.Commands()), len(set.HookPlugins()[0].Hooks))
		}
		if db != nil {
			if ok, err := db.TableExists(t.Context(), "memory"); err != nil || ok {
				t.Errorf("inspecting created the memory table (%v)", err)
			}
		}
		_ = set.Close()
	}
}
