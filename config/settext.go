package config

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Setting one value in config.yaml's text (!config from chat).
//
// SetValue changes the text the way a person editing the file would: the
// one value is rewritten where it is written, or a new key line is added
// to its mapping; every other byte (comments, key order, quoting, blank
// lines, ${VAR} references) stays. It is built on the node positions of
// text.go (parseText, span).

// SetValue returns data, the text of a configuration file, with the value
// at path set to value and everything else byte for byte as it was. path
// is a list of mapping keys from the top of the document
// (["agents", "helper", "model"]); every key but the last must exist and
// hold a block mapping; the last one, when missing, is added as a new
// line at the end of its mapping with the indentation of the mapping's
// keys. value is a string, a []string, a bool or an int:
//
//   - a string replaces a scalar, keeping its quoting when it can: plain
//     stays plain if the new value reads back as the same string, else it
//     is double-quoted; a string with newlines is written as a literal
//     block (|, |- or |+ as its trailing newlines need) indented two
//     spaces more than its key;
//   - a []string replaces a list: a flow list ([a, b]) or a scalar becomes
//     a flow list, a block list (- a) stays a block list at the same
//     indentation (comments between its items are dropped); an empty
//     list is written [].
//
// Values written as aliases (*x), flow mappings ({…}) on the way, and
// values the result would change elsewhere (an anchored value other keys
// alias) are refused with an error: edit such a file by hand. SetValue
// reads the result back and fails rather than return text that does not
// decode to the original with just that value changed. It does not check
// that the result is a valid configuration: run Check.
func SetValue(data []byte, path []string, value any) ([]byte, error) {
	if len(path) == 0 {
		return nil, errors.New("config: no key path to set")
	}
	switch value.(type) {
	case string, []string, bool, int:
	default:
		return nil, fmt.Errorf("config: cannot write a value of type %T", value)
	}
	doc, err := parseText(data)
	if err != nil {
		return nil, err
	}
	if doc.root == nil {
		return nil, errors.New("config: the file is empty")
	}
	where := func(i int) string { return strings.Join(path[:i+1], ".") }
	m := doc.root
	for i, key := range path[:len(path)-1] {
		if m.Kind != yaml.MappingNode {
			return nil, fmt.Errorf("config: cannot set %s: %s is not a mapping", strings.Join(path, "."), where(i-1))
		}
		_, v, err := lookupKey(m, key)
		if err != nil {
			return nil, fmt.Errorf("config: cannot set %s: %s: %w", strings.Join(path, "."), where(i), err)
		}
		if v == nil {
			return nil, fmt.Errorf("config: cannot set %s: %s is not in the file", strings.Join(path, "."), where(i))
		}
		m = v
	}
	full := strings.Join(path, ".")
	if m.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config: cannot set %s: its parent is not a mapping", full)
	}
	if m.Style&yaml.FlowStyle != 0 {
		return nil, fmt.Errorf("config: cannot set %s: its parent is written as a flow mapping ({…}); edit the file by hand", full)
	}
	nl := "\n"
	if bytes.Contains(data, []byte("\r\n")) {
		nl = "\r\n"
	}
	last := path[len(path)-1]
	k, v, err := lookupKey(m, last)
	if err != nil {
		return nil, fmt.Errorf("config: cannot set %s: %w", full, err)
	}
	var reps []replacement
	if v == nil {
		r, err := doc.insertKey(m, last, value, nl)
		if err != nil {
			return nil, fmt.Errorf("config: cannot set %s: %w", full, err)
		}
		reps = append(reps, r...)
	} else {
		r, err := doc.replaceValue(k, v, value, nl)
		if err != nil {
			return nil, fmt.Errorf("config: cannot set %s: %w", full, err)
		}
		reps = append(reps, r...)
	}
	out := applyReplacements(data, reps)
	if err := checkSet(data, out, path, value); err != nil {
		return nil, fmt.Errorf("config: cannot set %s: %w", full, err)
	}
	return out, nil
}

