package memory

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/hooks"
	mem "github.com/hookroom/hookroom/memory"
	"github.com/hookroom/hookroom/plugins"
)

// Name is the plugin's registered name.
const Name = "memory"

// Hook names.
const (
	HookRecall  = "recall"
	HookExtract = "extract"
)

// Defaults of the settings.
const (
	DefaultExtractTimeout = 30 * time.Second
	// backfillEvery is how often vectors missing while the embeddings
	// endpoint was down are filled in.
	backfillEvery = 5 * time.Minute
)

func init() {
	plugins.RegisterBuiltin(plugins.Builtin{
		Name:        Name,
		Description: "Long-term memory: agents recall what people told them, in later turns and other rooms (recall, remember/recall/forget tools, !memory)",
		New:         New,
	})
}

type settings struct {
	Agents        map[hooks.AgentName]agentSettings `json:"agents"`
	MaxTextLength int                               `json:"max_text_length"`
	Embeddings    *embeddingsSettings               `json:"embeddings"`
	Extract       *extractSettings                  `json:"extract"`
}

type agentSettings struct {
	Scopes      []mem.Scope `json:"scopes"`
	RecallLimit int         `json:"recall_limit"`
	MaxPerScope int         `json:"max_per_scope"`
	Extract     bool        `json:"extract"`
	Tools       *bool       `json:"tools"`
}

type embeddingsSettings struct {
	BaseURL       string  `json:"base_url"`
	Model         string  `json:"model"`
	APIKey        string  `json:"api_key"`
	TimeoutMS     int     `json:"timeout_ms"`
	MinSimilarity float64 `json:"min_similarity"`
}

type extractSettings struct {
	Provider       string `json:"provider"`
	BaseURL        string `json:"base_url"`
	Model          string `json:"model"`
	APIKey         string `json:"api_key"`
	TimeoutMS      int    `json:"timeout_ms"`
	EncryptedRooms bool   `json:"encrypted_rooms"`
}

