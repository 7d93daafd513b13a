package agents

import (
	"strings"
	"testing"
)

func TestScrubCredentials(t *testing.T) {
	const key = "my-very-own-key-1234567890"
	tests := []struct {
		name, in string
		leak     []string // must not survive
		keep     []string // must survive
	}{
		{"configured key echoed", "Incorrect API key provided: " + key + ".", []string{key}, []string{"Incorrect API key provided"}},
		{"openai key format", "invalid key sk-proj-AbCdEf1234567890XyZ", []string{"sk-proj-AbCdEf1234567890XyZ"}, []string{"invalid key"}},
		{"groq key", "bad gsk_abcdefghijklmnop12", []string{"gsk_abcdefghijklmnop12"}, nil},
		{"authorization header", `got header "Authorization: Bearer abcdef123456789"`, []string{"abcdef123456789"}, []string{"Authorization"}},
		{"json field", `{"error":"denied","api_key":"zzz-secret-value"}`, []string{"zzz-secret-value"}, []string{`"error":"denied"`, `"api_key"`}},
		{"url query", `Get "https://llm.example/v1?key=AIzaSyA1234567890abcdefghij": dial tcp`, []string{"AIzaSyA1234567890abcdefghij"}, []string{"https://llm.example/v1", "dial tcp"}},
		{"token pair", "token=abcd1234efgh refused", []string{"abcd1234efgh"}, []string{"refused"}},
		{"jwt", "bad eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.SflKxwRJSMeKKF2QT4 here", []string{"SflKxwRJSMeKKF2QT4"}, []string{"here"}},
		{"plain message untouched", "model gpt-4o-mini does not exist", nil, []string{"model gpt-4o-mini does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := scrubCredentials(tt.in, key)
			for _, s := range tt.leak {
				if strings.Contains(got, s) {
					t.Errorf("scrubbed %q still contains %q", got, s)
				}
			}
			for _, s := range tt.keep {
				if !strings.Contains(got, s) {
					t.Errorf("scrubbed %q lost %q", got, s)
				}
			}
		})
	}
}

// A base URL a provider cannot use is refused without repeating it: its
// path, query or user info may hold a token.
func TestBadBaseURLIsNotRepeated(t *testing.T) {
	const token = "tok3n-in-the-url"
	for _, p := range []string{ProviderOpenAI, ProviderAnthropic} {
		for _, u := range []string{"ftp://gw.example/" + token, "https:///" + token + "?key=" + token, "//" + token + "@gw.example"} {
			t.Run(p+" "+u, func(t *testing.T) {
				_, err := NewModel(ModelSpec{Provider: p, Model: "m", BaseURL: u, APIKey: "k"})
				if err == nil {
					t.Fatal("a base URL that is not http(s) was accepted")
				}
				if strings.Contains(err.Error(), token) {
					t.Errorf("the error repeats the URL: %v", err)
				}
			})
		}
	}
}
