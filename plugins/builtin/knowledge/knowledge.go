package knowledge

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/hooks"
	kb "github.com/hookroom/hookroom/knowledge"
	"github.com/hookroom/hookroom/memory"
	"github.com/hookroom/hookroom/plugins"
)

// Name is the plugin's registered name.
const Name = "knowledge"

// HookPassages is the name of the message:enrich hook.
const HookPassages = "passages"

// CommandName is the chat command the plugin answers.
const CommandName = "knowledge"

func init() {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name:        Name,
		Description: "Knowledge bases: folders of Markdown, text and PDF, indexed and watched; the search_knowledge tool and passages with file:line citations",
		New:         New,
	})
}

type settings struct {
	Bases        map[string]baseSettings           `json:"bases"`
	MaxFileBytes int64                             `json:"max_file_bytes"`
	MaxPDFBytes  int64                             `json:"max_pdf_bytes"`
	DebounceMS   int                               `json:"debounce_ms"`
	Embeddings   *embeddingsSettings               `json:"embeddings"`
	Agents       map[hooks.AgentName]agentSettings `json:"agents"`
}

type baseSettings struct {
	Paths     []string `json:"paths"`
	Include   []string `json:"include"`
	Exclude   []string `json:"exclude"`
	ChunkSize int      `json:"chunk_size"`
}

type agentSettings struct {
	Bases      []string `json:"bases"`
	AutoEnrich bool     `json:"auto_enrich"`
	TopK       int      `json:"top_k"`
}

type embeddingsSettings struct {
	BaseURL   string `json:"base_url"`
	Model     string `json:"model"`
	APIKey    string `json:"api_key"`
	TimeoutMS int    `json:"timeout_ms"`
}

// Plugin is a loaded knowledge plugin.
type Plugin struct {
	env    plugins.Env
	index  *kb.Index // with the embedder, if any
	text   *kb.Index // full text only: for encrypted rooms
	agents map[hooks.AgentName]kb.AgentOptions
	tools  []hooks.AgentName // with bases, sorted
	enrich []hooks.AgentName // with auto_enrich, sorted

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ plugins.Instance        = (*Plugin)(nil)
	_ plugins.ToolProvider    = (*Plugin)(nil)
	_ plugins.CommandProvider = (*Plugin)(nil)
)

// New builds the plugin from env's settings: it opens the index on
// hookroom's database, creates or migrates its tables, removes the bases
// no longer configured, and starts the watcher, which indexes every base
// in the background and then follows changes until Close.
func New(ctx context.Context, env plugins.Env) (plugins.Instance, error) {
	s, opts, err := decode(env)
	if err != nil {
		return nil, err
	}
	p := &Plugin{env: env, agents: map[hooks.AgentName]kb.AgentOptions{}}
	for name, a := range s.Agents {
		at := plugins.JoinKey("agents", string(name))
		if strings.TrimSpace(string(name)) == "" {
			return nil, plugins.SettingsErrorf(at, "an agent name is empty")
		}
		ao := kb.AgentOptions{Bases: a.Bases, AutoEnrich: a.AutoEnrich, TopK: a.TopK}
		if err := opts.ValidateAgent(ao); err != nil {
			return nil, settingsError(at, err)
		}
		p.agents[name] = ao
		if len(ao.Bases) > 0 {
			p.tools = append(p.tools, name)
		}
		if ao.AutoEnrich {
			p.enrich = append(p.enrich, name)
		}
	}
	slices.Sort(p.tools)
	slices.Sort(p.enrich)
	embedder, err := newEmbedder(s.Embeddings)
	if err != nil {
		return nil, err
	}
	if env.DB == nil {
		if env.Inspect {
			return p, nil // only looked at: hooks, tools and commands are declared, never run
		}
		return nil, errors.New("knowledge needs hookroom's database, and this host offers none to plugins")
	}
	if embedder != nil {
		p.index = kb.New(env.DB, opts, embedder)
		p.text = kb.New(env.DB, opts, nil)
	} else {
		p.index = kb.New(env.DB, opts, nil)
		p.text = p.index
	}
	if env.Inspect {
		return p, nil
	}
	if err := p.index.Upgrade(ctx); err != nil {
		return nil, err
	}
	if _, err := p.index.Prune(ctx); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if env.Logger != nil {
		wctx = env.Logger.WithContext(wctx)
	}
	p.cancel = cancel
	w := kb.NewWatcher(p.index)
	p.wg.Go(func() {
		if err := w.Run(wctx); err != nil {
			zerolog.Ctx(wctx).Error().Err(err).Msg("knowledge: cannot watch the folders; bases are indexed only at load and by !knowledge reindex")
			if _, err := p.index.ReindexAll(wctx, false); err != nil && wctx.Err() == nil {
				zerolog.Ctx(wctx).Error().Err(err).Msg("failed to re-index a knowledge base")
			}
		}
	})
	return p, nil
}

