package config

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Environment substitution.
//
// Every string value in the file (not mapping keys) may reference environment
// variables:
//
//	${NAME}          the value of NAME; an error when NAME is not set
//	${NAME:-default} the value of NAME, or default when NAME is unset or empty
//	$${              a literal "${" (no substitution)
//
// NAME is [A-Za-z_][A-Za-z0-9_]*. The default runs to the first "}" and is
// used as written. A "$" that does not start one of these forms is kept.
// Substitution runs on the parsed node tree before decoding, so positions in
// error messages refer to the file as written. An unquoted value is typed
// after substitution (so "timeout_ms: ${T:-500}" is an integer); a quoted
// value stays a string.

// substituter replaces ${VAR} references in the scalar values of a node tree.
type substituter struct {
	lookup  func(string) (string, bool)
	file    string
	errs    ErrorList
	origin  map[*yaml.Node]string // value before substitution, for messages
	fromEnv map[string]bool       // key paths whose value came from the environment
	// envValues are the values the environment supplied, with the text
	// they were written as, so messages can show the reference instead.
	envValues map[string]string
	bad       map[string]bool // key paths whose value could not be substituted
}

func (s *substituter) walk(n *yaml.Node, path string) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			s.walk(c, path)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if isMergeKey(k) {
				s.walk(v, path)
				continue
			}
			s.walk(v, JoinKey(path, k.Value))
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			s.walk(c, JoinIndex(path, i))
		}
	case yaml.ScalarNode:
		s.scalar(n, path)
	}
	// Alias nodes are substituted where their anchor is defined.
}

func (s *substituter) scalar(n *yaml.Node, path string) {
	if !strings.Contains(n.Value, "$") || n.ShortTag() != "!!str" {
		return
	}
	out, used, missing, err := expandEnv(n.Value, s.lookup, func(name, val string) {
		// Each variable's value on its own too: a message may show part
		// of the substituted text (a path cleaned, a URL's host).
		if len(val) >= minMaskedLen {
			if _, ok := s.envValues[val]; !ok {
				s.envValues[val] = "${" + name + "}"
			}
		}
	})
	for _, name := range missing {
		s.errs = append(s.errs, &Error{
			File: s.file, Line: n.Line, Path: path,
			Msg: fmt.Sprintf("environment variable %s is not set", name),
			Err: ErrEnvNotSet,
		})
		s.bad[path] = true
	}
	if err != nil {
		s.errs = append(s.errs, &Error{File: s.file, Line: n.Line, Path: path, Msg: err.Error()})
		s.bad[path] = true
		return
	}
	if out == n.Value {
		return
	}
	s.origin[n] = n.Value
	if used {
		s.fromEnv[path] = true
		if len(out) >= minMaskedLen {
			s.envValues[out] = n.Value
		}
	}
	n.Value = out
	if n.Style == 0 {
		// Plain scalar: let YAML type the substituted text, except that an
		// empty result stays an empty string rather than becoming null.
		n.Tag = ""
		if out == "" {
			n.Tag = "!!str"
		}
	}
}

// expandEnv substitutes the references in s. used reports whether the
// environment supplied any of the text (a default written in the file does not
// count); missing lists variables that are unset and have no default (each is
// replaced by ""). seen, when set, is called with each variable the
// environment supplied and its value.
func expandEnv(s string, lookup func(string) (string, bool), seen func(name, val string)) (out string, used bool, missing []string, err error) {
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' {
			b.WriteByte(c)
			i++
			continue
		}
		if strings.HasPrefix(s[i:], "$${") {
			b.WriteString("${")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "${") {
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", false, nil, fmt.Errorf("unterminated variable reference %q (write $${ for a literal ${)", s[i:])
		}
		inner := s[i+2 : i+2+end]
		i += 2 + end + 1
		name, rest := splitVarName(inner)
		if name == "" || (rest != "" && !strings.HasPrefix(rest, ":-")) {
			return "", false, nil, fmt.Errorf("invalid variable reference %q: want ${NAME} or ${NAME:-default}", "${"+inner+"}")
		}
		val, ok := lookup(name)
		switch {
		case rest != "" && (!ok || val == ""):
			val = rest[2:]
		case !ok:
			missing = append(missing, name)
		default:
			used = used || val != ""
			if seen != nil && val != "" {
				seen(name, val)
			}
		}
		b.WriteString(val)
	}
	return b.String(), used, missing, nil
}

// splitVarName splits "NAME:-x" into "NAME" and ":-x". name is "" when inner
// does not start with a valid variable name.
func splitVarName(inner string) (name, rest string) {
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		letter := c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
		if letter || i > 0 && c >= '0' && c <= '9' {
			continue
		}
		return inner[:i], inner[i:]
	}
	return inner, ""
}

func isMergeKey(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Value == "<<" && (n.Tag == "" || n.Tag == "!" || n.Tag == "!!merge" || n.Tag == "tag:yaml.org,2002:merge")
}

// minMaskedLen is the shortest value from the environment that messages
// mask: shorter ones (a port, a count) are no secret and would mask
// unrelated text.
const minMaskedLen = 4

// newEnvMasker returns a replacer that replaces in a message every value
// that came from the environment (as written, or quoted as %q prints it)
// with the ${VAR} text it was written as, so no configuration message shows
// what ${VAR} held; nil when there is nothing to mask. It is built once per
// configuration: one pass over a message costs the same however many
// values there are (replacing them one by one made a file with thousands
// of ${VAR} values and as many errors quadratic).
func newEnvMasker(values map[string]string) *strings.Replacer {
	if len(values) == 0 {
		return nil
	}
	type pair struct{ old, new string }
	pairs := make([]pair, 0, 2*len(values))
	for value, written := range values {
		pairs = append(pairs, pair{strconv.Quote(value), strconv.Quote(written)}, pair{value, written})
	}
	// At one position the replacer takes the first matching pair: longer
	// values first, so a value that contains another is masked whole.
	slices.SortFunc(pairs, func(a, b pair) int {
		return cmp.Or(cmp.Compare(len(b.old), len(a.old)), strings.Compare(a.old, b.old))
	})
	args := make([]string, 0, 2*len(pairs))
	for _, p := range pairs {
		args = append(args, p.old, p.new)
	}
	return strings.NewReplacer(args...)
}

// maskEnv masks msg with m (see newEnvMasker); a nil m leaves it alone.
func maskEnv(msg string, m *strings.Replacer) string {
	if m == nil {
		return msg
	}
	return m.Replace(msg)
}