// lookupKey returns the key and value nodes of key in mapping m, nil when
// m has no such key (merged keys do not count: a key added next to a
// merge overrides it).
func lookupKey(m *yaml.Node, key string) (k, v *yaml.Node, err error) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		kn := m.Content[i]
		if kn.Kind != yaml.ScalarNode || isMergeKey(kn) || kn.Value != key {
			continue
		}
		if k != nil {
			return nil, nil, fmt.Errorf("the key %s is written twice", key)
		}
		k, v = kn, m.Content[i+1]
	}
	if v != nil && v.Kind == yaml.AliasNode {
		return nil, nil, fmt.Errorf("the value is written as an alias (*%s); edit the file by hand", v.Value)
	}
	return k, v, nil
}

// replaceValue returns the replacements that write value in place of v,
// the value of key k.
func (d *textDoc) replaceValue(k, v *yaml.Node, value any, nl string) ([]replacement, error) {
	keyIndent := k.Column - 1
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Value == "" && v.Style == 0 && v.ShortTag() == "!!null" {
			// An empty value ("key:"): write after the colon.
			at, err := d.afterColon(k)
			if err != nil {
				return nil, err
			}
			text, extra := d.scalarText(value, 0, keyIndent, nl, false)
			if end := d.lineEnd(at); end != at {
				return []replacement{{span: span{at, at}, text: []byte(" " + text)}, {span: span{end, end}, text: []byte(extra)}}, nil
			}
			return []replacement{{span: span{at, at}, text: []byte(" " + text + extra)}}, nil
		}
		sp, err := d.span(v)
		if err != nil {
			return nil, err
		}
		block := v.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0
		text, extra := d.scalarText(value, v.Style, keyIndent, nl, block)
		if block {
			return []replacement{{span: sp, text: []byte(text + extra)}}, nil
		}
		end := d.lineEnd(sp.end)
		return []replacement{{span: sp, text: []byte(text)}, {span: span{end, end}, text: []byte(extra)}}, nil
	case yaml.SequenceNode:
		list, ok := value.([]string)
		if !ok {
			return nil, errors.New("the file has a list there; give a list")
		}
		start, ok := d.offset(v.Line, v.Column)
		if !ok {
			return nil, fmt.Errorf("cannot find the list at line %d in the text", v.Line)
		}
		if v.Style&yaml.FlowStyle != 0 {
			end, err := d.flowEnd(start)
			if err != nil {
				return nil, err
			}
			return []replacement{{span: span{start, end}, text: []byte(flowList(list))}}, nil
		}
		// A block list: its items from the first "-" to the end of the
		// last item, at the same indentation.
		if len(v.Content) == 0 {
			return nil, errors.New("an empty block list")
		}
		lastItem := v.Content[len(v.Content)-1]
		if lastItem.Kind != yaml.ScalarNode {
			return nil, errors.New("the list holds more than names; edit the file by hand")
		}
		sp, err := d.span(lastItem)
		if err != nil {
			return nil, err
		}
		if len(list) == 0 {
			return []replacement{{span: span{start, sp.end}, text: []byte("[]")}}, nil
		}
		indent := strings.Repeat(" ", v.Column-1)
		var b strings.Builder
		for i, s := range list {
			if i > 0 {
				b.WriteString(nl + indent)
			}
			b.WriteString("- " + plainOrQuoted(s, false))
		}
		return []replacement{{span: span{start, sp.end}, text: []byte(b.String())}}, nil
	}
	return nil, errors.New("the file has a mapping there; edit the file by hand")
}

// insertKey returns the replacement that adds "key: value" as the last
// line of block mapping m.
func (d *textDoc) insertKey(m *yaml.Node, key string, value any, nl string) ([]replacement, error) {
	if len(m.Content) < 2 {
		return nil, errors.New("its mapping is empty")
	}
	if !plainOK(key, false) {
		return nil, fmt.Errorf("the key %q needs quoting; edit the file by hand", key)
	}
	indent := m.Content[0].Column - 1
	end, err := d.endOf(m, 0)
	if err != nil {
		return nil, err
	}
	at := d.lineEnd(end)
	text, extra := d.scalarText(value, 0, indent, nl, false)
	line := nl + strings.Repeat(" ", indent) + key + ": " + text + extra
	return []replacement{{span: span{at, at}, text: []byte(line)}}, nil
}

