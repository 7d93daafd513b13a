package bot

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/internal/testkit"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

var updateConfigGolden = flag.Bool("update-configcmd", false, "rewrite testdata/configcmd/*.golden.yaml from the current output")

// !config on a real homeserver: a person who is not a global user is
// refused; a change whose result does not validate is refused and the
// file stays byte for byte; alice's proposal waits for her ✅ (bob's ✅ does
// nothing), then config.yaml is written with its comments and ${VAR}
// reference intact (golden file) and reloaded, and the next turn runs on
// the new model; a change that passes the file check but does not load
// (an unknown tool) is put back; the room's thread_mode set to room makes
// the next answer come in the room's timeline.
func TestConfigCommandFromChat(t *testing.T) {
	var bob *hstest.User
	e := newTurnEnvWith(t, func(e *turnEnv) {
		bob = e.hs.RegisterUser(t, "bob")
		e.cfg = strings.Replace(e.cfg, "models:\n", "models:\n  # the bigger model, chosen from chat\n  big:\n    provider: openai\n    base_url: "+e.llm.URL+"\n    model: big-model\n", 1)
		e.cfg = strings.Replace(e.cfg, "    model: agent\n", "    model: agent   # the scripted model\n", 1)
		e.cfg = strings.Replace(e.cfg, "agents:\n", "# The agents of this test.\nagents:\n", 1)
		e.cfg += "defaults:\n  config_command: true   # !config from chat\n"
	}, "  default_room_access: true\n", []string{"helper"}, "")
	if _, err := bob.Client.JoinRoomByID(context.Background(), e.room); err != nil {
		t.Fatal(err)
	}
	router := e.userID("router")
	original, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}
	unchanged := func(when string) {
		t.Helper()
		if got, err := os.ReadFile(e.yaml); err != nil || !bytes.Equal(got, original) {
			t.Fatalf("%s: config.yaml changed (%v):\n%s", when, err, got)
		}
	}

	// bob may talk to the agents but is no global user.
	if _, err := bob.Client.SendText(context.Background(), e.room, "!config"); err != nil {
		t.Fatal(err)
	}
	waitMessageFrom(t, bob, e.room, router, "Only hookroom's administrators (authorization.global_users) may use `!config`")

	// A model that is not configured: refused at once, nothing written.
	e.say("!config helper model nosuch", "")
	refusal := waitMessageFrom(t, e.person, e.room, router, "would not be valid")
	if !strings.Contains(refusal, "agents.helper.model") || !strings.Contains(refusal, "Configured models: agent, big, default, router.") {
		t.Errorf("the refusal does not name the problem and the models:\n%s", refusal)
	}
	unchanged("after a refused proposal")

	// alice proposes big; bob's ✅ does nothing.
	e.say("!config helper model big", "")
	proposal := waitEventFrom(t, e.person, e.room, router, "+ big")
	react(t, bob, e.room, proposal, "✅")
	// The barrier: alice's next command is handled after bob's reaction.
	e.say("!config", "")
	shown := waitMessageFrom(t, e.person, e.room, router, "Settings of the agents in this room")
	if !strings.Contains(shown, "**helper**: model `agent`") {
		t.Errorf("after bob's ✅ the settings show:\n%s", shown)
	}
	unchanged("after bob's ✅")

	// alice's ✅ applies it.
	react(t, e.person, e.room, proposal, "✅")
	applied := waitMessageFrom(t, e.person, e.room, router, "✅ Applied")
	if !strings.Contains(applied, "helper's model is now `big`") {
		t.Errorf("the outcome says %q", applied)
	}
	got, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}
	compareConfigGolden(t, e, got, "testdata/configcmd/applied.golden.yaml")

	e.llm.Script(llmtest.Text("On big."))
	e.say("hello", "")
	e.waitTerminal(1)
	if reqs := e.llm.Requests(); len(reqs) != 1 || reqs[0].Body.Model != "big-model" {
		t.Errorf("model requests %d, the first on %q; want one on big-model", len(reqs), modelOfFirst(reqs))
	}

	// Instructions over several lines: a literal block added to the
	// agent, in the system prompt of the next turn.
	e.say("!config helper instructions Answer in rhymes.\nKeep it short.", "")
	proposal = waitEventFrom(t, e.person, e.room, router, "+ Keep it short.")
	react(t, e.person, e.room, proposal, "✅")
	waitMessageFrom(t, e.person, e.room, router, "helper's instructions is now")
	before, err := os.ReadFile(e.yaml)
	if err != nil {
		t.Fatal(err)
	}
	compareConfigGolden(t, e, before, "testdata/configcmd/instructions.golden.yaml")
	e.llm.Script(llmtest.Text("In rhymes."))
	e.say("hello again", "")
	e.waitTerminal(2)
	if reqs := e.llm.Requests(); len(reqs) != 2 || !strings.Contains(string(reqs[1].Body.Messages[0].Content), "Answer in rhymes.\nKeep it short.") {
		t.Errorf("the turn after the change was not sent the new instructions: %d requests", len(reqs))
	}

	// An unknown tool passes the file check but fails the reload: the
	// file is put back as it was before the ✅.
	e.say("!config helper tools nosuch_tool", "")
	proposal = waitEventFrom(t, e.person, e.room, router, "+ [nosuch_tool]")
	react(t, e.person, e.room, proposal, "✅")
	waitMessageFrom(t, e.person, e.room, router, "the change did not load, so config.yaml was put back")
	if after, err := os.ReadFile(e.yaml); err != nil || !bytes.Equal(after, before) {
		t.Errorf("config.yaml after a change that did not load (%v):\n%s", err, after)
	}

	// The room's own setting: the agents answer in its timeline from now
	// on, not in a thread of the message.
	e.say("!config room thread_mode room", "")
	proposal = waitEventFrom(t, e.person, e.room, router, "+ room")
	react(t, e.person, e.room, proposal, "✅")
	waitMessageFrom(t, e.person, e.room, router, "this room's thread_mode is now `room`")
	if got, _ := os.ReadFile(e.yaml); !strings.Contains(string(got), "    thread_mode: room\n") {
		t.Errorf("config.yaml lacks the room's thread_mode:\n%s", got)
	}
	e.llm.Script(llmtest.Text("In the timeline."))
	e.say("and where do you answer now?", "")
	e.waitTerminal(3)
	_, _, reply := e.visibleText(e.results[2].EventID)
	if rel := reply.Content.AsMessage().RelatesTo; rel != nil && rel.Type == event.RelThread {
		t.Errorf("after thread_mode room the answer is in thread %s", rel.EventID)
	}
}

