package bot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/runes"
	"github.com/hookroom/hookroom/matrixio"
)

// !config: global users show and change an allow-listed set of settings
// of a room's agents from chat (defaults.config_command). A change is a
// proposal first: the router posts it as a diff and applies it only on a
// ✅ reaction of the person who proposed it, within configProposalTTL.
// Applying edits config.yaml's text (config.SetValue: comments and
// formatting kept), checks it (a broken result is never written), writes
// it and reloads, like a save in the operator console.

// configProposalTTL is how long a proposal waits for its ✅.
const configProposalTTL = 5 * time.Minute

// configKeys are the settings of an agent that !config shows and changes.
var configKeys = []string{"model", "instructions", "tools"}

// roomConfigKeys are the settings of the room itself (one of config.yaml's
// rooms) that `!config room KEY VALUE` changes.
var roomConfigKeys = []string{"thread_mode"}

// configRoom is the word of `!config room KEY VALUE` that names the room
// the command is said in instead of an agent.
const configRoom = "room"

const configUsage = "`!config` shows the settings of this room and its agents; `!config AGENT KEY VALUE` proposes a change " +
	"(KEY: model, instructions or tools; tools as a comma-separated list, `none` for no tools); " +
	"`!config room thread_mode thread|room` where the agents reply in this room."

// configShownLimit bounds the characters of instructions shown by !config
// and in a proposal's diff.
const configShownLimit = 600

// configProposal is a change !config proposed, waiting for the ✅ of the
// person who proposed it.
type configProposal struct {
	owner   *Bot // the bot that posted it: another one (a restart) ignores it
	room    id.RoomID
	thread  id.EventID // the command's thread; "" when it was not in one
	by      id.UserID
	agent   hooks.AgentName // "" for a setting of the room
	roomKey string          // the room's key in config.yaml, for a setting of the room
	key     string
	old     any // string or []string: the value in service when proposed
	value   any // string or []string
	expires time.Time
}

// configProposals holds the pending proposals by the event id of the
// message that shows them. They live in memory only: a restart forgets
// them, and a ✅ on one afterwards does nothing.
type configProposals struct {
	// posting is held while a proposal is posted and recorded, so that a
	// ✅ that arrives before the record waits for it.
	posting sync.Mutex
	mu      sync.Mutex
	byEvent map[id.EventID]*configProposal
}

var pendingConfigs = &configProposals{byEvent: make(map[id.EventID]*configProposal)}

// add records p as shown by message ev and forgets the proposals that
// expired by now.
func (s *configProposals) add(ev id.EventID, p *configProposal, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, q := range s.byEvent {
		if now.After(q.expires) {
			delete(s.byEvent, k)
		}
	}
	s.byEvent[ev] = p
}

// configAnswer is what a reaction on a proposal's message does.
type configAnswer int

const (
	configNotProposal configAnswer = iota // not a pending proposal of this bot
	configNotProposer                     // someone else's reaction: ignored
	configExpired                         // the proposer's ✅, too late
	configApply                           // the proposer's ✅ in time
)

// answer looks up the proposal shown by message target for a ✅ of
// sender given at at. The proposer's ✅ takes the proposal (it is
// answered once, applied or expired); anyone else's leaves it waiting.
func (s *configProposals) answer(b *Bot, target id.EventID, sender id.UserID, at time.Time) (*configProposal, configAnswer) {
	s.posting.Lock() // waits for a proposal being posted
	defer s.posting.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.byEvent[target]
	switch {
	case !ok || p.owner != b:
		return nil, configNotProposal
	case sender != p.by:
		return p, configNotProposer
	}
	delete(s.byEvent, target)
	if at.After(p.expires) {
		return p, configExpired
	}
	return p, configApply
}

// isConfirmKey reports whether a reaction key is ✅ (with or without a
// variation selector).
func isConfirmKey(key string) bool {
	return strings.Trim(strings.TrimSpace(key), "\ufe0f\ufe0e") == "✅"
}

