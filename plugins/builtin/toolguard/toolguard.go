package toolguard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/plugins"
)

// Name is the plugin's registered name.
const Name = "tool_guard"

// HookName is the name of the guard's tool:before_call hook.
const HookName = "block_tools"

// Priority is the guard hook's default priority: early among the gates.
const Priority = 10

func init() {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name:        Name,
		Description: "Declines tool calls that match config-driven deny rules, with a reason",
		New:         New,
	})
}

type settings struct {
	BlockedTools []string          `json:"blocked_tools"`
	Rules        []json.RawMessage `json:"rules"`
	Reason       string            `json:"reason"`
	FailClosed   bool              `json:"fail_closed"`
}

type ruleSettings struct {
	Tool       string                     `json:"tool"`
	Agents     []string                   `json:"agents"`
	Rooms      []string                   `json:"rooms"`
	Requesters []string                   `json:"requesters"`
	Arguments  map[string]json.RawMessage `json:"arguments"`
	Reason     string                     `json:"reason"`
}

type matcherSettings struct {
	Equals     json.RawMessage `json:"equals"`
	Contains   *string         `json:"contains"`
	Prefix     *string         `json:"prefix"`
	Suffix     *string         `json:"suffix"`
	Glob       *string         `json:"glob"`
	Regex      *string         `json:"regex"`
	Exists     *bool           `json:"exists"`
	IgnoreCase bool            `json:"ignore_case"`
}

// Guard is a loaded tool guard: its rules in order.
type Guard struct {
	rules      []*rule
	failClosed bool
}

var _ plugins.Instance = (*Guard)(nil)

type rule struct {
	index      int // position in rules (blocked_tools entries: -1-i)
	tool       string
	agents     []hooks.AgentName
	rooms      []id.RoomID
	requesters []id.UserID
	args       []*argMatcher
	reason     string
}

type argMatcher struct {
	key        string   // as written
	path       []string // nil for "*"
	equals     any      // decoded JSON, nil when unset
	hasEquals  bool
	contains   *string
	prefix     *string
	suffix     *string
	glob       *string
	re         *regexp.Regexp
	exists     *bool
	ignoreCase bool
}

// New builds a guard from env's settings; invalid rules are
// *plugins.SettingsError values naming the rule.
func New(_ context.Context, env plugins.Env) (plugins.Instance, error) {
	return Parse(env.Settings)
}

// Parse builds a guard from settings.
func Parse(s hooks.Settings) (*Guard, error) {
	var cfg settings
	if err := plugins.DecodeSettings(s, &cfg); err != nil {
		return nil, err
	}
	g := &Guard{failClosed: cfg.FailClosed}
	defReason := cfg.Reason
	for i, tool := range cfg.BlockedTools {
		p := plugins.JoinIndex("blocked_tools", i)
		if err := checkGlob(tool); err != nil {
			return nil, plugins.SettingsErrorf(p, "%v", err)
		}
		g.rules = append(g.rules, &rule{index: -1 - i, tool: tool, reason: defReason})
	}
	for i, raw := range cfg.Rules {
		r, err := parseRule(i, raw, defReason)
		if err != nil {
			return nil, err
		}
		g.rules = append(g.rules, r)
	}
	return g, nil
}

func checkGlob(p string) error {
	if strings.TrimSpace(p) == "" {
		return errors.New("must not be empty")
	}
	if _, err := path.Match(p, ""); err != nil {
		return fmt.Errorf("invalid glob %q: %w", p, err)
	}
	return nil
}

