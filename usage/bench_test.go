package usage

import (
	"context"
	"fmt"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/dbtest"
)

// BenchmarkCheck measures the budget check a turn makes before its model
// call (both budgets set: two indexed sums) on SQLite, against a table of
// rows turns of today spread over 100 people and 10 agents, next to
// Record (one insert) on the same database.
func BenchmarkCheck(b *testing.B) {
	for _, rows := range []int{1000, 100000} {
		db := dbtest.SQLite.Fresh(b)
		s := New(db)
		if err := s.Upgrade(b.Context()); err != nil {
			b.Fatal(err)
		}
		now := time.Now()
		err := db.DoTxn(b.Context(), nil, func(ctx context.Context) error {
			for i := range rows {
				t := Turn{
					SourceEventID: id.EventID(fmt.Sprintf("$%d", i)), Agent: hooks.AgentName(fmt.Sprintf("agent%d", i%10)),
					RoomID: "!room:localhost", Requester: id.UserID(fmt.Sprintf("@user%d:localhost", i%100)),
					InputTokens: 100, OutputTokens: 10, ModelCalls: 1, At: now.Add(-time.Duration(i) * time.Millisecond),
				}
				if err := s.Record(ctx, t); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		budgets := Budgets{PerUser: 1 << 30, PerAgent: 1 << 30}
		b.Run(fmt.Sprintf("check/rows=%d", rows), func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Check(b.Context(), now, "agent3", "@user42:localhost", budgets); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("record/rows=%d", rows), func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				t := Turn{SourceEventID: id.EventID(fmt.Sprintf("$bench%d", i)), Agent: "agent3", RoomID: "!room:localhost", Requester: "@user42:localhost", InputTokens: 1, ModelCalls: 1}
				if err := s.Record(b.Context(), t); err != nil {
					b.Fatal(err)
				}
			}
		})
		_ = db.Close()
	}
}