// configCommand answers !config in the room of ev: it posts the answer
// itself, so that a proposal's message is recorded before its ✅ can be
// handled.
func (b *Bot) configCommand(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope) {
	reply, p := b.configReply(ctx, w, ev, env)
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, "command"), Notice: true}
	if env.ThreadID != "" {
		opts.ThreadRoot = env.ThreadID
	} else {
		opts.ReplyTo = ev.ID
	}
	if p != nil {
		opts.Mentions = []id.UserID{ev.Sender}
		pendingConfigs.posting.Lock()
		defer pendingConfigs.posting.Unlock()
	}
	msg, err := b.speakerIn(w, ev.RoomID).SendText(ctx, ev.RoomID, reply, opts)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Str("command", "config").Msg("failed to answer a command")
		return
	}
	if p != nil {
		pendingConfigs.add(msg, p, time.Now())
		zerolog.Ctx(ctx).Info().Stringer("by", ev.Sender).Str("setting", strings.Join(p.path(), ".")).
			Msg("configuration change proposed from chat")
	}
}

// configReply is the answer to !config: the settings, a refusal, or a
// proposal to post (then p is set). Values that came from ${VAR}
// substitution, and secrets, are masked in it.
func (b *Bot) configReply(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope) (reply string, p *configProposal) {
	reply, p = b.configAnswerText(w, ev, env)
	return w.cfg.MaskSecrets(reply), p
}

func (b *Bot) configAnswerText(w *world, ev *event.Event, env hooks.Envelope) (reply string, p *configProposal) {
	if !w.cfg.Defaults.ConfigCommand {
		return "`!config` is turned off here (defaults.config_command in config.yaml).", nil
	}
	if !w.isGlobal(ev.Sender) {
		return "Only hookroom's administrators (authorization.global_users) may use `!config`.", nil
	}
	agents := b.agentsOf(w, ev.RoomID)
	agent, key, raw := parseConfigArgs(env.Body)
	if agent == "" {
		return showConfig(w, ev.RoomID, agents), nil
	}
	if agent == configRoom {
		return b.roomConfigAnswer(w, ev, env, key, raw)
	}
	name := hooks.AgentName(agent)
	if !slices.Contains(agents, name) {
		return fmt.Sprintf("There is no agent `%s` in this room; agents here: %s.", agent, agentList(agents)), nil
	}
	a := w.cfg.Agents[agent]
	if a.IsTeam() {
		return fmt.Sprintf("`%s` is a team; change its settings under teams: in config.yaml.", agent), nil
	}
	if key == "" {
		return "Usage: " + configUsage, nil
	}
	if !slices.Contains(configKeys, key) {
		if key == "thread_mode" {
			return "`thread_mode` is not a setting of one agent but of the room: `!config room thread_mode thread|room`. " +
				"`!config` can change of an agent: " + strings.Join(configKeys, ", ") + ".", nil
		}
		return fmt.Sprintf("`!config` cannot change `%s`; it can change: %s.", key, strings.Join(configKeys, ", ")), nil
	}
	old := agentSetting(a, key)
	if raw == "" {
		return fmt.Sprintf("%s's %s is %s.\n\nUsage: %s", agent, key, showValue(old), configUsage), nil
	}
	value, err := parseConfigValue(key, raw)
	if err != nil {
		return fmt.Sprintf("Cannot propose that: %v.", err), nil
	}
	if sameSetting(old, value) {
		return fmt.Sprintf("%s's %s is %s already; nothing to change.", agent, key, showValue(old)), nil
	}
	p = &configProposal{
		owner: b, room: ev.RoomID, thread: env.ThreadID, by: ev.Sender, agent: name, key: key,
		old: old, value: value, expires: time.Now().Add(configProposalTTL),
	}
	// The change must apply to the file as it is now: refused here rather
	// than after the ✅.
	if _, problem := b.configEdit(w, p.path(), value); problem != "" {
		return problem, nil
	}
	return proposalText(p), p
}

