package bot

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// !config with the clients people use, in an encrypted room hookroom
// created: erin, an administrator on matrix-js-sdk with its Rust crypto
// (Element's stack), proposes `!config helper model big`; a ✅ from alice
// (matrix-nio with libolm, who may talk to the agents but did not propose
// it) does nothing; erin's ✅ applies it: config.yaml keeps its comments
// and ${VAR} reference (golden file) and the next request at the model
// server is on big-model.
func TestConfigCommandFromIndependentClients(t *testing.T) {
	e := newEnv(t)
	llm := llmtest.NewServer(t)
	alice, erin := e.hs.RegisterUser(t, "alice"), e.hs.RegisterUser(t, "erin")
	setup := agentSetup{
		LLM:        llm.URL,
		Models:     fmt.Sprintf("  # the bigger model, chosen from chat\n  big:\n    provider: openai\n    base_url: %s\n    model: big-model\n", llm.URL),
		Rooms:      fmt.Sprintf("  secret:\n    alias: %s\n    invite: [%q, %q]\n", e.localpart("secret"), alice.UserID, erin.UserID),
		AgentRooms: "secret",
		AgentYAML:  "    model: agent   # the scripted model\n",
		Admins:     []id.UserID{erin.UserID},
		Top:        "  default_room_access: true\n",
		Extra:      "defaults:\n  config_command: true   # !config from chat\n",
	}
	body := strings.Replace(setup.body(e), "agents:\n", "# The agents of this test.\nagents:\n", 1)
	var rec events
	r := e.start(e.config(body), &rec, Options{ConfigOptions: e.configOptions()})
	room := r.bot.w().rooms["secret"]
	helper, router := e.userID("helper"), e.userID("router")
	original, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}

	cs := e.hs.StartClients(t,
		hstest.ClientSpec{Kind: hstest.JS, User: erin},   // the administrator
		hstest.ClientSpec{Kind: hstest.Nio, User: alice}, // a person in the room
	)
	console, phone := cs[0], cs[1]
	joinInvited(t, room, console, phone)

	cmd := console.SendText(t, room, "!config helper model big")
	proposal := console.WaitMessage(t, room, hstest.Match{Sender: router, Contains: "+ big", After: cmd})
	if !proposal.Encrypted || !strings.Contains(proposal.Body, "React with ✅") {
		t.Fatalf("the proposal is %+v, want an encrypted message asking for ✅", proposal)
	}

	// alice's ✅ does nothing: it reaches hookroom, which passes it on to
	// the reaction:received hooks as any reaction (not a confirmation);
	// erin's next command is the barrier that it was handled.
	phone.WaitMessage(t, room, hstest.Match{EventID: proposal.EventID})
	phone.React(t, room, proposal.EventID, "✅")
	rec.waitFor(t, "reaction:✅:"+string(proposal.EventID), 1, 30*time.Second)
	show := console.SendText(t, room, "!config")
	shown := console.WaitMessage(t, room, hstest.Match{Sender: router, Contains: "Settings of the agents in this room", After: show})
	if !strings.Contains(shown.Body, "**helper**: model `agent`") {
		t.Errorf("after alice's ✅ the settings show:\n%s", shown.Body)
	}
	if got, err := os.ReadFile(e.yaml); err != nil || !bytes.Equal(got, original) {
		t.Fatalf("after alice's ✅ config.yaml changed (%v):\n%s", err, got)
	}

	// erin's ✅ applies it.
	console.React(t, room, proposal.EventID, "✅")
	applied := console.WaitMessage(t, room, hstest.Match{Sender: router, Contains: "✅ Applied", After: show})
	if !strings.Contains(applied.Body, "helper's model is now `big`") || !strings.Contains(applied.Body, erin.UserID.String()) {
		t.Errorf("the outcome says %q", applied.Body)
	}
	got, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}
	compareClientsConfigGolden(t, e, got, "testdata/configcmd/applied_clients.golden.yaml", strings.NewReplacer(
		llm.URL, "LLM_URL",
		string(alice.UserID), "@ALICE",
		string(erin.UserID), "@ERIN",
	))

	llm.Script(llmtest.Text("On big."))
	q := phone.SendText(t, room, "@"+helper.Localpart()+" hello")
	phone.WaitMessage(t, room, hstest.Match{Sender: helper, Contains: "On big.", ThreadRoot: q})
	if reqs := llm.Requests(); len(reqs) != 1 || reqs[0].Body.Model != "big-model" {
		t.Errorf("model requests %d, the first on %q; want one on big-model", len(reqs), modelOfFirst(reqs))
	}
}

// compareClientsConfigGolden compares config.yaml's text with a golden
// file in which what differs per run is a placeholder: what r replaces
// (URLs, people), then the homeserver's URL and name and the localparts'
// suffix. -update-configcmd rewrites the golden file.
func compareClientsConfigGolden(t *testing.T, e *testEnv, got []byte, golden string, r *strings.Replacer) {
	t.Helper()
	text := strings.ReplaceAll(r.Replace(string(got)), e.hs.URL, "HS_URL")
	text = strings.ReplaceAll(text, e.hs.ServerName, "SERVER_NAME")
	text = strings.ReplaceAll(text, "-"+e.suffix, "-SUFFIX")
	if *updateConfigGolden {
		if err := os.WriteFile(golden, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if text != string(want) {
		t.Errorf("config.yaml differs from %s\n--- got ---\n%s--- want ---\n%s", golden, text, want)
	}
}
