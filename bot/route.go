package bot

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/runes"
	"github.com/hookroom/hookroom/matrixio"
)

// agentsOf returns the agents of the world w in room, by name: those
// config.yaml puts there and those that joined it on a person's invite.
func (b *Bot) agentsOf(w *world, room id.RoomID) []hooks.AgentName {
	var out []hooks.AgentName
	for _, name := range w.cfg.AgentNames() {
		n := hooks.AgentName(name)
		if slices.Contains(w.joined[n], room) {
			out = append(out, n)
		} else if acct := w.agents[n]; acct != nil && b.invited.has(room, acct.UserID()) {
			out = append(out, n)
		}
	}
	return out
}

// mentioned returns the agents of the world w a message addresses (see
// mentionedAgents).
func (w *world) mentioned(msg *event.MessageEventContent, candidates []hooks.AgentName) []hooks.AgentName {
	return mentionedAgents(w.cfg, func(name hooks.AgentName) id.UserID {
		if acct := w.agents[name]; acct != nil {
			return acct.UserID()
		}
		return ""
	}, msg, candidates)
}

// mentionedAgents returns the candidates a message addresses, in the order
// they are mentioned: by m.mentions, by their user id, or as @name /
// @localpart / @display name in the text (case-insensitive, and only where
// the name ends: @helper does not mention helper2). userID gives an agent's
// Matrix account ("" when it has none right now).
func mentionedAgents(cfg *config.Config, userID func(hooks.AgentName) id.UserID, msg *event.MessageEventContent, candidates []hooks.AgentName) []hooks.AgentName {
	type hit struct {
		name hooks.AgentName
		pos  int
	}
	var hits []hit
	body := strings.ToLower(msg.Body)
	for _, name := range candidates {
		uid := userID(name)
		a := cfg.Agents[string(name)]
		pos := -1
		for _, form := range []string{string(uid), "@" + a.Username, "@" + string(name), "@" + a.DisplayName} {
			form = strings.ToLower(form)
			if form == "" || form == "@" {
				continue
			}
			if i := mentionAt(body, form); i >= 0 && (pos < 0 || i < pos) {
				pos = i
			}
		}
		// A pill (m.mentions) without a text form counts before every
		// text mention.
		pilled := uid != "" && msg.Mentions != nil && slices.Contains(msg.Mentions.UserIDs, uid)
		if pos < 0 && !pilled {
			continue
		}
		hits = append(hits, hit{name, pos})
	}
	slices.SortStableFunc(hits, func(x, y hit) int { return x.pos - y.pos })
	out := make([]hooks.AgentName, len(hits))
	for i, h := range hits {
		out[i] = h.name
	}
	return out
}

// mentionAt returns where form first occurs in body as a whole name: not
// followed by a name character, or followed by "." or ":" that ends the
// name ("thanks @helper.", "@helper: hi"); -1 when it does not.
func mentionAt(body, form string) int {
	for off := 0; ; {
		i := strings.Index(body[off:], form)
		if i < 0 {
			return -1
		}
		i += off
		end := i + len(form)
		switch {
		case end == len(body), !isNameChar(body[end]):
			return i
		case (body[end] == '.' || body[end] == ':') && (end+1 == len(body) || !isNameChar(body[end+1])):
			return i
		}
		off = i + 1
	}
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':'
}

// routeDecision is who answers a message and why.
type routeDecision struct {
	agent  hooks.AgentName
	reason string // mention | single | thread | router | fallback
}

// route picks the agent that answers: an explicit mention; the agent that
// already answers this thread; the only agent in the room; otherwise the
// router's model (and, when it cannot decide, the first agent by name).
//
// w is the world the caller read once for this event: routing and the turn
// it starts see the same agents even when a reload swaps the world meanwhile.
func (b *Bot) route(ctx context.Context, w *world, ev *event.Event, msg *event.MessageEventContent, env hooks.Envelope) (routeDecision, bool) {
	candidates := b.agentsOf(w, ev.RoomID)
	if len(candidates) == 0 {
		return routeDecision{}, false
	}
	if len(env.MentionedAgents) == 0 {
		env.MentionedAgents = w.mentioned(msg, candidates)
	}
	if d, ok := b.preRoute(ctx, env, candidates); ok {
		return d, true
	}
	text := msg.Body
	if env.SourceKind == hooks.SourceMedia {
		caption, atts := matrixio.AttachmentsOf(msg)
		text = routerText(caption, atts)
	}
	if name, ok := b.askRouter(ctx, w, text, candidates); ok {
		return routeDecision{name, "router"}, true
	}
	return routeDecision{candidates[0], "fallback"}, true
}