func parseRule(i int, raw json.RawMessage, defReason string) (*rule, error) {
	base := plugins.JoinIndex("rules", i)
	var rs ruleSettings
	if bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		if err := plugins.DecodeStrict(raw, base, &rs); err != nil {
			return nil, err
		}
	} else {
		return nil, plugins.SettingsErrorf(base, "a rule is a mapping (tool, agents, rooms, requesters, arguments, reason)")
	}
	r := &rule{index: i, tool: rs.Tool, reason: cmpOr(rs.Reason, defReason)}
	if r.tool == "" {
		r.tool = "*"
		if len(rs.Agents)+len(rs.Rooms)+len(rs.Requesters)+len(rs.Arguments) == 0 {
			return nil, plugins.SettingsErrorf(base, "rule matches every tool call: set tool, agents, rooms, requesters or arguments")
		}
	}
	if err := checkGlob(r.tool); err != nil {
		return nil, plugins.SettingsErrorf(plugins.JoinKey(base, "tool"), "%v", err)
	}
	for j, a := range rs.Agents {
		if strings.TrimSpace(a) == "" {
			return nil, plugins.SettingsErrorf(plugins.JoinIndex(plugins.JoinKey(base, "agents"), j), "must not be empty")
		}
		r.agents = append(r.agents, hooks.AgentName(a))
	}
	for j, room := range rs.Rooms {
		if !strings.HasPrefix(room, "!") || !strings.Contains(room, ":") {
			return nil, plugins.SettingsErrorf(plugins.JoinIndex(plugins.JoinKey(base, "rooms"), j),
				"%q is not a room id (want !id:server; aliases are not resolved)", room)
		}
		r.rooms = append(r.rooms, id.RoomID(room))
	}
	for j, u := range rs.Requesters {
		if _, _, err := id.UserID(u).Parse(); err != nil {
			return nil, plugins.SettingsErrorf(plugins.JoinIndex(plugins.JoinKey(base, "requesters"), j), "%q is not a user id (want @name:server)", u)
		}
		r.requesters = append(r.requesters, id.UserID(u))
	}
	keys := make([]string, 0, len(rs.Arguments))
	for k := range rs.Arguments {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		m, err := parseMatcher(plugins.JoinKey(plugins.JoinKey(base, "arguments"), k), k, rs.Arguments[k])
		if err != nil {
			return nil, err
		}
		r.args = append(r.args, m)
	}
	return r, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func parseMatcher(p, key string, raw json.RawMessage) (*argMatcher, error) {
	m := &argMatcher{key: key}
	switch {
	case key == "":
		return nil, plugins.SettingsErrorf(p, "argument name must not be empty")
	case key == "*":
	default:
		m.path = strings.Split(key, ".")
		if slices.Contains(m.path, "") {
			return nil, plugins.SettingsErrorf(p, "invalid argument path %q", key)
		}
	}
	trimmed := bytes.TrimSpace(raw)
	if !bytes.HasPrefix(trimmed, []byte("{")) {
		// Scalar shorthand: equals.
		if err := json.Unmarshal(trimmed, &m.equals); err != nil {
			return nil, plugins.SettingsErrorf(p, "%v", err)
		}
		if m.equals == nil {
			return nil, plugins.SettingsErrorf(p, "want a condition such as {contains: text}, or a value to compare with")
		}
		m.hasEquals = true
		return m, nil
	}
	var ms matcherSettings
	if err := plugins.DecodeStrict(raw, p, &ms); err != nil {
		return nil, err
	}
	m.contains, m.prefix, m.suffix, m.exists, m.ignoreCase = ms.Contains, ms.Prefix, ms.Suffix, ms.Exists, ms.IgnoreCase
	if len(ms.Equals) > 0 {
		if err := json.Unmarshal(ms.Equals, &m.equals); err != nil {
			return nil, plugins.SettingsErrorf(plugins.JoinKey(p, "equals"), "%v", err)
		}
		m.hasEquals = true
	}
	if ms.Glob != nil {
		if _, err := path.Match(*ms.Glob, ""); err != nil {
			return nil, plugins.SettingsErrorf(plugins.JoinKey(p, "glob"), "invalid glob %q: %v", *ms.Glob, err)
		}
		m.glob = ms.Glob
	}
	if ms.Regex != nil {
		re, err := regexp.Compile(*ms.Regex)
		if err != nil {
			return nil, plugins.SettingsErrorf(plugins.JoinKey(p, "regex"), "invalid regular expression: %v", err)
		}
		m.re = re
	}
	if m.exists != nil && key == "*" {
		return nil, plugins.SettingsErrorf(plugins.JoinKey(p, "exists"), `does not apply to "*"`)
	}
	if !m.hasEquals && m.contains == nil && m.prefix == nil && m.suffix == nil && m.glob == nil && m.re == nil && m.exists == nil {
		return nil, plugins.SettingsErrorf(p, "condition has no test: use equals, contains, prefix, suffix, glob, regex or exists")
	}
	return m, nil
}

