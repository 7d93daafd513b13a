package agents_test

import (
	"fmt"
	"reflect"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks/hooktest"
	"github.com/hookroom/hookroom/internal/dbtest"
)

// seedTurns stores the four turns of conversation in scope, turn i as the
// answer to source event "$i" (turn 0 without a source).
func seedTurns(t *testing.T, h *agents.History, scope agents.ScopeKey) [][]agents.Message {
	t.Helper()
	turns, _ := conversation()
	for i, turn := range turns {
		source := id.EventID(fmt.Sprintf("$%d", i))
		if i == 0 {
			source = ""
		}
		if _, err := h.AppendTurn(t.Context(), scope, "assistant", source, nil, turn...); err != nil {
			t.Fatal(err)
		}
	}
	return turns
}

func TestHistoryForget(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, dialect dbtest.Dialect) {
		turns, _ := conversation()
		without := func(skip ...int) []agents.Message {
			var out []agents.Message
		next:
			for i, turn := range turns {
				for _, s := range skip {
					if s == i {
						continue next
					}
				}
				out = append(out, turn...)
			}
			return out
		}
		cases := []struct {
			name string
			// compact truncates the history to its two newest turns before
			// forgetting.
			compact     bool
			forget      id.EventID
			wantRemoved int64
			want        []agents.Message
		}{
			{name: "a turn with tool calls", forget: "$1", wantRemoved: int64(len(turns[1])), want: without(1)},
			{name: "the newest turn", forget: "$3", wantRemoved: int64(len(turns[3])), want: without(3)},
			{name: "an unknown event", forget: "$nope", want: without()},
			{name: "no event removes nothing stored without one", forget: "", want: without()},
			{name: "a turn compaction kept", compact: true, forget: "$3", wantRemoved: int64(len(turns[3])), want: turns[2]},
			{name: "a turn compaction dropped", compact: true, forget: "$1", want: without(0, 1)},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				h, _ := newHistoryOn(t, dialect)
				ctx := hooktest.Context(t)
				seedTurns(t, h, "scope")
				if _, err := h.AppendTurn(ctx, "other", "assistant", "$other", nil, user("elsewhere")); err != nil {
					t.Fatal(err)
				}
				if tc.compact {
					keep := agents.EstimateTokens(without(0, 1)...)
					if _, err := h.Compact(ctx, agents.CompactRequest{Scope: "scope", Budget: keep + 1, Keep: keep}); err != nil {
						t.Fatal(err)
					}
					if got, _ := h.Load(ctx, "scope"); !reflect.DeepEqual(got, without(0, 1)) {
						t.Fatalf("compaction kept %d messages, want the last two turns", len(got))
					}
				}
				n, err := h.Forget(ctx, tc.forget)
				if err != nil || n != tc.wantRemoved {
					t.Fatalf("Forget(%q) = %d, %v; want %d", tc.forget, n, err, tc.wantRemoved)
				}
				got, err := h.Load(ctx, "scope")
				if err != nil || !reflect.DeepEqual(got, tc.want) {
					t.Errorf("history after Forget: %d messages, %v; want %d", len(got), err, len(tc.want))
				}
				if other, _ := h.Load(ctx, "other"); len(other) != 1 {
					t.Errorf("another scope lost its turn: %v", other)
				}
				if _, err := h.Session(ctx, "scope"); err != nil {
					t.Errorf("the session went with the turn: %v", err)
				}
			})
		}
	})
}
