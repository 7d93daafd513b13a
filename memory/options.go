package memory

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Scope is whose a memory is.
type Scope string

// The scopes.
const (
	// ScopePerson memories are about one person, for one agent: they follow
	// the person across rooms and threads and are recalled only for them.
	ScopePerson Scope = "person"
	// ScopeRoom memories belong to one room, for one agent: recalled for
	// anyone the agent answers in that room, nowhere else.
	ScopeRoom Scope = "room"
	// ScopeAgent memories belong to the agent: recalled for anyone it
	// answers, anywhere.
	ScopeAgent Scope = "agent"
)

// Valid reports whether s is one of the three scopes.
func (s Scope) Valid() bool { return s == ScopePerson || s == ScopeRoom || s == ScopeAgent }

// Defaults of Options and Config.
const (
	DefaultRecallLimit   = 5
	DefaultMaxPerScope   = 1000
	DefaultMaxTextLength = 500 // characters (runes)
	DefaultEmbedTimeout  = 10 * time.Second
)

// DefaultScopes are the scopes of an enabled agent that names none: what a
// person tells the agent follows them, and what is said about a room stays in
// it. Agent-wide memory, shared with everyone the agent talks to, is opt-in.
var DefaultScopes = []Scope{ScopePerson, ScopeRoom}

// Options configure memory for one agent (its memory: section). The zero
// value is off: an agent without a memory: section remembers nothing and
// recalls nothing.
//
//	agents:
//	  assistant:
//	    memory:
//	      enabled: true
//	      scopes: [person, room]   # default; add agent for agent-wide memory
//	      recall_limit: 5          # memories per turn in the enrichment block
//	      max_per_scope: 1000      # oldest dropped beyond this
//	      extract: true            # after each turn, the model picks durable facts
type Options struct {
	// Enabled turns memory on for the agent: recall into message:enrich,
	// the remember/recall/forget tools, !memory.
	Enabled bool `yaml:"enabled"`
	// Scopes the agent remembers and recalls in (default DefaultScopes).
	Scopes []Scope `yaml:"scopes"`
	// RecallLimit is how many memories a turn recalls at most (default 5).
	RecallLimit int `yaml:"recall_limit"`
	// MaxPerScope bounds the memories of one scope (one person, one room or
	// the agent); remembering one more drops the oldest (default 1000).
	MaxPerScope int `yaml:"max_per_scope"`
	// Extract asks the agent's model after each turn for durable facts about
	// the person, stored in their person scope (after memory:extracted hooks
	// had their say).
	Extract bool `yaml:"extract"`
}

// Validate checks the options; its messages name the key.
func (o Options) Validate() error {
	var errs []error
	seen := map[Scope]bool{}
	for _, s := range o.Scopes {
		switch {
		case !s.Valid():
			errs = append(errs, fmt.Errorf("memory.scopes: unknown scope %q: want person, room or agent", s))
		case seen[s]:
			errs = append(errs, fmt.Errorf("memory.scopes: %s is listed twice", s))
		}
		seen[s] = true
	}
	if o.RecallLimit < 0 || o.RecallLimit > 50 {
		errs = append(errs, fmt.Errorf("memory.recall_limit: must be between 0 (default %d) and 50, not %d", DefaultRecallLimit, o.RecallLimit))
	}
	if o.MaxPerScope < 0 {
		errs = append(errs, fmt.Errorf("memory.max_per_scope: must not be negative (0 means %d), not %d", DefaultMaxPerScope, o.MaxPerScope))
	}
	if o.Extract && !o.Enabled {
		errs = append(errs, errors.New("memory.extract: needs memory.enabled: true"))
	}
	if o.Extract && len(o.Scopes) > 0 && !seen[ScopePerson] {
		errs = append(errs, errors.New("memory.extract: stores facts about the person, so memory.scopes must include person"))
	}
	return errors.Join(errs...)
}

// scopes returns the enabled scopes (DefaultScopes when none are named).
func (o Options) scopes() []Scope {
	if !o.Enabled {
		return nil
	}
	if len(o.Scopes) == 0 {
		return DefaultScopes
	}
	return o.Scopes
}

// Allows reports whether the agent remembers and recalls in scope s.
func (o Options) Allows(s Scope) bool { return slices.Contains(o.scopes(), s) }

func (o Options) recallLimit() int {
	if o.RecallLimit > 0 {
		return o.RecallLimit
	}
	return DefaultRecallLimit
}