// roomConfigAnswer is the answer to `!config room KEY VALUE` in the room
// of ev: a refusal, or a proposal for the room's setting.
func (b *Bot) roomConfigAnswer(w *world, ev *event.Event, env hooks.Envelope, key, raw string) (string, *configProposal) {
	roomKey := w.roomKey(ev.RoomID)
	if roomKey == "" {
		return "This room is not one of config.yaml's rooms, so it has no settings of its own to change; " +
			"defaults.thread_mode applies here.", nil
	}
	if key == "" {
		return "Usage: " + configUsage, nil
	}
	if !slices.Contains(roomConfigKeys, key) {
		return fmt.Sprintf("`!config room` cannot change `%s`; it can change: %s.", key, strings.Join(roomConfigKeys, ", ")), nil
	}
	old := string(w.cfg.Rooms[roomKey].ThreadMode)
	if raw == "" {
		return fmt.Sprintf("This room's %s is %s (in service: %s).\n\nUsage: %s", key, showValue(old),
			showValue(string(w.threadMode(ev.RoomID))), configUsage), nil
	}
	value := strings.ToLower(strings.TrimSpace(raw))
	if value != string(config.ThreadModeThread) && value != string(config.ThreadModeRoom) {
		return fmt.Sprintf("Cannot propose that: thread_mode is `thread` (replies in a thread of the message) or `room` "+
			"(replies in the room's timeline), not `%s`.", strings.ReplaceAll(raw, "`", "'")), nil
	}
	if value == old {
		return fmt.Sprintf("This room's %s is %s already; nothing to change.", key, showValue(old)), nil
	}
	p := &configProposal{
		owner: b, room: ev.RoomID, thread: env.ThreadID, by: ev.Sender, roomKey: roomKey, key: key,
		old: old, value: value, expires: time.Now().Add(configProposalTTL),
	}
	if _, problem := b.configEdit(w, p.path(), value); problem != "" {
		return problem, nil
	}
	return proposalText(p), p
}

// path is the key path in config.yaml of the setting p changes.
func (p *configProposal) path() []string {
	if p.roomKey != "" {
		return []string{"rooms", p.roomKey, p.key}
	}
	return []string{"agents", string(p.agent), p.key}
}

// subject names the setting p changes in a message: "helper's model".
func (p *configProposal) subject() string {
	if p.roomKey != "" {
		return "this room's " + p.key
	}
	return fmt.Sprintf("%s's %s", p.agent, p.key)
}

// current is the value in service of the setting p changes; ok is false
// when its agent or room is gone.
func (p *configProposal) current(w *world) (_ any, ok bool) {
	if p.roomKey != "" {
		r, ok := w.cfg.Rooms[p.roomKey]
		return string(r.ThreadMode), ok
	}
	a, ok := w.cfg.Agents[string(p.agent)]
	if !ok {
		return nil, false
	}
	return agentSetting(a, p.key), true
}

// parseConfigArgs splits "!config AGENT KEY VALUE": the value is the rest
// of the message, its inner spacing and newlines kept (instructions).
func parseConfigArgs(body string) (agent, key, value string) {
	rest := strings.TrimSpace(body)
	_, rest = cutWord(rest) // "!config"
	agent, rest = cutWord(rest)
	key, rest = cutWord(rest)
	return agent, strings.ToLower(key), strings.TrimSpace(rest)
}

// cutWord returns the first word of s and what follows it, leading
// whitespace removed.
func cutWord(s string) (word, rest string) {
	s = strings.TrimLeft(s, " \t\r\n")
	i := strings.IndexAny(s, " \t\r\n")
	if i < 0 {
		return s, ""
	}
	return s[:i], strings.TrimLeft(s[i:], " \t\r\n")
}

// parseConfigValue reads the value typed for key: tools as a
// comma-separated list ("none" for an empty one), model as one word.
func parseConfigValue(key, raw string) (any, error) {
	switch key {
	case "tools":
		if strings.EqualFold(raw, "none") {
			return []string{}, nil
		}
		var tools []string
		for t := range strings.SplitSeq(raw, ",") {
			t = strings.TrimSpace(t)
			if t == "" {
				return nil, errors.New("tools are a comma-separated list of tool names or globs (`current_time, web_*`), or `none`")
			}
			if strings.ContainsAny(t, " \t\r\n") {
				return nil, fmt.Errorf("`%s` is not a tool name (separate tools with commas)", t)
			}
			tools = append(tools, t)
		}
		return tools, nil
	case "model":
		if strings.ContainsAny(raw, " \t\r\n") {
			return nil, errors.New("a model is one name of config.yaml's models")
		}
	}
	return raw, nil
}

// agentSetting is key's value of agent a in service.
func agentSetting(a config.Agent, key string) any {
	switch key {
	case "model":
		return a.Model
	case "instructions":
		return a.Instructions
	}
	return slices.Clone(a.Tools)
}

func sameSetting(a, b any) bool {
	as, aok := a.([]string)
	bs, bok := b.([]string)
	if aok || bok {
		return aok && bok && slices.Equal(as, bs)
	}
	return a == b
}

// showValue shows a setting's value in a message.
func showValue(v any) string {
	switch v := v.(type) {
	case []string:
		if len(v) == 0 {
			return "none"
		}
		return "`" + strings.Join(v, ", ") + "`"
	case string:
		if v == "" {
			return "not set"
		}
		v = runes.Truncate(v, configShownLimit)
		if strings.Contains(v, "\n") {
			return "\n```\n" + strings.ReplaceAll(v, "```", "'''") + "\n```\n"
		}
		return "`" + strings.ReplaceAll(v, "`", "'") + "`"
	}
	return fmt.Sprint(v)
}

