package bot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/policy"
)

// Who may talk to which agent, and how fast (package policy). The room
// rules of config.yaml (room_permissions, default_room_access, the
// inviter of a room joined on an invite: Bot.authorized) say who may talk
// in a room at all; the policy adds global user patterns, bridge aliases,
// each agent's reply_to, DM policies with pairing, and rate limits. The
// world carries the policy built from its configuration (buildPolicy);
// the rate limits outlive reloads that leave rate_limits unchanged.

// policyOptions converts config.yaml's authorization into the policy's
// options.
func policyOptions(a config.Authorization) policy.Options {
	o := policy.Options{
		DM:      policy.DMPolicy(a.DM),
		Aliases: a.Aliases,
		Pairing: policy.PairingOptions{CodeTTL: a.Pairing.CodeTTL.Std(), MaxPendingCodes: a.Pairing.MaxPendingCodes},
	}
	for _, u := range a.GlobalUsers {
		o.GlobalUsers = append(o.GlobalUsers, string(u))
	}
	if len(a.Agents) > 0 {
		o.Agents = make(map[hooks.AgentName]policy.AgentOptions, len(a.Agents))
		for name, ag := range a.Agents {
			o.Agents[hooks.AgentName(name)] = policy.AgentOptions{ReplyTo: ag.ReplyTo, DM: policy.DMPolicy(ag.DM)}
		}
	}
	return o
}

// rateLimits converts config.yaml's rate_limits into the policy's.
func rateLimits(r config.RateLimits) policy.RateLimits {
	rate := func(r config.Rate) policy.Rate { return policy.Rate{PerMinute: r.PerMinute, Burst: r.Burst} }
	o := policy.RateLimits{PerPerson: rate(r.PerPerson), PerRoom: rate(r.PerRoom), MaxBuckets: r.MaxBuckets}
	if len(r.Agents) > 0 {
		o.Agents = make(map[hooks.AgentName]policy.AgentRateLimits, len(r.Agents))
		for name, a := range r.Agents {
			o.Agents[hooks.AgentName(name)] = policy.AgentRateLimits{PerPerson: rate(a.PerPerson), PerRoom: rate(a.PerRoom)}
		}
	}
	return o
}

// checkPolicy validates cfg's authorization and rate_limits settings the
// way the policy reads them, each problem with its file and line. New,
// every reload and the console's config editor run it (config.WithValidator).
func checkPolicy(cfg *config.Config) config.ErrorList {
	var errs config.ErrorList
	add := func(section string, err error) {
		var fes policy.Errors
		if !errors.As(err, &fes) {
			if err != nil {
				errs = append(errs, cfg.Errorf(section, "%v", err))
			}
			return
		}
		for _, fe := range fes {
			errs = append(errs, cfg.Errorf(section+"."+fe.Path, "%s", fe.Msg))
		}
	}
	add("authorization", policyOptions(cfg.Authorization).Validate())
	add("rate_limits", rateLimits(cfg.RateLimits).Validate())
	for _, name := range slices.Sorted(maps.Keys(cfg.Authorization.Agents)) {
		if _, ok := cfg.Agents[name]; !ok {
			errs = append(errs, cfg.Errorf(config.JoinKey("authorization.agents", name), "unknown agent %q (not a key of agents)", name))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.RateLimits.Agents)) {
		if _, ok := cfg.Agents[name]; !ok {
			errs = append(errs, cfg.Errorf(config.JoinKey("rate_limits.agents", name), "unknown agent %q (not a key of agents)", name))
		}
	}
	return errs
}

// buildPolicy compiles w's authorization, once w's rooms are known (room
// references of reply_to resolve against them), and keeps prev's rate
// limits when rate_limits did not change (new limits start full).
func (b *Bot) buildPolicy(ctx context.Context, w, prev *world) error {
	p, err := policy.New(policyOptions(w.cfg.Authorization), func(ref policy.RoomRef) id.RoomID {
		if rid := w.roomRefID(string(ref)); rid != "" {
			return rid
		}
		if strings.HasPrefix(string(ref), "#") {
			rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if resp, err := b.router.ResolveAlias(rctx, id.RoomAlias(ref)); err == nil {
				return resp
			}
		}
		return ""
	})
	if err != nil {
		return fmt.Errorf("failed to build the authorization policy: %w", err)
	}
	for _, entry := range p.Unresolved() {
		zerolog.Ctx(ctx).Warn().Str("entry", entry).Msg("authorization entry names an unknown room; it matches nobody")
	}
	w.policy = p
	if prev != nil && prev.limits != nil && reflect.DeepEqual(prev.cfg.RateLimits, w.cfg.RateLimits) {
		w.limits = prev.limits
		return nil
	}
	if w.limits, err = policy.NewLimits(rateLimits(w.cfg.RateLimits)); err != nil {
		return fmt.Errorf("failed to build the rate limits: %w", err)
	}
	return nil
}