// preRoute decides the agent without asking the router's model: the first
// mentioned agent, the agent that already answers this thread, or the only
// agent in the room.
func (b *Bot) preRoute(ctx context.Context, env hooks.Envelope, candidates []hooks.AgentName) (routeDecision, bool) {
	if len(env.MentionedAgents) > 0 {
		return routeDecision{env.MentionedAgents[0], "mention"}, true
	}
	if env.ThreadID != "" {
		if s, err := b.history.Session(ctx, agents.NewScopeKey(env.RoomID, env.ResolvedThreadID)); err == nil && s != nil && slices.Contains(candidates, s.Agent) {
			return routeDecision{s.Agent, "thread"}, true
		}
	}
	if len(candidates) == 1 {
		return routeDecision{candidates[0], "single"}, true
	}
	return routeDecision{}, false
}

// askRouter asks the router's model which agent should answer.
func (b *Bot) askRouter(ctx context.Context, w *world, body string, candidates []hooks.AgentName) (hooks.AgentName, bool) {
	model, ok := w.models[w.cfg.Router.Model]
	if !ok || w.specs[w.cfg.Router.Model].Provider == agents.ProviderEcho {
		return "", false
	}
	var list strings.Builder
	for _, name := range candidates {
		a := w.cfg.Agents[string(name)]
		fmt.Fprintf(&list, "- %s: %s\n", name, strings.TrimSpace(cmp.Or(a.Role, a.DisplayName, string(name))))
	}
	req := &agents.Request{Messages: []agents.Message{
		{Role: agents.RoleSystem, Content: "You route a chat message to the agent best suited to answer it. " +
			"Answer with the agent's name only, nothing else. The agents:\n" + list.String()},
		{Role: agents.RoleUser, Content: body},
	}, MaxTokens: 20}
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := agents.Complete(rctx, model, req, nil)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("router model failed; using the fallback agent")
		return "", false
	}
	best, ok := agentNamedIn(c.Text, candidates)
	if !ok {
		// The answer may echo the person's message: its text only at debug.
		zerolog.Ctx(ctx).Warn().Int("answer_bytes", len(c.Text)).Msg("router model named no agent; using the fallback agent")
		zerolog.Ctx(ctx).Debug().Str("answer", runes.Truncate(c.Text, 80)).Msg("the router model's answer")
	}
	return best, ok
}

// agentNamedIn returns the candidate the router model's answer names first
// (case-insensitive; of names starting at the same place, the longest, so
// "helper2" is not read as "helper"); false when it names none.
func agentNamedIn(answer string, candidates []hooks.AgentName) (hooks.AgentName, bool) {
	answer = strings.ToLower(answer)
	best, bestPos := hooks.AgentName(""), -1
	for _, name := range candidates {
		i := strings.Index(answer, strings.ToLower(string(name)))
		if i >= 0 && (bestPos < 0 || i < bestPos || i == bestPos && len(name) > len(best)) {
			best, bestPos = name, i
		}
	}
	return best, bestPos >= 0
}

// handoff posts the router's visible note that an agent takes over.
func (b *Bot) handoff(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName) {
	if !b.routerIn(w, ev.RoomID) {
		return // a room agents joined on invites, without the router
	}
	acct := w.agents[agent]
	a := w.cfg.Agents[string(agent)]
	text := fmt.Sprintf("Handing this to [%s](https://matrix.to/#/%s).", cmp.Or(a.DisplayName, string(agent)), acct.UserID())
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, "handoff"), Notice: true, Mentions: []id.UserID{acct.UserID()}}
	if env.ResolvedThreadID != "" {
		opts.ThreadRoot = env.ResolvedThreadID
	}
	if _, err := b.router.SendText(ctx, ev.RoomID, text, opts); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("failed to post the router's handoff")
	}
}