// decode reads env's settings and returns them with the index options
// they describe (folders resolved against config.yaml's folder).
func decode(env plugins.Env) (settings, kb.Options, error) {
	var s settings
	if err := plugins.DecodeSettings(env.Settings, &s); err != nil {
		return s, kb.Options{}, err
	}
	if s.DebounceMS < 0 {
		return s, kb.Options{}, plugins.SettingsErrorf("debounce_ms", "must not be negative")
	}
	opts := kb.Options{
		Bases: map[string]kb.BaseOptions{}, MaxFileBytes: s.MaxFileBytes, MaxPDFBytes: s.MaxPDFBytes,
		Debounce: time.Duration(s.DebounceMS) * time.Millisecond,
	}
	for name, b := range s.Bases {
		paths := make([]string, len(b.Paths))
		for i, p := range b.Paths {
			if p != "" {
				p = env.ResolvePath(p)
			}
			paths[i] = p
		}
		opts.Bases[name] = kb.BaseOptions{Paths: paths, Include: b.Include, Exclude: b.Exclude, ChunkSize: b.ChunkSize}
	}
	if err := opts.Validate(); err != nil {
		return s, kb.Options{}, settingsError("", err)
	}
	return s, opts, nil
}

// OpenIndex returns the index of the bases env's settings describe, on
// env.DB, with the embeddings client when they configure one, its tables
// created or migrated. It starts no watcher and removes no base: hookroom
// knowledge reindex and status call it, next to a running server whose
// plugin may be indexing the same bases (writes are transactions, so
// either one's work stands).
func OpenIndex(ctx context.Context, env plugins.Env) (*kb.Index, error) {
	s, opts, err := decode(env)
	if err != nil {
		return nil, err
	}
	if env.DB == nil {
		return nil, errors.New("knowledge needs hookroom's database")
	}
	embedder, err := newEmbedder(s.Embeddings)
	if err != nil {
		return nil, err
	}
	ix := kb.New(env.DB, opts, embedder)
	if err := ix.Upgrade(ctx); err != nil {
		return nil, err
	}
	return ix, nil
}

// newEmbedder returns the embeddings client the settings describe, nil
// without any.
func newEmbedder(e *embeddingsSettings) (kb.Embedder, error) {
	if e == nil || (e.BaseURL == "" && e.Model == "" && e.APIKey == "") {
		return nil, nil
	}
	if u, err := url.Parse(e.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, plugins.SettingsErrorf("embeddings.base_url", "want an http(s) URL like http://127.0.0.1:11434/v1, not %q", e.BaseURL)
	}
	if strings.TrimSpace(e.Model) == "" {
		return nil, plugins.SettingsErrorf("embeddings.model", "required with base_url (e.g. nomic-embed-text)")
	}
	if e.TimeoutMS < 0 {
		return nil, plugins.SettingsErrorf("embeddings.timeout_ms", "must not be negative")
	}
	return memory.NewHTTPEmbedderWithKey(e.BaseURL, e.Model, e.APIKey, time.Duration(e.TimeoutMS)*time.Millisecond, nil), nil
}

// settingsError turns the knowledge package's validation messages ("KEY:
// message", one per line) into a *plugins.SettingsError below base, naming
// the first problem's key.
func settingsError(base string, err error) error {
	line, _, _ := strings.Cut(err.Error(), "\n")
	key, msg, ok := strings.Cut(line, ": ")
	if !ok || strings.ContainsAny(key, " ") {
		return &plugins.SettingsError{Path: base, Err: err}
	}
	path := base
	for _, seg := range strings.Split(key, ".") {
		idx := ""
		if i := strings.IndexByte(seg, '['); i > 0 {
			seg, idx = seg[:i], seg[i:]
		}
		path = plugins.JoinKey(path, seg) + idx
	}
	return &plugins.SettingsError{Path: path, Err: errors.New(msg)}
}

// Index returns the plugin's index (with embeddings, when configured).
func (p *Plugin) Index() *kb.Index { return p.index }

// searchIndex is the index to search for a turn in room: the full-text one
// when the room is (or may be) encrypted.
func (p *Plugin) searchIndex(encrypted bool) *kb.Index {
	if encrypted {
		return p.text
	}
	return p.index
}