// decide asks w's policy whether agent answers ev's sender in ev's room.
// A nil policy (a world before Run built it) admits by the room rules.
func (b *Bot) decide(ctx context.Context, w *world, ev *event.Event, agent hooks.AgentName) policy.Decision {
	req := policy.Request{
		Sender: ev.Sender, Agent: agent, Room: ev.RoomID,
		RoomRules: func(person id.UserID) bool { return b.roomRules(w, person, ev.RoomID) },
		Members: policy.MembershipFunc(func(room id.RoomID, user id.UserID) bool {
			mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			m, err := b.router.Membership(mctx, room, user)
			if err != nil {
				zerolog.Ctx(ctx).Warn().Err(err).Stringer("room_id", room).Msg("failed to read a room membership for authorization; treating it as not joined")
			}
			return m == event.MembershipJoin
		}),
		Pairings: b.pairings,
	}
	if acct := w.agents[agent]; acct != nil {
		req.DM = b.invited.directWith(ev.RoomID, acct.UserID())
	}
	return w.policy.Decide(req)
}

// admit runs the policy on a routed message: it reports whether agent
// answers it. A person an agent's DM policy pairing does not know yet gets
// a one-time code; a message over a rate limit gets a notice (once per
// burst). Other refusals are silent, as for anyone the room rules refuse.
func (b *Bot) admit(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName) bool {
	log := zerolog.Ctx(ctx)
	d := b.decide(ctx, w, ev, agent)
	b.ops.metrics.Authorization(d.Allow, string(d.Reason))
	log.Debug().Object("authorization", d).Msg("authorization decided")
	if !d.Allow {
		if d.Reason == policy.ReasonPairingRequired {
			b.offerPairing(ctx, w, ev, env, agent, d.Person)
			return false
		}
		log.Info().Str("agent", string(agent)).Str("reason", string(d.Reason)).Str("rule", d.Rule).Msg("not answering: the authorization policy refuses this person")
		return false
	}
	v := w.limits.Allow(time.Now(), agent, d.Person, ev.RoomID)
	if v.OK {
		return true
	}
	b.ops.metrics.RateLimited(string(v.Scope))
	log.Info().Str("agent", string(agent)).Str("scope", string(v.Scope)).Dur("retry_after", v.RetryAfter).Msg("not answering: rate limit")
	if v.First {
		b.notice(ctx, w, ev, env, agent, "⏳ "+v.Notice(), "rate-limit")
	}
	return false
}

// offerPairing gives person a pairing code for agent in the DM (once per
// code) and tells them how to get it confirmed.
func (b *Bot) offerPairing(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName, person id.UserID) {
	log := zerolog.Ctx(ctx)
	code, fresh, err := b.pairings.Issue(ctx, time.Now(), policy.CodeRequest{Agent: agent, Person: person, Room: ev.RoomID}, w.policy.Pairing())
	switch {
	case errors.Is(err, policy.ErrTooManyCodes):
		log.Warn().Str("agent", string(agent)).Msg("no pairing code given: too many codes wait for an administrator")
		return
	case err != nil:
		log.Error().Err(err).Str("agent", string(agent)).Msg("failed to issue a pairing code")
		return
	case !fresh:
		return // told already
	}
	log.Info().Str("agent", string(agent)).Stringer("person", person).Msg("pairing code given")
	b.notice(ctx, w, ev, env, agent, fmt.Sprintf(
		"🔐 %s does not know you yet. Ask an administrator of this hookroom to send `!pair %s` in a room with %s; the code is valid until %s.",
		w.displayName(agent), code.Code, w.displayName(agent), code.ExpiresAt.UTC().Format("15:04 UTC")), "pairing")
}