// scalarText is how value is written as the value of a key indented by
// keyIndent, in place of a scalar of style old: text goes where the value
// was, extra (block scalar content lines, each starting with nl) after
// the end of its line. block says the old value was a block scalar,
// whose span ends with its content.
func (d *textDoc) scalarText(value any, old yaml.Style, keyIndent int, nl string, block bool) (text, extra string) {
	switch v := value.(type) {
	case []string:
		return flowList(v), ""
	case bool:
		return strconv.FormatBool(v), ""
	case int:
		return strconv.Itoa(v), ""
	}
	s := value.(string)
	if strings.Contains(s, "\n") && literalOK(s) {
		return literalBlock(s, keyIndent+2, nl)
	}
	switch {
	case old&yaml.SingleQuotedStyle != 0 && singleOK(s):
		return "'" + strings.ReplaceAll(s, "'", "''") + "'", ""
	case old&yaml.DoubleQuotedStyle != 0:
		return strconv.Quote(s), ""
	}
	return plainOrQuoted(s, false), ""
}

// literalOK reports whether s can be written as a literal block scalar:
// printable text, tabs and newlines only.
func literalOK(s string) bool {
	for _, r := range s {
		if r == '\n' || r == '\t' {
			continue
		}
		if r < 0x20 || r == 0x7f || r == 0xfeff || !strconv.IsPrint(r) && r != ' ' {
			return false
		}
	}
	return true
}

// literalBlock writes s as a literal block: the header ("|", "|-" or
// "|+", with an indentation indicator when the first line starts with a
// space) and the content lines, indented by indent.
func literalBlock(s string, indent int, nl string) (header, content string) {
	body := strings.TrimSuffix(s, "\n")
	header = "|"
	switch {
	case !strings.HasSuffix(s, "\n"):
		header = "|-"
	case strings.HasSuffix(body, "\n"):
		header = "|+"
	}
	lines := strings.Split(body, "\n")
	for _, l := range lines {
		if l != "" {
			if strings.HasPrefix(l, " ") {
				header = "|2" + header[1:]
			}
			break
		}
	}
	pad := strings.Repeat(" ", indent)
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(nl)
		if l != "" {
			b.WriteString(pad + l)
		}
	}
	return header, b.String()
}

func singleOK(s string) bool { return !strings.ContainsAny(s, "\n\r\t") && literalOK(s) }

// plainOrQuoted writes s plain when it reads back as the same string,
// else double-quoted.
func plainOrQuoted(s string, flow bool) string {
	if plainOK(s, flow) {
		return s
	}
	return strconv.Quote(s)
}

// plainOK reports whether s written plain reads back as the string s (in
// a flow list when flow).
func plainOK(s string, flow bool) bool {
	if s == "" || strings.ContainsAny(s, "\n\r\t\"'") || s != strings.TrimSpace(s) {
		return false
	}
	var doc yaml.Node
	src := "k: " + s
	if flow {
		src = "k: [" + s + "]"
	}
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil || len(doc.Content) != 1 {
		return false
	}
	m := doc.Content[0]
	if m.Kind != yaml.MappingNode || len(m.Content) != 2 {
		return false
	}
	n := m.Content[1]
	if flow {
		if n.Kind != yaml.SequenceNode || len(n.Content) != 1 {
			return false
		}
		n = n.Content[0]
	}
	return n.Kind == yaml.ScalarNode && n.Style == 0 && n.ShortTag() == "!!str" && n.Value == s
}

