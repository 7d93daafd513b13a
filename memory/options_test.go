package memory

import (
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" valid
	}{
		{"zero", Options{}, ""},
		{"enabled", Options{Enabled: true}, ""},
		{"all", Options{Enabled: true, Scopes: []Scope{ScopeAgent, ScopePerson}, RecallLimit: 8, MaxPerScope: 10, Extract: true}, ""},
		{"unknown scope", Options{Enabled: true, Scopes: []Scope{"planet"}}, `memory.scopes: unknown scope "planet"`},
		{"twice", Options{Enabled: true, Scopes: []Scope{ScopeRoom, ScopeRoom}}, "memory.scopes: room is listed twice"},
		{"recall limit", Options{RecallLimit: 51}, "memory.recall_limit"},
		{"max per scope", Options{MaxPerScope: -1}, "memory.max_per_scope"},
		{"extract while off", Options{Extract: true}, "memory.extract: needs memory.enabled"},
		{"extract without person", Options{Enabled: true, Extract: true, Scopes: []Scope{ScopeRoom}}, "scopes must include person"},
	} {
		err := tc.o.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
	if (Options{}).Allows(ScopePerson) {
		t.Error("the zero value allows a scope")
	}
	on := Options{Enabled: true}
	if !on.Allows(ScopePerson) || !on.Allows(ScopeRoom) || on.Allows(ScopeAgent) || on.recallLimit() != 5 || on.maxPerScope() != 1000 {
		t.Error("defaults of an enabled agent")
	}
}

func TestConfigValidate(t *testing.T) {
	t.Setenv("HOOKROOM_TEST_KEY", "k")
	for _, tc := range []struct {
		name string
		c    Config
		want string
	}{
		{"zero", Config{}, ""},
		{"ollama", Config{Embeddings: EmbeddingsOptions{BaseURL: "http://127.0.0.1:11434/v1", Model: "nomic-embed-text"}}, ""},
		{"with a key", Config{Embeddings: EmbeddingsOptions{BaseURL: "https://api.openai.com/v1", Model: "text-embedding-3-small", APIKeyEnv: "HOOKROOM_TEST_KEY"}}, ""},
		{"no model", Config{Embeddings: EmbeddingsOptions{BaseURL: "http://x/v1"}}, "memory.embeddings.model: required"},
		{"model without url", Config{Embeddings: EmbeddingsOptions{Model: "m"}}, "memory.embeddings.base_url: required"},
		{"bad url", Config{Embeddings: EmbeddingsOptions{BaseURL: "localhost:11434", Model: "m"}}, "memory.embeddings.base_url: want an http(s) URL"},
		{"unset key variable", Config{Embeddings: EmbeddingsOptions{BaseURL: "http://x/v1", Model: "m", APIKeyEnv: "HOOKROOM_TEST_NO_SUCH_VAR"}}, "HOOKROOM_TEST_NO_SUCH_VAR is not set"},
		{"key instead of a name", Config{Embeddings: EmbeddingsOptions{BaseURL: "http://x/v1", Model: "m", APIKeyEnv: "${KEY}"}}, "want the name of an environment variable"},
		{"negative timeout", Config{Embeddings: EmbeddingsOptions{BaseURL: "http://x/v1", Model: "m", Timeout: -time.Second}}, "memory.embeddings.timeout"},
		{"similarity", Config{Embeddings: EmbeddingsOptions{BaseURL: "http://x/v1", Model: "m", MinSimilarity: 1}}, "min_similarity"},
		{"text length", Config{MaxTextLength: -1}, "memory.max_text_length"},
	} {
		err := tc.c.Validate()
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: Validate = %v, want %q", tc.name, err, tc.want)
		}
	}
}

// The sections decode strictly from YAML with the documented keys.
func TestYAML(t *testing.T) {
	var agent Options
	dec := yaml.NewDecoder(strings.NewReader("enabled: true\nscopes: [person, agent]\nrecall_limit: 3\nmax_per_scope: 50\nextract: true\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&agent); err != nil || !agent.Enabled || len(agent.Scopes) != 2 || agent.RecallLimit != 3 || agent.MaxPerScope != 50 || !agent.Extract {
		t.Errorf("agent memory: = %+v, %v", agent, err)
	}
	var top Config
	dec = yaml.NewDecoder(strings.NewReader("max_text_length: 300\nembeddings:\n  base_url: http://127.0.0.1:11434/v1\n  model: nomic-embed-text\n  api_key_env: X\n  timeout: 5s\n  min_similarity: 0.2\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&top); err != nil || top.MaxTextLength != 300 || top.Embeddings.Timeout != 5*time.Second ||
		top.Embeddings.Model != "nomic-embed-text" || top.Embeddings.APIKeyEnv != "X" || top.Embeddings.MinSimilarity != 0.2 {
		t.Errorf("memory: = %+v, %v", top, err)
	}
}
