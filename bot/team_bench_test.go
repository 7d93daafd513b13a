package bot

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents/llmtest"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio/hstest"
)

// teamBenchDelay is how long the scripted model takes to answer any
// request of BenchmarkTeamOverhead: 50 ms, or HOOKROOM_TEAM_BENCH_DELAY
// (a duration: 500ms is closer to a hosted model's answer).
var teamBenchDelay = func() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("HOOKROOM_TEAM_BENCH_DELAY")); err == nil && d > 0 {
		return d
	}
	return 50 * time.Millisecond
}()

// teamBenchEnv is the setup of BenchmarkTeamOverhead: one room with three
// agents (alpha, beta, gamma) on a model that answers after teamBenchDelay,
// a collaborate team (crew) and a coordinate team (squad) of all three,
// both led by the team's own model; a running hookroom, and the person's
// sync.
type teamBenchEnv struct {
	e        *testEnv
	ml       *modelLog
	person   *hstest.User
	room     id.RoomID
	arrivals <-chan *event.Event
}

func newTeamBenchEnv(b *testing.B) *teamBenchEnv {
	e := newEnv(b)
	llm := llmtest.NewServerWith(b, []llmtest.Option{llmtest.WithFallback(llmtest.Text("An answer of a few words.").WithDelay(teamBenchDelay))})
	plan := llmtest.Text(`{"assignments": [{"member": "alpha", "task": "part a"}, {"member": "beta", "task": "part b"}, {"member": "gamma", "task": "part c"}]}`).WithDelay(teamBenchDelay)
	llm.On(func(r *llmtest.Request) bool { k, _ := teamCallKind(*r, nil); return k == "plan" }, slices.Repeat([]llmtest.Reply{plan}, 1000)...)
	ml := newModelLog(b, llm.RootURL)
	env := &teamBenchEnv{e: e, ml: ml, person: e.hs.RegisterUser(b, "alice")}
	agentNames := []string{"alpha", "beta", "gamma"}
	invite := []id.UserID{e.userID("router"), e.userID("crew"), e.userID("squad")}
	for _, a := range agentNames {
		invite = append(invite, e.userID(a))
	}
	env.room = createRoom(b, env.person, invite...)
	teams := fmt.Sprintf("teams:\n"+
		"  crew:\n    username: %s\n    members: [alpha, beta, gamma]\n    mode: collaborate\n    model: lead\n    rooms: [main]\n"+
		"  squad:\n    username: %s\n    members: [alpha, beta, gamma]\n    mode: coordinate\n    model: lead\n    rooms: [main]\n",
		e.localpart("crew"), e.localpart("squad"))
	cfg := e.configAgents(agentSetup{
		LLM: ml.URL + "/v1", Model: "agent-model",
		Models: fmt.Sprintf("  default:\n    provider: echo\n  lead:\n    provider: openai\n    base_url: %s/v1\n    model: lead-model\n", ml.URL),
		Room:   env.room, Admins: []id.UserID{env.person.UserID},
		Agents: agentNames, AgentYAML: "    model: agent\n", Extra: teams,
	})
	// No placeholder: the first message of the answering account is its
	// whole reply.
	e.start(cfg, &events{}, Options{PlaceholderDelay: time.Minute})
	env.arrivals = arrivals(b, env.person)
	return env
}

// ask sends a message mentioning name and returns how long its reply took
// to arrive in the person's sync, and the model calls made meanwhile.
func (env *teamBenchEnv) ask(b *testing.B, name, text string) (time.Duration, []modelCall) {
	from := len(env.ml.snapshot())
	start := time.Now()
	if _, err := env.person.Client.SendText(context.Background(), env.room, "@"+env.e.localpart(name)+" "+text); err != nil {
		b.Fatal(err)
	}
	waitFrom(b, env.arrivals, env.e.userID(name))
	took := time.Since(start)
	return took, env.ml.snapshot()[from:]
}