func agentList(agents []hooks.AgentName) string {
	if len(agents) == 0 {
		return "none"
	}
	names := make([]string, len(agents))
	for i, a := range agents {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}

// showConfig lists the settings !config changes of the room and the
// agents in it, as in service.
func showConfig(w *world, room id.RoomID, agents []hooks.AgentName) string {
	var s strings.Builder
	if key := w.roomKey(room); key != "" {
		mode := "`" + string(w.threadMode(room)) + "`"
		if w.cfg.Rooms[key].ThreadMode == "" {
			mode += " (defaults.thread_mode)"
		}
		fmt.Fprintf(&s, "This room (rooms.%s): thread_mode %s\n\n", key, mode)
	}
	if len(agents) == 0 {
		s.WriteString("No agents in this room.")
		return s.String()
	}
	s.WriteString("Settings of the agents in this room (as in service):\n")
	for _, name := range agents {
		a := w.cfg.Agents[string(name)]
		if a.IsTeam() {
			fmt.Fprintf(&s, "- **%s**: a team (teams: in config.yaml)\n", name)
			continue
		}
		fmt.Fprintf(&s, "- **%s**: model %s; tools %s; instructions %s\n", name,
			showValue(a.Model), showValue(slices.Clone(a.Tools)), showValue(a.Instructions))
	}
	s.WriteString("\n" + configUsage)
	return s.String()
}

// diffLines writes v as the lines of one side of a diff.
func diffLines(s *strings.Builder, sign string, v any) {
	var text string
	switch v := v.(type) {
	case []string:
		text = "[" + strings.Join(v, ", ") + "]"
	case string:
		text = runes.Truncate(v, configShownLimit)
	}
	for l := range strings.SplitSeq(strings.ReplaceAll(text, "```", "'''"), "\n") {
		s.WriteString(sign + " " + l + "\n")
	}
}

// proposalText is the message that shows proposal p and asks for the ✅.
func proposalText(p *configProposal) string {
	var s strings.Builder
	fmt.Fprintf(&s, "⚙️ **Proposed change to config.yaml** by %s:\n\n```diff\n  %s\n", p.by, strings.Join(p.path(), "."))
	diffLines(&s, "-", p.old)
	diffLines(&s, "+", p.value)
	fmt.Fprintf(&s, "```\n\nReact with ✅ to this message within %s (until %s) to apply it; only %s can. Otherwise nothing changes.",
		configProposalTTL, p.expires.UTC().Format("15:04:05 UTC"), p.by)
	return s.String()
}

// configEdit reads config.yaml and returns it and the text with the
// setting at path set to value, checked like a reload checks the file;
// problem is the refusal to post instead, when the change cannot be made
// or the result is not a valid configuration.
func (b *Bot) configEdit(w *world, path []string, value any) (edit configFileEdit, problem string) {
	key := path[len(path)-1]
	file := w.cfg.Path
	raw, err := os.ReadFile(file)
	if err != nil {
		return configFileEdit{}, "⚠️ config.yaml could not be read; nothing was changed."
	}
	next, err := config.SetValue(raw, path, value)
	if err != nil {
		return configFileEdit{}, fmt.Sprintf("❌ Refused: this change cannot be written to config.yaml (%s); edit the file instead. Nothing was changed.",
			strings.TrimPrefix(err.Error(), "config: "))
	}
	if err := config.Check(next, file, b.opts.ConfigOptions...); err != nil {
		var s strings.Builder
		s.WriteString("❌ Refused: with this change config.yaml would not be valid, so nothing was changed.\n\n```\n")
		for i, line := range errorLines(err, file) {
			if i == summaryProblems {
				break
			}
			line = absPath.ReplaceAllString(strings.Join(strings.Fields(line), " "), "$1")
			s.WriteString(runes.Truncate(line, summaryProblemSize) + "\n")
		}
		s.WriteString("```")
		if key == "model" {
			s.WriteString("\nConfigured models: " + strings.Join(slices.Sorted(maps.Keys(w.cfg.Models)), ", ") + ".")
		}
		return configFileEdit{}, s.String()
	}
	return configFileEdit{path: file, raw: raw, next: next}, ""
}

// configFileEdit is config.yaml as read (raw) and as it is to be written.
type configFileEdit struct {
	path      string
	raw, next []byte
}

// answerConfigReaction handles a reaction on a !config proposal's
// message: the proposer's ✅ applies it (or says it expired) and is
// reported as handled; anyone else's reaction is left to the other
// reaction handlers.
func (b *Bot) answerConfigReaction(ctx context.Context, w *world, ev *event.Event, target id.EventID, key string) bool {
	if !isConfirmKey(key) {
		return false
	}
	p, verdict := pendingConfigs.answer(b, target, ev.Sender, answeredAt(ev))
	log := zerolog.Ctx(ctx)
	var reply string
	switch verdict {
	case configNotProposal:
		return false
	case configNotProposer:
		log.Info().Stringer("user", ev.Sender).Msg("ignoring a ✅ on a !config proposal from someone other than its proposer")
		return false
	case configExpired:
		reply = fmt.Sprintf("⌛ This proposal expired at %s; nothing was changed. Send `!config` again to propose it anew.",
			p.expires.UTC().Format("15:04:05 UTC"))
	case configApply:
		reply = b.applyConfig(ctx, p)
	}
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, "config"), Notice: true, ReplyTo: target, ThreadRoot: p.thread}
	now := b.w()
	if _, err := b.speakerIn(now, p.room).SendText(ctx, p.room, now.cfg.MaskSecrets(reply), opts); err != nil {
		log.Warn().Err(err).Str("command", "config").Msg("failed to answer a command")
	}
	return true
}

