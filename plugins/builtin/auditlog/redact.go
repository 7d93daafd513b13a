package auditlog

import (
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"
)

// Redacted replaces secret values in the log.
const Redacted = "REDACTED"

// secretKeyWords mark keys whose values are never logged, compared with the
// key lowercased and without '_' and '-'.
var secretKeyWords = []string{"password", "passwd", "passphrase", "secret", "token", "apikey", "credential", "authorization", "cookie", "privatekey", "accesskey"}

func isSecretKey(k string) bool {
	k = strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(k))
	if strings.HasSuffix(k, "key") && !strings.HasSuffix(k, "monkey") { // key, api_key, signingKey

		return true
	}
	for _, w := range secretKeyWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// credentialPatterns match common credential formats in free text. The
// first group, when present, is kept (the name of a key=value pair).
var credentialPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{8,}`),
	regexp.MustCompile(`()\bsyt_[A-Za-z0-9_]{8,}`),             // Matrix (Synapse) access tokens
	regexp.MustCompile(`()\bsk-[A-Za-z0-9_-]{16,}`),            // OpenAI-style API keys
	regexp.MustCompile(`()\bgh[pousr]_[A-Za-z0-9]{20,}`),       // GitHub tokens
	regexp.MustCompile(`()\bxox[abprs]-[A-Za-z0-9-]{10,}`),     // Slack tokens
	regexp.MustCompile(`()\bAKIA[0-9A-Z]{16}\b`),               // AWS access key ids
	regexp.MustCompile(`()-----BEGIN [A-Z ]*PRIVATE KEY-----`), // PEM private keys
	regexp.MustCompile(`(?i)([?&](?:access_token|api_key|apikey|token|key|password|secret|sig|signature)=)[^&\s"']+`),
	regexp.MustCompile(`(?i)(\b(?:api[_-]?key|access[_-]?token|auth[_-]?token|token|secret|password|passwd)\s*[:=]\s*)[^\s,;"'&]+`),
}

// scrub masks credentials in s.
func scrub(s string) string {
	for _, re := range credentialPatterns {
		if re.MatchString(s) {
			s = re.ReplaceAllString(s, "${1}"+Redacted)
		}
	}
	return s
}

// clip scrubs s and cuts it to max runes (0: no limit).
func clip(s string, max int) string {
	s = scrub(s)
	if max > 0 && utf8.RuneCountInString(s) > max {
		r := []rune(s)
		s = string(r[:max]) + "…"
	}
	return s
}

// maskJSON returns raw with the values under secret-looking keys replaced
// and every string scrubbed; invalid JSON is logged as a scrubbed string.
func maskJSON(raw json.RawMessage, maxText int) json.RawMessage {
	if len(raw) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		b, _ := json.Marshal(clip(string(raw), maxText))
		return b
	}
	b, err := json.Marshal(mask(v, maxText))
	if err != nil {
		return nil
	}
	return b
}

func mask(v any, maxText int) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if isSecretKey(k) {
				x[k] = Redacted
			} else {
				x[k] = mask(e, maxText)
			}
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = mask(e, maxText)
		}
		return x
	case string:
		return clip(x, maxText)
	default:
		return v
	}
}