func (o Options) maxPerScope() int {
	if o.MaxPerScope > 0 {
		return o.MaxPerScope
	}
	return DefaultMaxPerScope
}

// Config is the top-level memory: section: what every agent's memory shares.
// The zero value has no embeddings (full-text ranking only) and caps
// memories at DefaultMaxTextLength characters.
//
//	memory:
//	  max_text_length: 500
//	  embeddings:
//	    base_url: http://127.0.0.1:11434/v1   # Ollama, vLLM, llama.cpp, OpenAI
//	    model: nomic-embed-text
//	    api_key_env: EMBEDDINGS_API_KEY        # optional: the variable holding the key
//	    timeout: 10s
type Config struct {
	// MaxTextLength caps a memory's text, in characters; longer texts are
	// cut at a character boundary (default 500).
	MaxTextLength int `yaml:"max_text_length"`
	// Embeddings, when its base_url is set, adds semantic ranking.
	Embeddings EmbeddingsOptions `yaml:"embeddings"`
}

// EmbeddingsOptions configure an OpenAI-compatible /v1/embeddings endpoint.
// With no BaseURL there are no embeddings.
type EmbeddingsOptions struct {
	// BaseURL is the API base ending in /v1 (the client appends
	// /embeddings), e.g. http://127.0.0.1:11434/v1 for Ollama.
	BaseURL string `yaml:"base_url"`
	// Model is the embedding model's id (required with BaseURL). Stored
	// vectors are tagged with it: after a change, Backfill re-embeds.
	Model string `yaml:"model"`
	// APIKeyEnv names the environment variable holding the API key (empty:
	// no key, as local servers want). The key itself never sits in
	// config.yaml, in errors or in logs.
	APIKeyEnv string `yaml:"api_key_env"`
	// Timeout bounds one embeddings request (default 10s). A request that
	// fails or times out makes recall go on with full-text ranking alone.
	Timeout time.Duration `yaml:"timeout"`
	// MinSimilarity is the cosine similarity a memory needs to count as a
	// semantic match (default 0: any positive similarity).
	MinSimilarity float64 `yaml:"min_similarity"`
}

// Enabled reports whether embeddings are configured.
func (e EmbeddingsOptions) Enabled() bool { return e.BaseURL != "" }

// Validate checks the section; its messages name the key.
func (c Config) Validate() error {
	var errs []error
	if c.MaxTextLength < 0 || c.MaxTextLength > 10000 {
		errs = append(errs, fmt.Errorf("memory.max_text_length: must be between 0 (default %d) and 10000, not %d", DefaultMaxTextLength, c.MaxTextLength))
	}
	e := c.Embeddings
	if e.BaseURL == "" {
		if e.Model != "" || e.APIKeyEnv != "" {
			errs = append(errs, errors.New("memory.embeddings.base_url: required when model or api_key_env is set"))
		}
	} else {
		if u, err := url.Parse(e.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("memory.embeddings.base_url: want an http(s) URL like http://127.0.0.1:11434/v1, not %q", e.BaseURL))
		}
		if strings.TrimSpace(e.Model) == "" {
			errs = append(errs, errors.New("memory.embeddings.model: required with base_url (e.g. nomic-embed-text)"))
		}
	}
	if e.APIKeyEnv != "" {
		if strings.ContainsAny(e.APIKeyEnv, "=$ {}") {
			errs = append(errs, fmt.Errorf("memory.embeddings.api_key_env: want the name of an environment variable, not %q", e.APIKeyEnv))
		} else if _, ok := os.LookupEnv(e.APIKeyEnv); !ok {
			errs = append(errs, fmt.Errorf("memory.embeddings.api_key_env: environment variable %s is not set", e.APIKeyEnv))
		}
	}
	if e.Timeout < 0 {
		errs = append(errs, fmt.Errorf("memory.embeddings.timeout: must be positive, not %s", e.Timeout))
	}
	if e.MinSimilarity < -1 || e.MinSimilarity >= 1 {
		errs = append(errs, fmt.Errorf("memory.embeddings.min_similarity: must be in [-1, 1), not %g", e.MinSimilarity))
	}
	return errors.Join(errs...)
}

func (c Config) maxTextLength() int {
	if c.MaxTextLength > 0 {
		return c.MaxTextLength
	}
	return DefaultMaxTextLength
}
