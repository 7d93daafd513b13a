package memory

import (
	"context"
	"fmt"
	"strings"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	mem "github.com/hookroom/hookroom/memory"
)

// extractHook runs after a turn of an agent with extract: it asks extract's
// model for durable facts about the person in the exchange, emits
// memory:extracted with them, and stores them as the person's memories. It
// skips replies not from the model, messages no person wrote (schedules,
// hook messages), and, unless encrypted_rooms is set, encrypted rooms: the
// exchange would leave the server for the extract endpoint.
func (p *Plugin) extractHook(ctx context.Context, c *hooks.AfterResponseContext) error {
	r := c.Result
	env := r.Envelope
	agent := env.AgentName
	switch {
	case p.model == nil, !p.store.Options(agent).Extract, r.Kind != hooks.ResponseAI,
		env.Depth > 0, env.SourceKind == hooks.SourceScheduled, env.RequesterID == "",
		strings.TrimSpace(env.Body) == "":
		return nil
	}
	who := mem.WhoForTurn(ctx, env, agent, p.encryptedFunc())
	if who.Encrypted && !p.extractCrypto {
		return nil
	}
	seen, err := p.store.List(ctx, who)
	if err != nil {
		return err
	}
	var known []mem.Memory
	for _, m := range seen {
		if m.Scope == mem.ScopePerson {
			known = append(known, m)
		}
	}
	req := mem.ExtractionRequest(mem.ExtractionTurn{UserText: env.Body, Reply: r.Text, Known: known})
	comp, err := agents.Complete(ctx, p.model, &req, nil)
	if err != nil {
		return fmt.Errorf("failed to ask the extract model for memories: %w", err)
	}
	candidates, err := mem.ParseExtraction(comp.Text, p.maxText)
	if err != nil {
		return err
	}
	if len(candidates) == 0 {
		return nil
	}
	ev := Extracted{Agent: agent, Person: string(who.Person), Room: string(who.Room)}
	for _, cand := range candidates {
		ev.Memories = append(ev.Memories, cand.Text)
	}
	if err := c.Emit(ctx, EventExtracted, ev); err != nil {
		c.Logger().Debug().Err(err).Msg("memory:extracted was not emitted")
	}
	stored, err := p.store.StoreCandidates(ctx, who, candidates)
	if err != nil {
		return err
	}
	c.Logger().Debug().Int("proposed", len(candidates)).Int("stored", len(stored)).Msg("Stored extracted memories")
	return nil
}
