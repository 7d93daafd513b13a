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
// memory:extracted with them, and stores what its hooks leave as the
// person's memories (nothing when one vetoes them or they cannot run). It
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
	thread := env.ResolvedThreadID
	if thread == "" {
		thread = env.ThreadID
	}
	ev := &hooks.MemoryExtractedContext{Where: hooks.Where{
		Agent: agent, RoomID: env.RoomID, ThreadID: thread, RequesterID: env.RequesterID, SessionID: env.SessionID,
	}}
	for _, cand := range candidates {
		ev.Memories = append(ev.Memories, hooks.ExtractedMemory{
			Text: cand.Text, Scope: string(mem.ScopePerson), Person: who.Person, Agent: agent, Room: who.Room,
		})
	}
	// What the memory:extracted hooks leave is stored, nothing else; when
	// they cannot run (the recursion limit), nothing is: a filtering hook
	// is never skipped.
	if err := hooks.EmitFrom(ctx, c, hooks.MemoryExtracted, ev); err != nil {
		return fmt.Errorf("failed to run the memory:extracted hooks, so no extracted memory was stored: %w", err)
	}
	if ev.Vetoed {
		c.Logger().Info().Int("proposed", len(candidates)).Str("reason", ev.VetoReason).Msg("A memory:extracted hook vetoed the extracted memories")
		return nil
	}
	candidates = candidates[:0]
	for _, m := range ev.Memories {
		candidates = append(candidates, mem.Candidate{Text: m.Text})
	}
	if len(candidates) == 0 {
		return nil
	}
	stored, err := p.store.StoreCandidates(ctx, who, candidates)
	if err != nil {
		return err
	}
	c.Logger().Debug().Int("proposed", len(candidates)).Int("stored", len(stored)).Msg("Stored extracted memories")
	return nil
}
