package team

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
)

// instant answers at once: what Run costs beyond the model calls.
type instant struct{}

func (instant) RunMember(_ context.Context, m hooks.AgentName, t Task) (MemberResult, error) {
	return answer(string(m) + ": " + t.Question), nil
}

func (instant) Lead(_ context.Context, req LeadRequest) (MemberResult, error) {
	if req.Step == StepPlan {
		return answer(`{"assignments": [{"member": "a", "task": "x"}, {"member": "b", "task": "y"}, {"member": "c", "task": "z"}]}`), nil
	}
	return answer("synthesis"), nil
}

// BenchmarkRun measures the orchestration of a three-member team with
// instant model calls: in memory, and recorded in SQLite (each step
// written before and after it runs, as in service).
func BenchmarkRun(b *testing.B) {
	for _, mode := range []Mode{ModeCollaborate, ModeCoordinate} {
		def := Definition{Name: "bench", Members: []hooks.AgentName{"a", "b", "c"}, Mode: mode}
		b.Run(string(mode)+"/memory", func(b *testing.B) {
			for b.Loop() {
				if _, err := Run(b.Context(), Plan{Team: def, Question: "Q"}, instant{}); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(string(mode)+"/sqlite", func(b *testing.B) {
			db, err := database.OpenSQLite(b.Context(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			s := NewStore(db)
			if err := s.Upgrade(b.Context()); err != nil {
				b.Fatal(err)
			}
			i := 0
			for b.Loop() {
				i++
				p := Plan{Team: def, Question: "Q", Store: s, SourceEventID: id.EventID(fmt.Sprintf("$%d", i))}
				if _, err := Run(b.Context(), p, instant{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