// flowList writes list as a flow sequence: "[a, b]".
func flowList(list []string) string {
	items := make([]string, len(list))
	for i, s := range list {
		items[i] = plainOrQuoted(s, true)
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// afterColon returns the offset just after the ":" that follows key k.
func (d *textDoc) afterColon(k *yaml.Node) (int, error) {
	sp, err := d.span(k)
	if err != nil {
		return 0, err
	}
	i := sp.end
	for i < len(d.data) && isBlank(d.data[i]) {
		i++
	}
	if i >= len(d.data) || d.data[i] != ':' {
		return 0, fmt.Errorf("cannot find the colon after the key at line %d", k.Line)
	}
	return i + 1, nil
}

// endOf returns the offset where node n's text ends (before a trailing
// comment on its last line).
func (d *textDoc) endOf(n *yaml.Node, depth int) (int, error) {
	if depth > maxDecodeDepth {
		return 0, errors.New("the document is nested too deeply")
	}
	switch n.Kind {
	case yaml.ScalarNode:
		sp, err := d.span(n)
		return sp.end, err
	case yaml.AliasNode:
		off, ok := d.offset(n.Line, n.Column)
		if !ok {
			return 0, fmt.Errorf("cannot find the alias at line %d", n.Line)
		}
		end := off + 1
		for end < len(d.data) && !isBlank(d.data[end]) && d.data[end] != '\n' && d.data[end] != '\r' {
			end++
		}
		return end, nil
	}
	if n.Style&yaml.FlowStyle != 0 {
		off, ok := d.offset(n.Line, n.Column)
		if !ok {
			return 0, fmt.Errorf("cannot find the value at line %d", n.Line)
		}
		return d.flowEnd(off)
	}
	if len(n.Content) == 0 {
		return 0, fmt.Errorf("an empty collection at line %d", n.Line)
	}
	last := n.Content[len(n.Content)-1]
	if n.Kind == yaml.MappingNode && last.Kind == yaml.ScalarNode && last.Value == "" && last.Style == 0 && last.ShortTag() == "!!null" {
		// "key:" with no value: the end of its line's colon.
		return d.afterColon(n.Content[len(n.Content)-2])
	}
	return d.endOf(last, depth+1)
}

// flowEnd returns the offset after the "]" or "}" that closes the flow
// collection opening at off.
func (d *textDoc) flowEnd(off int) (int, error) {
	data := d.data
	if off >= len(data) || (data[off] != '[' && data[off] != '{') {
		return 0, fmt.Errorf("no flow collection at offset %d", off)
	}
	depth := 0
	for i := off; i < len(data); i++ {
		switch c := data[i]; c {
		case '[', '{':
			depth++
		case ']', '}':
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '\'':
			for i++; i < len(data); i++ {
				if data[i] == '\'' {
					if i+1 < len(data) && data[i+1] == '\'' {
						i++
						continue
					}
					break
				}
			}
		case '#':
			if isBlank(data[i-1]) || data[i-1] == '\n' {
				for i < len(data) && data[i] != '\n' {
					i++
				}
			}
		}
	}
	return 0, errors.New("a flow collection that does not close")
}

// checkSet reads out back and checks that it decodes to what data
// decodes to with the value at path set to value, and nothing else
// changed.
func checkSet(data, out []byte, path []string, value any) error {
	var before, after any
	if err := yaml.Unmarshal(data, &before); err != nil {
		return fmt.Errorf("the file does not decode: %w", err)
	}
	if err := yaml.Unmarshal(out, &after); err != nil {
		return fmt.Errorf("the edit broke the YAML (an unusual form; please report this): %w", err)
	}
	want := value
	if list, ok := value.([]string); ok {
		items := make([]any, len(list))
		for i, s := range list {
			items[i] = s
		}
		want = items
	}
	m, ok := before.(map[string]any)
	for _, key := range path[:len(path)-1] {
		if !ok {
			return errors.New("the file's structure is unusual (please report this)")
		}
		m, ok = m[key].(map[string]any)
	}
	if !ok {
		return errors.New("the file's structure is unusual (please report this)")
	}
	m[path[len(path)-1]] = want
	if !reflect.DeepEqual(before, after) {
		return errors.New("the edit would change more than this value (an anchored value used elsewhere, or an unusual form); edit the file by hand")
	}
	return nil
}