// applyConfig applies proposal p, confirmed: config.yaml is edited as
// text, checked, written (refused when it changed meanwhile) and reloaded;
// when the reload fails, the previous file is put back, as the console
// does. It returns the outcome for the room.
func (b *Bot) applyConfig(ctx context.Context, p *configProposal) string {
	log := zerolog.Ctx(ctx)
	w := b.w()
	if !w.cfg.Defaults.ConfigCommand || !w.isGlobal(p.by) {
		return "❌ Not applied: `!config` is now turned off, or " + string(p.by) + " is no longer an administrator."
	}
	now, ok := p.current(w)
	if !ok {
		return fmt.Sprintf("❌ Not applied: %s is no longer in config.yaml.", strings.Join(p.path()[:2], "."))
	}
	if !sameSetting(now, p.old) {
		return fmt.Sprintf("❌ Not applied: %s changed since the proposal (it is %s now). Nothing was written; propose again.",
			p.subject(), showValue(now))
	}
	edit, problem := b.configEdit(w, p.path(), p.value)
	if problem != "" {
		return problem
	}
	if err := config.WriteFile(edit.path, edit.next, config.Hash(edit.raw)); err != nil {
		if errors.Is(err, config.ErrStale) {
			return "❌ Not applied: config.yaml changed while the change was being written. Nothing was written; propose again."
		}
		log.Warn().Err(err).Msg("failed to write a configuration change from chat")
		return "⚠️ Not applied: config.yaml could not be written; the log has the details."
	}
	ev := log.Info().Str("path", edit.path).Stringer("by", p.by).Str("setting", strings.Join(p.path(), "."))
	if p.key == "instructions" {
		ev = ev.Int("old_chars", len(p.old.(string))).Int("new_chars", len(p.value.(string)))
	} else {
		ev = ev.Str("old", fmt.Sprint(p.old)).Str("new", fmt.Sprint(p.value))
	}
	ev.Msg("configuration changed from chat")
	rep, err := b.Reload(context.WithoutCancel(ctx), false)
	if err != nil {
		logErrors(log, zerolog.WarnLevel, err, "configuration not reloaded; the running one stays in service")
		// What the file check cannot see (a tool or plugin that does not
		// load) failed the reload: the previous file goes back.
		if werr := config.WriteFile(edit.path, edit.raw, config.Hash(edit.next)); werr != nil {
			log.Error().Err(werr).Msg("failed to put the previous config.yaml back after a failed reload")
			return "⚠️ The change was written but did not load, and config.yaml could not be put back: it is not the configuration in service. The log has the details."
		}
		return "❌ Not applied: the change did not load, so config.yaml was put back as it was.\n\n" + reloadFailureSummary(err)
	}
	return fmt.Sprintf("✅ Applied: %s is now %s (confirmed by %s). Reloaded in %s: %s.",
		p.subject(), showValue(p.value), p.by, logDuration(rep.Took), rep.Summary())
}