func modelOfFirst(reqs []llmtest.Request) string {
	if len(reqs) == 0 {
		return ""
	}
	return reqs[0].Body.Model
}

// compareConfigGolden compares config.yaml's text with a golden file, in
// which the values that differ per run (URLs, the server name, the room,
// the people and the localparts' suffix) are written as placeholders.
func compareConfigGolden(t *testing.T, e *turnEnv, got []byte, golden string) {
	t.Helper()
	compareClientsConfigGolden(t, e.testEnv, got, golden, strings.NewReplacer(
		string(e.room), "ROOM_ID",
		string(e.person.UserID), "@ALICE",
		e.llm.URL, "LLM_URL",
	))
}

// waitEventFrom waits until sender posted a message in room containing
// want, as u sees it, and returns its event id.
func waitEventFrom(t testing.TB, u *hstest.User, room id.RoomID, sender id.UserID, want string) id.EventID {
	t.Helper()
	var found id.EventID
	testkit.Until(t, 60*time.Second, func() (bool, string) {
		resp, err := u.Client.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			return false, fmt.Sprintf("read %s: %v", room, err)
		}
		for _, ev := range resp.Chunk {
			if ev.Sender != sender || ev.Type != event.EventMessage {
				continue
			}
			_ = ev.Content.ParseRaw(ev.Type)
			if msg := ev.Content.AsMessage(); msg != nil && strings.Contains(msg.Body, want) {
				found = ev.ID
				return true, ""
			}
		}
		return false, fmt.Sprintf("waiting for a message of %s containing %q in %s", sender, want, room)
	})
	return found
}