// Hooks returns passages (message:enrich) for the agents with auto_enrich;
// none without such agents.
func (p *Plugin) Hooks() []hooks.Hook {
	if len(p.enrich) == 0 {
		return nil
	}
	return []hooks.Hook{hooks.Handle(hooks.MessageEnrich, HookPassages, p.passages, hooks.Agents(p.enrich...))}
}

// passages adds the top passages of the agent's bases for the message.
func (p *Plugin) passages(ctx context.Context, c *hooks.MessageEnrichContext) error {
	agent := c.TargetAgent
	if agent == "" {
		agent = c.Envelope.AgentName
	}
	a, ok := p.agents[agent]
	if !ok || !a.AutoEnrich || strings.TrimSpace(c.Envelope.Body) == "" {
		return nil
	}
	ix := p.searchIndex(p.env.Encrypted(ctx, c.Envelope.RoomID))
	item, ok, err := ix.Enrichment(ctx, a.Bases, c.Envelope.Body, a.Limit())
	if err != nil {
		return err
	}
	if ok {
		c.Items = append(c.Items, item)
	}
	return nil
}

// Tools returns search_knowledge for the agents with bases (none: no tool).
func (p *Plugin) Tools() []plugins.Tool {
	if len(p.tools) == 0 {
		return nil
	}
	spec := kb.ToolSpec()
	return []plugins.Tool{{
		Name: spec.Name, Description: spec.Description, Parameters: spec.Parameters,
		Agents: slices.Clone(p.tools),
		Func: func(ctx context.Context, call plugins.ToolCall) (string, error) {
			a, ok := p.agents[call.Agent]
			if !ok || len(a.Bases) == 0 {
				return "", fmt.Errorf("no knowledge base is available to agent %q", call.Agent)
			}
			args := call.Arguments
			if len(args) == 0 {
				args = []byte("{}")
			}
			return p.searchIndex(p.env.Encrypted(ctx, call.RoomID)).Call(ctx, a.Bases, a.Limit(), args)
		},
	}}
}

// Commands returns !knowledge.
func (p *Plugin) Commands() []plugins.Command {
	return []plugins.Command{{
		Name: CommandName,
		Help: "(admins) the knowledge bases' state; `!knowledge reindex [base]` re-indexes now",
		Run:  p.command,
	}}
}

func (p *Plugin) command(ctx context.Context, req plugins.CommandRequest) (string, error) {
	if !req.Admin {
		return "Only hookroom's admins may use `!knowledge`.", nil
	}
	if len(req.Args) > 0 && strings.EqualFold(req.Args[0], "reindex") {
		bases := p.index.Options().Names()
		if len(req.Args) > 1 {
			bases = req.Args[1:]
		}
		var b strings.Builder
		for _, base := range bases {
			rep, err := p.index.Reindex(ctx, base, false)
			if errors.Is(err, kb.ErrUnknownBase) {
				fmt.Fprintf(&b, "- %s: no such base (known: %s)\n", base, strings.Join(p.index.Options().Names(), ", "))
				continue
			}
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "- **%s**: %d files; %d changed, %d removed, %d chunks written in %s\n",
				base, rep.Files, rep.Changed, rep.Removed, rep.Chunks, rep.Duration.Round(time.Millisecond))
		}
		if b.Len() == 0 {
			return "No knowledge base is configured.", nil
		}
		return "Re-indexed:\n" + strings.TrimSuffix(b.String(), "\n"), nil
	}
	if len(req.Args) > 0 {
		return "Usage: `!knowledge` or `!knowledge reindex [base…]`.", nil
	}
	return p.status(ctx)
}

// status renders Index.Status.
func (p *Plugin) status(ctx context.Context) (string, error) {
	st, err := p.index.Status(ctx)
	if err != nil {
		return "", err
	}
	if len(st) == 0 {
		return "No knowledge base is configured.", nil
	}
	var b strings.Builder
	b.WriteString("Knowledge bases:")
	for _, s := range st {
		when := "not indexed yet"
		if !s.LastIndexed.IsZero() {
			when = "indexed " + s.LastIndexed.UTC().Format("2006-01-02 15:04:05") + " UTC"
		}
		fmt.Fprintf(&b, "\n- **%s**: %d files, %d chunks (%d with embeddings), %s", s.Base, s.Files, s.Chunks, s.Embedded, when)
		if s.Error != "" {
			fmt.Fprintf(&b, "; problem: %s", s.Error)
		}
		for _, f := range s.Skipped {
			fmt.Fprintf(&b, "\n  - skipped `%s`: %s", f.Path, f.Error)
		}
	}
	return b.String(), nil
}

// Close stops the watcher and waits for a re-index in progress to end.
func (p *Plugin) Close() error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	return nil
}