// Plugin is a loaded memory plugin.
type Plugin struct {
	env     plugins.Env
	store   *mem.Store
	agents  []hooks.AgentName // with memory, sorted
	tools   []hooks.AgentName // with the tools, sorted
	extract []hooks.AgentName // with extract, sorted
	maxText int

	model          agents.Model // extract's, nil without
	extractTimeout time.Duration
	extractCrypto  bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

var (
	_ plugins.Instance        = (*Plugin)(nil)
	_ plugins.ToolProvider    = (*Plugin)(nil)
	_ plugins.CommandProvider = (*Plugin)(nil)
)

// New builds the plugin from env's settings: it opens the memory store on
// hookroom's database (creating or migrating its tables) and, with
// embeddings, starts filling in missing vectors in the background.
func New(ctx context.Context, env plugins.Env) (plugins.Instance, error) {
	var s settings
	if err := plugins.DecodeSettings(env.Settings, &s); err != nil {
		return nil, err
	}
	cfg := mem.Config{MaxTextLength: s.MaxTextLength}
	if e := s.Embeddings; e != nil {
		if e.TimeoutMS < 0 {
			return nil, plugins.SettingsErrorf("embeddings.timeout_ms", "must not be negative")
		}
		cfg.Embeddings = mem.EmbeddingsOptions{
			BaseURL: e.BaseURL, Model: e.Model, MinSimilarity: e.MinSimilarity,
			Timeout: time.Duration(e.TimeoutMS) * time.Millisecond,
		}
		if e.BaseURL == "" && e.APIKey != "" {
			return nil, plugins.SettingsErrorf("embeddings.base_url", "required when api_key is set")
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, settingsError("", err)
	}
	p := &Plugin{env: env, maxText: s.MaxTextLength}
	opts := make(map[hooks.AgentName]mem.Options, len(s.Agents))
	for name, a := range s.Agents {
		at := plugins.JoinKey("agents", string(name))
		if strings.TrimSpace(string(name)) == "" {
			return nil, plugins.SettingsErrorf(at, "an agent name is empty")
		}
		o := mem.Options{Enabled: true, Scopes: a.Scopes, RecallLimit: a.RecallLimit, MaxPerScope: a.MaxPerScope, Extract: a.Extract}
		if err := o.Validate(); err != nil {
			return nil, settingsError(at, err)
		}
		if a.Extract && s.Extract == nil {
			return nil, plugins.SettingsErrorf(plugins.JoinKey(at, "extract"), "needs the extract endpoint (settings.extract: base_url, model)")
		}
		opts[name] = o
		p.agents = append(p.agents, name)
		if a.Tools == nil || *a.Tools {
			p.tools = append(p.tools, name)
		}
		if a.Extract {
			p.extract = append(p.extract, name)
		}
	}
	slices.Sort(p.agents)
	slices.Sort(p.tools)
	slices.Sort(p.extract)
	if x := s.Extract; x != nil {
		model, err := newExtractModel(*x)
		if err != nil {
			return nil, err
		}
		p.model, p.extractCrypto = model, x.EncryptedRooms
		p.extractTimeout = DefaultExtractTimeout
		if x.TimeoutMS > 0 {
			p.extractTimeout = time.Duration(x.TimeoutMS) * time.Millisecond
		}
	}
	if env.DB == nil {
		if env.Inspect {
			return p, nil // only looked at: hooks, tools and commands are declared, never run
		}
		return nil, errors.New("memory needs hookroom's database, and this host offers none to plugins")
	}
	var embedder mem.Embedder
	if cfg.Embeddings.Enabled() {
		key := ""
		if s.Embeddings != nil {
			key = s.Embeddings.APIKey
		}
		embedder = mem.NewHTTPEmbedderWithKey(cfg.Embeddings.BaseURL, cfg.Embeddings.Model, key, cfg.Embeddings.Timeout, nil)
	}
	p.store = mem.New(env.DB, cfg, embedder)
	p.store.Configure(opts)
	if env.Inspect {
		return p, nil
	}
	if err := p.store.Upgrade(ctx); err != nil {
		return nil, err
	}
	if embedder != nil {
		bctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		if env.Logger != nil {
			bctx = env.Logger.WithContext(bctx)
		}
		p.cancel = cancel
		p.wg.Go(func() { p.backfill(bctx) })
	}
	return p, nil
}

// newExtractModel builds extract's model.
func newExtractModel(x extractSettings) (agents.Model, error) {
	switch x.Provider {
	case "", agents.ProviderOpenAI, agents.ProviderAnthropic:
	default:
		return nil, plugins.SettingsErrorf("extract.provider", "unknown provider %q (want %s or %s)", x.Provider, agents.ProviderOpenAI, agents.ProviderAnthropic)
	}
	if strings.TrimSpace(x.Model) == "" {
		return nil, plugins.SettingsErrorf("extract.model", "required (the model that picks the facts to remember, e.g. llama3.1)")
	}
	if x.BaseURL != "" {
		if u, err := url.Parse(x.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, plugins.SettingsErrorf("extract.base_url", "want an http(s) URL like http://127.0.0.1:11434/v1")
		}
	}
	if x.TimeoutMS < 0 {
		return nil, plugins.SettingsErrorf("extract.timeout_ms", "must not be negative")
	}
	m, err := agents.NewModel(agents.ModelSpec{Provider: x.Provider, BaseURL: x.BaseURL, APIKey: x.APIKey, Model: x.Model})
	if err != nil {
		return nil, plugins.SettingsErrorf("extract", "%v", err)
	}
	return m, nil
}

// settingsError turns the memory package's validation messages ("memory.KEY:
// message", one per line) into a *plugins.SettingsError below base, naming
// the first problem's key.
func settingsError(base string, err error) error {
	line, _, _ := strings.Cut(err.Error(), "\n")
	line = strings.TrimPrefix(line, "memory.")
	key, msg, ok := strings.Cut(line, ": ")
	if !ok || strings.ContainsAny(key, " ") {
		return &plugins.SettingsError{Path: base, Err: err}
	}
	path := base
	for _, seg := range strings.Split(key, ".") {
		path = plugins.JoinKey(path, seg)
	}
	return &plugins.SettingsError{Path: path, Err: errors.New(msg)}
}

// Store returns the plugin's memory store.
func (p *Plugin) Store() *mem.Store { return p.store }

// encryptedFunc is the store's view of which rooms are encrypted: the
// host's answer, and encrypted when it cannot tell.
func (p *Plugin) encryptedFunc() mem.EncryptedFunc { return p.env.Encrypted }

// Hooks returns recall (message:enrich) and, when an agent extracts, extract
// (message:after_response), both limited to the plugin's agents. Without
// agents it has no hooks.
func (p *Plugin) Hooks() []hooks.Hook {
	if len(p.agents) == 0 {
		return nil
	}
	hs := []hooks.Hook{mem.EnrichHook(p.store, p.encryptedFunc(), hooks.Agents(p.agents...))}
	if len(p.extract) > 0 {
		hs = append(hs, hooks.Handle(hooks.MessageAfterResponse, HookExtract, p.extractHook,
			hooks.Agents(p.extract...), hooks.Timeout(p.extractTimeout)))
	}
	return hs
}

// Close stops the background work.
func (p *Plugin) Close() error {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	return nil
}

// backfill embeds what was stored while the embeddings endpoint was down,
// now and every backfillEvery, until ctx ends.
func (p *Plugin) backfill(ctx context.Context) {
	log := zerolog.Ctx(ctx)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := p.store.Backfill(ctx, 64)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn().Err(err).Msg("memory: failed to embed stored memories; recall ranks them by full text until the embeddings endpoint answers")
			t.Reset(backfillEvery)
		case n > 0:
			t.Reset(0)
		default:
			t.Reset(backfillEvery)
		}
	}
}
