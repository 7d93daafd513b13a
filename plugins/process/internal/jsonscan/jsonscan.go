// Package jsonscan splits a JSON object into its members without decoding
// them: the protocol's messages carry a large context object inside small
// envelopes, and decoding each envelope with encoding/json would scan the
// context again at every layer.
package jsonscan

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ErrSyntax is wrapped by every error of this package.
var ErrSyntax = errors.New("invalid JSON")

func syntaxError(i int, what string) error {
	return fmt.Errorf("%w at offset %d: %s", ErrSyntax, i, what)
}

// Object calls fn for each member of the JSON object data, in order, with
// the member's key and its raw value (a sub-slice of data). Values are
// checked for structure (balanced brackets, terminated strings, valid
// literals) but not decoded; decode the ones you need with encoding/json.
func Object(data []byte, fn func(key string, value []byte) error) error {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return syntaxError(i, "want an object")
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		if j := skipSpace(data, i+1); j != len(data) {
			return syntaxError(j, "data after the object")
		}
		return nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return syntaxError(i, "want a member name")
		}
		end, err := skipString(data, i)
		if err != nil {
			return err
		}
		key, err := unquote(data[i:end])
		if err != nil {
			return err
		}
		i = skipSpace(data, end)
		if i >= len(data) || data[i] != ':' {
			return syntaxError(i, "want ':'")
		}
		i = skipSpace(data, i+1)
		vend, err := skipValue(data, i, 0)
		if err != nil {
			return err
		}
		if err := fn(key, data[i:vend]); err != nil {
			return err
		}
		i = skipSpace(data, vend)
		if i >= len(data) {
			return syntaxError(i, "unterminated object")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			if j := skipSpace(data, i+1); j != len(data) {
				return syntaxError(j, "data after the object")
			}
			return nil
		default:
			return syntaxError(i, "want ',' or '}'")
		}
	}
}

// String returns the value of a JSON string.
func String(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", syntaxError(0, "want a string")
	}
	return unquote(raw)
}

// Uint returns the value of a JSON number that is a non-negative integer.
func Uint(raw []byte) (uint64, error) {
	n, err := strconv.ParseUint(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: want a non-negative integer, got %.40s", ErrSyntax, raw)
	}
	return n, nil
}

// Int returns the value of a JSON number that is an integer.
func Int(raw []byte) (int64, error) {
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: want an integer, got %.40s", ErrSyntax, raw)
	}
	return n, nil
}

// IsNull reports whether raw is empty or the literal null.
func IsNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }

func unquote(q []byte) (string, error) {
	inner := q[1 : len(q)-1]
	for _, c := range inner {
		if c == '\\' || c < 0x20 || c >= 0x80 {
			var s string
			if err := json.Unmarshal(q, &s); err != nil {
				return "", fmt.Errorf("%w: %v", ErrSyntax, err)
			}
			return s, nil
		}
	}
	return string(inner), nil
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// maxDepth bounds nesting, so hostile input cannot exhaust the stack.
const maxDepth = 10000

// skipValue returns the end of the value starting at i.
func skipValue(data []byte, i, depth int) (int, error) {
	if i >= len(data) {
		return i, syntaxError(i, "want a value")
	}
	switch c := data[i]; {
	case c == '"':
		return skipString(data, i)
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return i, syntaxError(i, "nested too deeply")
		}
		return skipContainer(data, i, depth+1)
	case c == 't':
		return skipLiteral(data, i, "true")
	case c == 'f':
		return skipLiteral(data, i, "false")
	case c == 'n':
		return skipLiteral(data, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(data) {
			switch d := data[j]; {
			case d >= '0' && d <= '9', d == '.', d == 'e', d == 'E', d == '+', d == '-':
				j++
				continue
			}
			break
		}
		return j, nil
	}
	return i, syntaxError(i, fmt.Sprintf("unexpected %q", data[i]))
}

func skipLiteral(data []byte, i int, lit string) (int, error) {
	if len(data)-i < len(lit) || string(data[i:i+len(lit)]) != lit {
		return i, syntaxError(i, "invalid literal")
	}
	return i + len(lit), nil
}

func skipString(data []byte, i int) (int, error) {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return i, syntaxError(i, "unterminated string")
}

func skipContainer(data []byte, i, depth int) (int, error) {
	closer := byte('}')
	isObject := data[i] == '{'
	if !isObject {
		closer = ']'
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == closer {
		return i + 1, nil
	}
	for {
		if isObject {
			if i >= len(data) || data[i] != '"' {
				return i, syntaxError(i, "want a member name")
			}
			end, err := skipString(data, i)
			if err != nil {
				return i, err
			}
			i = skipSpace(data, end)
			if i >= len(data) || data[i] != ':' {
				return i, syntaxError(i, "want ':'")
			}
			i = skipSpace(data, i+1)
		}
		end, err := skipValue(data, i, depth)
		if err != nil {
			return i, err
		}
		i = skipSpace(data, end)
		if i >= len(data) {
			return i, syntaxError(i, "unterminated container")
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case closer:
			return i + 1, nil
		default:
			return i, syntaxError(i, "want ',' or a closing bracket")
		}
	}
}