// Hooks returns the guard's gate hook. It only matches the call against
// the rules in memory, never blocks, and so runs Inline (on the emitter's
// goroutine).
func (g *Guard) Hooks() []hooks.Hook {
	opts := []hooks.Option{hooks.Priority(Priority), hooks.Inline()}
	if g.failClosed {
		opts = append(opts, hooks.WithFailurePolicy(hooks.FailClosed))
	}
	return []hooks.Hook{hooks.Handle(hooks.ToolBeforeCall, HookName, g.check, opts...)}
}

func (g *Guard) check(_ context.Context, c *hooks.ToolBeforeCallContext) error {
	if r := g.Match(&c.ToolCall); r != "" {
		c.Decline(r)
	}
	return nil
}

// Match returns the reason of the first rule that matches call, or "".
func (g *Guard) Match(call *hooks.ToolCall) string {
	var args any
	parsed := false
	for _, r := range g.rules {
		if ok, _ := path.Match(r.tool, call.Tool); !ok {
			continue
		}
		if len(r.agents) > 0 && !slices.Contains(r.agents, call.Agent) ||
			len(r.rooms) > 0 && !slices.Contains(r.rooms, call.RoomID) ||
			len(r.requesters) > 0 && !slices.Contains(r.requesters, call.RequesterID) {
			continue
		}
		if len(r.args) > 0 {
			if !parsed {
				parsed = true
				if json.Unmarshal(call.Arguments, &args) != nil {
					args = nil
				}
			}
			obj, ok := args.(map[string]any)
			if !ok || !matchAll(r.args, obj) {
				continue
			}
		}
		return r.declineReason(call.Tool)
	}
	return ""
}

func (r *rule) declineReason(tool string) string {
	if r.reason != "" {
		return r.reason
	}
	if r.index < 0 {
		return fmt.Sprintf("The tool %q is blocked by this server's tool guard.", tool)
	}
	return fmt.Sprintf("This call of the tool %q is blocked by this server's tool guard (rule %d).", tool, r.index)
}

func matchAll(ms []*argMatcher, args map[string]any) bool {
	for _, m := range ms {
		if !m.match(args) {
			return false
		}
	}
	return true
}

func (m *argMatcher) match(args map[string]any) bool {
	if m.path == nil {
		found := false
		walkLeaves(args, func(v any) bool {
			found = m.test(v)
			return !found
		})
		return found
	}
	var v any = args
	for _, seg := range m.path {
		obj, ok := v.(map[string]any)
		if !ok {
			return m.exists != nil && !*m.exists
		}
		if v, ok = obj[seg]; !ok {
			return m.exists != nil && !*m.exists
		}
	}
	if m.exists != nil && !*m.exists {
		return false
	}
	if list, ok := v.([]any); ok && !m.onlyExists() {
		for _, e := range list {
			if m.test(e) {
				return true
			}
		}
		return m.test(v)
	}
	return m.test(v)
}

func (m *argMatcher) onlyExists() bool {
	return !m.hasEquals && m.contains == nil && m.prefix == nil && m.suffix == nil && m.glob == nil && m.re == nil
}

// walkLeaves calls fn for every scalar below v until fn returns false.
func walkLeaves(v any, fn func(any) bool) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if !walkLeaves(e, fn) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !walkLeaves(e, fn) {
				return false
			}
		}
		return true
	default:
		return fn(v)
	}
}

// test applies every test of m to one value.
func (m *argMatcher) test(v any) bool {
	text := textOf(v)
	fold := func(s string) string {
		if m.ignoreCase {
			return strings.ToLower(s)
		}
		return s
	}
	if m.hasEquals {
		if s, ok := m.equals.(string); ok && m.ignoreCase {
			vs, isStr := v.(string)
			if !isStr || !strings.EqualFold(vs, s) {
				return false
			}
		} else if !equalJSON(v, m.equals) {
			return false
		}
	}
	if m.contains != nil && !strings.Contains(fold(text), fold(*m.contains)) {
		return false
	}
	if m.prefix != nil && !strings.HasPrefix(fold(text), fold(*m.prefix)) {
		return false
	}
	if m.suffix != nil && !strings.HasSuffix(fold(text), fold(*m.suffix)) {
		return false
	}
	if m.glob != nil {
		if ok, _ := path.Match(fold(*m.glob), fold(text)); !ok {
			return false
		}
	}
	if m.re != nil && !m.re.MatchString(text) {
		return false
	}
	return true
}

func textOf(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
