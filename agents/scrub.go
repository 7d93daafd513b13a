package agents

import (
	"regexp"
	"strings"
)

// credentialPatterns match what commonly carries a credential in a model
// server's error text: an Authorization header echoed back, key=value or
// "key": "value" pairs whose name says key/token/secret/password, and
// provider key formats (OpenAI/Anthropic sk-…, Groq gsk_…, OpenRouter
// sk-or-…, Google AIza…, GitHub ghp_…/github_pat_…, Slack xox…, JWTs).
var credentialPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`(?i)("?[a-z0-9_-]*(api[_-]?key|token|secret|password|passwd|authorization)"?\s*[:=]\s*"?)[^\s"',;&]{4,}`),
	regexp.MustCompile(`\b(sk|gsk|rk|pk)[-_][A-Za-z0-9_-]{8,}`),
	regexp.MustCompile(`\bAIza[0-9A-Za-z_-]{20,}`),
	regexp.MustCompile(`\b(ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{10,}`),
	regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`),
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`),
}

// redacted stands in for a scrubbed credential.
const redacted = "[REDACTED]"

// scrubCredentials removes the known secrets (the provider's configured API
// key) and anything that looks like a credential from text that comes from
// a model server — an error body, a URL in a network error — before it is
// logged or shown in a room. Some servers and proxies echo the key they
// were given when they refuse it.
func scrubCredentials(text string, known ...string) string {
	for _, k := range known {
		if len(k) >= 4 {
			text = strings.ReplaceAll(text, k, redacted)
		}
	}
	for i, re := range credentialPatterns {
		if i == 1 {
			// Keep the name, drop the value.
			text = re.ReplaceAllString(text, "${1}"+redacted)
			continue
		}
		text = re.ReplaceAllString(text, redacted)
	}
	return text
}
