package auditlog

import "testing"

func TestScrub(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain text", "nothing to hide here", "nothing to hide here"},
		{"bearer", "Authorization: Bearer eyJhbGciOi.J9x", "Authorization: Bearer REDACTED"},
		{"matrix token", "token syt_YWxpY2U_abcdefghijklmnop_0a1b2c", "token REDACTED"},
		{"openai key", "key sk-proj-abcdefghijklmnop1234 used", "key REDACTED used"},
		{"github token", "ghp_abcdefghijklmnopqrstuvwxyz0123", "REDACTED"},
		{"slack token", "xoxb-1234567890-abcdef", "REDACTED"},
		{"aws key id", "AKIAABCDEFGHIJKLMNOP", "REDACTED"},
		{"pem", "-----BEGIN RSA PRIVATE KEY-----\nMII", "REDACTED\nMII"},
		{"query parameter", "GET /x?access_token=abc123&page=2", "GET /x?access_token=REDACTED&page=2"},
		{"key value", "password: hunter2, user: bob", "password: REDACTED, user: bob"},
		{"api key equals", "API_KEY=abc", "API_KEY=REDACTED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scrub(tt.in); got != tt.want {
				t.Errorf("scrub(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestIsSecretKey(t *testing.T) {
	for k, want := range map[string]bool{
		"password": true, "api_key": true, "apiKey": true, "X-Auth-Token": true, "client_secret": true,
		"Authorization": true, "cookie": true, "signing_key": true, "key": true, "private-key": true,
		"path": false, "query": false, "keyword": false, "monkey": false, "tokens_used": true, "depth": false,
	} {
		if got := isSecretKey(k); got != want {
			t.Errorf("isSecretKey(%q) = %v, want %v", k, got, want)
		}
	}
}
