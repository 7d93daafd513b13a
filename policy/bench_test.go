package policy

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// benchPolicy has n global_users patterns and n reply_to entries for agent
// "coder", of every kind: half exact ids, a quarter whole servers, a
// quarter localpart wildcards and subdomains, and among reply_to also
// room: and members: grants.
func benchPolicy(b *testing.B, n int) *Policy {
	b.Helper()
	var global, reply []string
	for i := range n {
		switch i % 4 {
		case 0, 1:
			global = append(global, fmt.Sprintf("@admin%d:example.org", i))
			reply = append(reply, fmt.Sprintf("@user%d:example.org", i))
		case 2:
			global = append(global, fmt.Sprintf("@*:staff%d.example.org", i))
			reply = append(reply, fmt.Sprintf("@*:team%d.example.org", i))
		case 3:
			global = append(global, fmt.Sprintf("@ops-%d-*:*", i))
			if i%8 == 3 {
				reply = append(reply, fmt.Sprintf("members:!room%d:example.org", i))
			} else {
				reply = append(reply, fmt.Sprintf("@bot-%d-*:*.example.org", i))
			}
		}
	}
	p, err := New(Options{
		GlobalUsers: global,
		Aliases:     map[string]id.UserID{"@tg_*:bridge.example.org": "@user0:example.org"},
		Agents:      map[hooks.AgentName]AgentOptions{"coder": {ReplyTo: reply, DM: DMPairing}},
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

var noMembers = MembershipFunc(func(id.RoomID, id.UserID) bool { return false })

// BenchmarkDecide measures one decision with 100 and 1,000 rules per list,
// and reports its 95th percentile (p95-ns) besides the mean. The issue
// asks for p95 ≤ 5 µs with 1,000 rules.
func BenchmarkDecide(b *testing.B) {
	for _, n := range []int{100, 1000} {
		p := benchPolicy(b, n)
		admit := func(id.UserID) bool { return true }
		cases := []struct {
			name string
			req  Request
			want Reason
		}{
			{"global-exact", Request{Sender: "@admin0:example.org", Agent: "coder", Room: general, RoomRules: admit}, ReasonGlobalUser},
			{"reply_to-last-wildcard", Request{Sender: id.UserID(fmt.Sprintf("@bot-%d-x:a.example.org", lastWildcard(n))), Agent: "coder", Room: general,
				RoomRules: admit, Members: noMembers}, ReasonReplyTo},
			{"alias-then-reply_to", Request{Sender: "@tg_1:bridge.example.org", Agent: "coder", Room: general, RoomRules: admit}, ReasonReplyTo},
			{"nobody-dm-pairing", Request{Sender: "@stranger:elsewhere.org", Agent: "coder", Room: dm, DM: true,
				RoomRules: admit, Members: noMembers, Pairings: facts{}}, ReasonPairingRequired},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("rules=%d/%s", n, c.name), func(b *testing.B) {
				if d := p.Decide(c.req); d.Reason != c.want {
					b.Fatalf("Decide = %v, want reason %s", d, c.want)
				}
				samples := make([]time.Duration, 0, min(b.N, 1<<20))
				b.ReportAllocs()
				for b.Loop() {
					start := time.Now()
					p.Decide(c.req)
					if len(samples) < cap(samples) {
						samples = append(samples, time.Since(start))
					}
				}
				if len(samples) > 0 {
					slices.Sort(samples)
					b.ReportMetric(float64(samples[len(samples)*95/100].Nanoseconds()), "p95-ns")
				}
			})
		}
	}
}

// lastWildcard is the index of the last "@bot-I-*" reply_to entry of
// benchPolicy(n): the entry found last.
func lastWildcard(n int) int {
	for i := n - 1; i >= 0; i-- {
		if i%4 == 3 && i%8 != 3 {
			return i
		}
	}
	return -1
}

func BenchmarkLimitsAllow(b *testing.B) {
	l, err := NewLimits(RateLimits{PerPerson: Rate{PerMinute: 1e4}, PerRoom: Rate{PerMinute: 1e4}})
	if err != nil {
		b.Fatal(err)
	}
	people := make([]id.UserID, 1000)
	for i := range people {
		people[i] = id.UserID(fmt.Sprintf("@u%d:example.org", i))
	}
	now := t0
	i := 0
	for b.Loop() {
		now = now.Add(time.Millisecond)
		l.Allow(now, "coder", people[i%len(people)], general)
		i++
	}
}
