package bot

import (
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/agents/llmtest"
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
