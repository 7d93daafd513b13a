package config

import (
	"strconv"
	"strings"
)

// Key paths name a value in the file: map keys are joined with dots
// ("agents.code.model"), sequence items are indexed ("plugins[0]"), and keys
// that are not plain words are quoted ("authorization.room_permissions[\"!a:b\"]").

// JoinKey appends a map key to a key path: "a.b", or a["quoted key"] for a
// key that is not a plain word.
func JoinKey(base, key string) string {
	seg := key
	if !isPlainKey(key) {
		seg = "[" + strconv.Quote(key) + "]"
		return base + seg
	}
	if base == "" {
		return seg
	}
	return base + "." + seg
}

// JoinIndex appends a list index to a key path: "rules[2]".
func JoinIndex(base string, i int) string {
	return base + "[" + strconv.Itoa(i) + "]"
}

func isPlainKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// parentPath strips the last segment of a key path ("" at the top).
func parentPath(p string) string {
	if strings.HasSuffix(p, "]") {
		// Find the '[' that opens the last segment, skipping quoted text.
		if i := lastBracket(p); i >= 0 {
			return p[:i]
		}
		return ""
	}
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// lastBracket returns the index of the '[' opening the final "[...]" segment.
func lastBracket(p string) int {
	if strings.HasSuffix(p, "\"]") {
		// Quoted key: scan backwards for `["` not preceded by an escape.
		for i := len(p) - 3; i >= 1; i-- {
			if p[i] == '"' && p[i-1] == '[' {
				if _, err := strconv.Unquote(p[i : len(p)-1]); err == nil {
					return i - 1
				}
			}
		}
		return -1
	}
	return strings.LastIndexByte(p, '[')
}

// within reports whether path is p or lies below it.
func within(path, p string) bool {
	if p == "" {
		return true
	}
	if !strings.HasPrefix(path, p) {
		return false
	}
	rest := path[len(p):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// AgentToolPath is the key path of entry i of agents.<agent>.tools, for
// Config.Errorf and Config.Line.
func AgentToolPath(agent string, i int) string {
	return JoinIndex(JoinKey(JoinKey("agents", agent), "tools"), i)
}