// notice posts a short notice of agent in ev's thread.
func (b *Bot) notice(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName, text, stage string) {
	acct := w.agents[agent]
	if acct == nil {
		acct = b.router
	}
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, stage), Notice: true}
	if env.ResolvedThreadID != "" {
		opts.ThreadRoot = env.ResolvedThreadID
	} else {
		opts.ReplyTo = ev.ID
	}
	if _, err := acct.SendText(ctx, ev.RoomID, text, opts); err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("notice", stage).Msg("failed to post a notice")
	}
}

// pairingCommand answers !pair CODE, !pairings and !unpair AGENT @user
// (administrators only; runCommand checked).
func (b *Bot) pairingCommand(ctx context.Context, w *world, ev *event.Event, cmd command) string {
	log := zerolog.Ctx(ctx)
	now := time.Now()
	switch cmd.name {
	case "pair":
		if len(cmd.args) != 1 {
			return "Usage: `!pair CODE` with the code the person was given."
		}
		p, err := b.pairings.Confirm(ctx, now, cmd.args[0], ev.Sender)
		switch {
		case errors.Is(err, policy.ErrUnknownCode):
			code, _ := policy.NormalizeCode(cmd.args[0])
			return "No pairing code `" + code + "` is waiting (it was used already, or mistyped)."
		case errors.Is(err, policy.ErrCodeExpired):
			return "That pairing code expired; the person gets a new one when they write to the agent again."
		case err != nil:
			log.Error().Err(err).Msg("failed to confirm a pairing code")
			return "⚠️ The pairing could not be recorded; try again."
		}
		log.Info().Str("agent", string(p.Agent)).Stringer("person", p.Person).Stringer("by", ev.Sender).Msg("person paired with an agent")
		if p.Room != "" {
			if acct := w.agents[p.Agent]; acct != nil {
				opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, "paired"), Notice: true}
				if _, err := acct.SendText(ctx, p.Room, fmt.Sprintf("✅ %s paired you with %s: write again and it answers.", ev.Sender, w.displayName(p.Agent)), opts); err != nil {
					log.Warn().Err(err).Msg("failed to tell a person they were paired")
				}
			}
		}
		return fmt.Sprintf("Paired %s with %s.", p.Person, w.displayName(p.Agent))
	case "unpair":
		if len(cmd.args) != 2 {
			return "Usage: `!unpair AGENT @user:server`."
		}
		agent, user := hooks.AgentName(cmd.args[0]), id.UserID(cmd.args[1])
		ok, err := b.pairings.Unpair(ctx, agent, user)
		if err != nil {
			log.Error().Err(err).Msg("failed to remove a pairing")
			return "⚠️ The pairing could not be removed; try again."
		}
		if !ok {
			return fmt.Sprintf("%s is not paired with %s.", user, agent)
		}
		log.Info().Str("agent", string(agent)).Stringer("person", user).Stringer("by", ev.Sender).Msg("pairing removed")
		return fmt.Sprintf("%s is no longer paired with %s.", user, agent)
	}
	var s strings.Builder
	for _, name := range w.cfg.AgentNames() {
		list, err := b.pairings.Pairings(ctx, hooks.AgentName(name))
		if err != nil {
			log.Error().Err(err).Msg("failed to list pairings")
			return "⚠️ The pairings could not be read; try again."
		}
		for _, p := range list {
			fmt.Fprintf(&s, "- %s ↔ %s (paired by %s, %s)\n", w.displayName(p.Agent), p.Person, p.PairedBy, p.PairedAt.UTC().Format("2006-01-02"))
		}
	}
	codes, err := b.pairings.PendingCodes(ctx, now)
	if err != nil {
		log.Error().Err(err).Msg("failed to list pairing codes")
		return "⚠️ The pairing codes could not be read; try again."
	}
	for _, c := range codes {
		fmt.Fprintf(&s, "- waiting: `%s` for %s ↔ %s (until %s)\n", c.Code, w.displayName(c.Agent), c.Person, c.ExpiresAt.UTC().Format("15:04 UTC"))
	}
	if s.Len() == 0 {
		return "No pairings, and no pairing codes waiting."
	}
	return s.String()
}
