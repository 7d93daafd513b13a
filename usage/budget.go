package usage

import (
	"context"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
)

// DayStart returns 00:00 UTC of t's day in UTC: where "today" begins for
// usage and budgets, wherever the server runs.
func DayStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// NextDay returns 00:00 UTC of the day after t's day in UTC: when a daily
// budget used up at t is available again.
func NextDay(t time.Time) time.Time { return DayStart(t).AddDate(0, 0, 1) }

// MonthStart returns 00:00 UTC of the first day of t's month in UTC.
func MonthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

// Budgets are the daily token budgets that apply to one turn. A budget of
// 0 is unlimited.
type Budgets struct {
	// PerUser bounds the tokens one person's turns may use per UTC day,
	// over every agent and room.
	PerUser int
	// PerAgent bounds the tokens the agent's turns may use per UTC day,
	// over every room and person.
	PerAgent int
}

// Scope says whose budget is used up.
type Scope string

const (
	// ScopePerson is the requester's own daily budget.
	ScopePerson Scope = "person"
	// ScopeAgent is the agent's daily budget.
	ScopeAgent Scope = "agent"
)

// Exceeded describes a used-up daily budget.
type Exceeded struct {
	Scope Scope
	// Limit is the budget; Used what was used of it today (at least Limit).
	Limit, Used int64
	// Resets is when the budget is available again: the next 00:00 UTC.
	Resets time.Time
}

// limit is one daily budget of a turn: whose, and how large.
type limit struct {
	scope Scope
	limit int
	name  string
}

// limits are the budgets of b that bound a turn of agent for requester:
// the person's first, then the agent's; unlimited ones are left out.
func (b Budgets) limits(agent hooks.AgentName, requester id.UserID) []limit {
	var out []limit
	for _, c := range []limit{{ScopePerson, b.PerUser, string(requester)}, {ScopeAgent, b.PerAgent, string(agent)}} {
		if c.limit > 0 {
			out = append(out, c)
		}
	}
	return out
}

// over reports whether used tokens exhaust limit (0: unlimited). A turn
// may start while anything is left, and may then go beyond the budget: how
// many tokens a turn takes is known only once it is over.
func over(limit int, used int64) bool { return limit > 0 && used >= int64(limit) }

// Check reports the daily budget a turn of agent for requester starting
// at now may not use because it is used up today (UTC): the person's
// first, then the agent's. It returns nil when the turn may call the model
// (always, without budgets, and without reading the database). It reads
// one row per budget, however many turns the day had.
func (s *Store) Check(ctx context.Context, now time.Time, agent hooks.AgentName, requester id.UserID, b Budgets) (*Exceeded, error) {
	for _, c := range b.limits(agent, requester) {
		used, err := s.dayTotal(ctx, now, c.scope, c.name)
		if err != nil {
			return nil, err
		}
		if over(c.limit, used) {
			return &Exceeded{Scope: c.scope, Limit: int64(c.limit), Used: used, Resets: NextDay(now)}, nil
		}
	}
	return nil, nil
}

// Crossing is a share of a daily budget one turn's tokens went past.
type Crossing struct {
	Scope Scope
	// Subject is the person's user id (ScopePerson) or the agent's name.
	Subject string
	// Limit is the budget, Used what was used of it today with the turn,
	// Share the share of Limit the turn crossed.
	Limit, Used int64
	Share       float64
	Day         time.Time
}

// Crossed reports the shares of the daily budgets b (of agent and
// requester) that a turn using tokens, recorded at now, went past: those
// that today's use reached with the turn and had not reached without it.
// So each share is crossed once per budget and day, by one turn. It reads
// nothing without budgets or shares.
func (s *Store) Crossed(ctx context.Context, now time.Time, agent hooks.AgentName, requester id.UserID, b Budgets, tokens int64, shares []float64) ([]Crossing, error) {
	if tokens <= 0 || len(shares) == 0 {
		return nil, nil
	}
	var out []Crossing
	for _, c := range b.limits(agent, requester) {
		used, err := s.dayTotal(ctx, now, c.scope, c.name)
		if err != nil {
			return nil, err
		}
		for _, share := range shares {
			mark := share * float64(c.limit)
			if float64(used) >= mark && float64(used-tokens) < mark {
				out = append(out, Crossing{Scope: c.scope, Subject: c.name, Limit: int64(c.limit), Used: used, Share: share, Day: DayStart(now)})
			}
		}
	}
	return out, nil
}
