package agents_test

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/hookroom/hookroom/agents"
)

// scriptedModel is an in-memory Model that plays steps in turn (the last
// one repeats): the "instant model" of the tool-loop tests and benchmarks.
type scriptedModel struct {
	steps [][]agents.Event
	n     atomic.Int64
}

var _ agents.Model = (*scriptedModel)(nil)

func (m *scriptedModel) Stream(_ context.Context, _ *agents.Request) (agents.Stream, error) {
	i := int(m.n.Add(1) - 1)
	if i >= len(m.steps) {
		i = len(m.steps) - 1
	}
	return &sliceStream{events: m.steps[i]}, nil
}

type sliceStream struct {
	events []agents.Event
	i      int
}

func (s *sliceStream) Recv() (agents.Event, error) {
	if s.i >= len(s.events) {
		return agents.Event{}, io.EOF
	}
	s.i++
	return s.events[s.i-1], nil
}

func (s *sliceStream) Close() error { return nil }