// modelTimes sums the model time of calls by kind: "member" (an agent's
// answer, as a member or alone), "plan", "synthesis"; longest is the
// longest member call.
func modelTimes(calls []modelCall) (sum map[string]time.Duration, longest time.Duration) {
	sum = map[string]time.Duration{}
	for _, c := range calls {
		kind, _ := teamCallKind(c.Req, []string{"alpha", "beta", "gamma"})
		d := c.End.Sub(c.Start)
		sum[kind] += d
		if kind == "member" {
			longest = max(longest, d)
		}
	}
	return sum, longest
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkTeamOverhead measures what running three agents as a team
// costs over asking them one after the other, in the same run, with a
// model that answers every request after 50 ms: single=3 asks alpha,
// beta and gamma in turn (three single-agent turns); collaborate asks
// the team crew of the three (3 member calls in parallel, then the
// leader's synthesis), coordinate the team squad (the leader's plan, the
// 3 members in parallel, the synthesis). Metrics: turn_ms (the time from
// the person's send to the reply in their sync; for single=3 the three
// turns' sum), model_ms (the model time of the members' calls and the
// synthesis, as the proxy in front of the model saw it; the plan's is
// plan_ms), x_model = turn_ms / model_ms (the target for a team:
// at most 1.1; single=3 gives the single-agent equivalent), and
// overhead_ms = turn_ms minus the model time on the turn's critical path
// (for a team: plan, the longest member, synthesis; for single=3 also per
// turn: overhead_per_turn_ms, mostly the homeserver's round trips, which
// a team turn has once). A team's overhead_ms minus single=3's
// overhead_per_turn_ms is what orchestrating the team costs.
//
//	go test -tags goolm -run XXX -bench TeamOverhead -benchtime 1x -count 3 ./bot/
func BenchmarkTeamOverhead(b *testing.B) {
	env := newTeamBenchEnv(b)
	// Warm up: every account has answered once.
	for _, name := range []string{"alpha", "beta", "gamma", "crew", "squad"} {
		env.ask(b, name, "warm up")
	}
	b.Run("single=3", func(b *testing.B) {
		var turn, model, critical time.Duration
		for i := range b.N {
			for _, name := range []string{"alpha", "beta", "gamma"} {
				took, calls := env.ask(b, name, fmt.Sprintf("question %d", i))
				sum, _ := modelTimes(calls)
				turn += took
				model += sum["member"] + sum["synthesis"] + sum["plan"]
				critical += sum["member"]
			}
		}
		n := float64(b.N)
		b.ReportMetric(ms(turn)/n, "turn_ms")
		b.ReportMetric(ms(model)/n, "model_ms")
		b.ReportMetric(ms(turn)/ms(model), "x_model")
		b.ReportMetric(ms(turn-critical)/n, "overhead_ms")
		b.ReportMetric(ms(turn-critical)/n/3, "overhead_per_turn_ms")
	})
	for _, tm := range []struct {
		name string
		mode hooks.TeamMode
	}{{"crew", hooks.TeamCollaborate}, {"squad", hooks.TeamCoordinate}} {
		b.Run(string(tm.mode), func(b *testing.B) {
			var turn, model, plan, critical time.Duration
			for i := range b.N {
				took, calls := env.ask(b, tm.name, fmt.Sprintf("question %d", i))
				sum, longest := modelTimes(calls)
				if n := len(calls); n != 4 && n != 5 {
					b.Fatalf("the team turn made %d model calls, want 3 members and the synthesis (and the plan)", n)
				}
				turn += took
				model += sum["member"] + sum["synthesis"]
				plan += sum["plan"]
				critical += sum["plan"] + longest + sum["synthesis"]
			}
			n := float64(b.N)
			b.ReportMetric(ms(turn)/n, "turn_ms")
			b.ReportMetric(ms(model)/n, "model_ms")
			b.ReportMetric(ms(plan)/n, "plan_ms")
			b.ReportMetric(ms(turn)/ms(model), "x_model")
			b.ReportMetric(ms(turn-critical)/n, "overhead_ms")
		})
	}
}
