package agents

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// Providers NewModel knows.
const (
	// ProviderOpenAI is any server that speaks OpenAI's chat completions
	// API: OpenAI, Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter,
	// Groq, …
	ProviderOpenAI = "openai"
	// ProviderAnthropic is Anthropic's Messages API (Claude), spoken
	// natively: prompt caching, tool use and usage as that API has them.
	ProviderAnthropic = "anthropic"
	// ProviderEcho is the offline demo model: it repeats the last user
	// message and says that it is the echo model.
	ProviderEcho = "echo"
)

// Defaults of ModelSpec.
const (
	DefaultBaseURL        = "https://api.openai.com/v1"
	DefaultContextWindow  = 8192
	DefaultRequestTimeout = 120 * time.Second
	// DefaultAnthropicBaseURL is the Messages API root (the provider
	// appends /v1/messages).
	DefaultAnthropicBaseURL = "https://api.anthropic.com"
	// DefaultAnthropicMaxTokens bounds an anthropic reply when neither the
	// request nor the spec does: the Messages API requires a bound.
	DefaultAnthropicMaxTokens = 8192
)

// ModelSpec is the plain description of a model that NewModel turns into a
// Model; the bot fills it from config.yaml. Zero values are defaults.
type ModelSpec struct {
	// Provider is ProviderOpenAI (the default), ProviderAnthropic or
	// ProviderEcho.
	Provider string
	// BaseURL is the API root including the version, e.g.
	// "http://localhost:11434/v1" (default DefaultBaseURL; for anthropic
	// the root without the version, default DefaultAnthropicBaseURL, a
	// trailing /v1 is accepted).
	BaseURL string
	// APIKey is sent as a bearer token (anthropic: in the x-api-key header); empty sends none. It is never
	// logged: ModelSpec's log form only says whether it is set.
	APIKey string
	// Model is the model name the server knows (required for openai).
	Model string
	// MaxTokens bounds every reply of this model when the request sets no
	// bound (0: the server's default; anthropic requires a bound and
	// defaults to DefaultAnthropicMaxTokens).
	MaxTokens int
	// ContextWindow is the model's context size in tokens (default
	// DefaultContextWindow); history budgets are a fraction of it.
	ContextWindow int
	// Vision says that the model accepts images (Message.Images). The
	// caller decides from it whether to send images or describe them in
	// text; providers send whatever images a request carries.
	Vision bool
	// RequestTimeout bounds how long the server may stay silent: until the
	// response headers arrive, and then between two stream chunks (default
	// DefaultRequestTimeout). The caller's context bounds the whole call.
	RequestTimeout time.Duration
	// HTTPClient, when set, sends the requests (proxies, tests).
	HTTPClient *http.Client
}

// WithDefaults returns s with its zero values replaced by the defaults
// NewModel uses.
func (s ModelSpec) WithDefaults() ModelSpec {
	s.Provider = cmp.Or(s.Provider, ProviderOpenAI)
	if s.Provider == ProviderOpenAI {
		s.BaseURL = cmp.Or(s.BaseURL, DefaultBaseURL)
	}
	if s.Provider == ProviderAnthropic {
		s.BaseURL = cmp.Or(s.BaseURL, DefaultAnthropicBaseURL)
		s.MaxTokens = cmp.Or(s.MaxTokens, DefaultAnthropicMaxTokens)
	}
	if s.Provider == ProviderEcho {
		s.Model = cmp.Or(s.Model, "echo")
	}
	s.ContextWindow = cmp.Or(s.ContextWindow, DefaultContextWindow)
	s.RequestTimeout = cmp.Or(s.RequestTimeout, DefaultRequestTimeout)
	return s
}

// MarshalZerologObject logs the spec without its API key, and of the base
// URL only the origin (its path or query may hold a gateway token).
func (s ModelSpec) MarshalZerologObject(e *zerolog.Event) {
	e.Str("provider", s.Provider).Str("base_url", shownURL(s.BaseURL)).Str("model", s.Model).
		Int("max_tokens", s.MaxTokens).Int("context_window", s.ContextWindow).Bool("vision", s.Vision).Dur("request_timeout", s.RequestTimeout).
		Bool("api_key_set", s.APIKey != "")
}

// String describes the spec without its API key, and of the base URL
// only the origin.
func (s ModelSpec) String() string {
	key := "unset"
	if s.APIKey != "" {
		key = "set"
	}
	return fmt.Sprintf("%s model %q at %q (context window %d, api key %s)", s.Provider, s.Model, shownURL(s.BaseURL), s.ContextWindow, key)
}

// shownURL is a base URL as logs and messages show it: its origin, with
// "/…" standing for a path or query left out.
func shownURL(raw string) string {
	if raw == "" {
		return ""
	}
	o := urlOrigin(raw)
	if u, err := url.Parse(raw); err == nil && (strings.Trim(u.Path, "/") != "" || u.RawQuery != "") {
		o += "/…"
	}
	return o
}

// GoString is String, so that %#v does not print the key either.
func (s ModelSpec) GoString() string { return s.String() }

var _ zerolog.LogObjectMarshaler = ModelSpec{}

// NewModel returns the model spec describes (after WithDefaults).
func NewModel(spec ModelSpec) (Model, error) {
	spec = spec.WithDefaults()
	switch spec.Provider {
	case ProviderOpenAI:
		return newOpenAI(spec)
	case ProviderAnthropic:
		return newAnthropic(spec)
	case ProviderEcho:
		return EchoModel{}, nil
	}
	return nil, fmt.Errorf("failed to create model: unknown provider %q (want %q, %q or %q)", spec.Provider, ProviderOpenAI, ProviderAnthropic, ProviderEcho)
}
