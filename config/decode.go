package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// The decoder turns a yaml.Node tree into Go values strictly: an unknown key,
// a duplicate key or a value of the wrong type is an error that names the
// file, the line and the key path. It records the line of every key it
// decodes so that later validation can point at the file too. It keeps going
// after an error so that one run reports every problem.
//
// Supported Go types: structs (fields by their yaml tag), map[string]T,
// slices, pointers, strings, bools, integers, floats, and `any` (decoded
// into map[string]any, []any, string, int, float64, bool or nil). Types
// implementing nodeDecoder decode themselves.

const (
	maxDecodeDepth = 200     // nesting depth, which also stops alias cycles
	maxDecodeNodes = 100_000 // nodes decoded in total, which stops alias bombs
)

type decoder struct {
	file   string
	errs   ErrorList
	lines  map[string]int
	origin map[*yaml.Node]string // value before ${VAR} substitution
	bad    map[string]bool       // key paths that already have an error

	depth   int
	nodes   int
	stopped bool
}

func newDecoder(file string) *decoder {
	return &decoder{
		file:   file,
		lines:  make(map[string]int),
		origin: make(map[*yaml.Node]string),
		bad:    make(map[string]bool),
	}
}

// nodeDecoder is implemented by types with their own YAML forms (PluginEntry
// accepts a string or a mapping). decodeNode reports problems through d.
type nodeDecoder interface {
	decodeNode(d *decoder, n *yaml.Node, path string)
}

// errorf records a problem at node n (may be nil) unless path, or a key path
// above it, already has one: a single mistake is reported once.
func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	if d.isBad(path) {
		return
	}
	line := 0
	if n != nil {
		line = n.Line
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
	d.bad[path] = true
}

// isBad reports whether path or a key path above it already has an error.
// It looks up path's ancestors rather than scanning every bad path, so a
// file with many problems is checked in linear time.
func (d *decoder) isBad(path string) bool {
	for p := path; ; p = parentPath(p) {
		if d.bad[p] {
			return true
		}
		if p == "" {
			return false
		}
	}
}

// deref follows alias nodes to their anchors.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode; i++ {
		if i > maxDecodeDepth {
			return nil
		}
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// enter guards against runaway recursion through aliases; it returns false
// (after recording an error once) when decoding must stop.
func (d *decoder) enter(n *yaml.Node, path string) bool {
	if d.stopped {
		return false
	}
	d.nodes++
	if d.depth >= maxDecodeDepth || d.nodes > maxDecodeNodes {
		d.stopped = true
		for len(path) > 80 { // an alias cycle makes very long paths
			path = parentPath(path)
		}
		d.errs = append(d.errs, &Error{File: d.file, Line: n.Line, Path: path,
			Msg: "document is nested too deeply or expands too many aliases"})
		d.bad[path] = true
		return false
	}
	d.depth++
	return true
}

// decode decodes node n into v, which must be settable.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if !d.enter(n, path) {
		return
	}
	defer func() { d.depth-- }()
	if n = deref(n); n == nil {
		d.errorf(nil, path, "unresolvable alias")
		return
	}
	if v.CanAddr() {
		if nd, ok := v.Addr().Interface().(nodeDecoder); ok {
			nd.decodeNode(d, n, path)
			return
		}
	}
	if isNull(n) {
		v.SetZero()
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		d.decodeSlice(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.typeError(n, path, "a string")
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.typeError(n, path, "true or false")
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			d.typeError(n, path, "an integer")
			return
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var u uint64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&u) != nil || v.OverflowUint(u) {
			d.typeError(n, path, "a non-negative integer")
			return
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		var f float64
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || tag != "!!int" && tag != "!!float" || n.Decode(&f) != nil {
			d.typeError(n, path, "a number")
			return
		}
		v.SetFloat(f)
	case reflect.Interface:
		if x := d.decodeAny(n, path); x != nil {
			v.Set(reflect.ValueOf(x))
		}
	default:
		// A programming error in the schema, not in the file.
		panic(fmt.Sprintf("config: cannot decode into %s", v.Type()))
	}
}

type pair struct{ key, val *yaml.Node }

// pairs returns the key/value pairs of mapping n, with "<<" merge keys
// expanded (keys written in n win over merged ones; among merged mappings the
// first wins). It reports non-scalar and duplicate keys.
func (d *decoder) pairs(n *yaml.Node, path string) []pair {
	var out, merged []pair
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			d.errorf(n.Content[i], path, "mapping keys must be strings")
			continue
		}
		if isMergeKey(k) {
			merged = append(merged, d.mergeSources(v, path)...)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.errorf(k, JoinKey(path, k.Value), "duplicate key (first defined at line %d)", first.Line)
			continue
		}
		seen[k.Value] = k
		out = append(out, pair{k, v})
	}
	for _, p := range merged {
		if _, dup := seen[p.key.Value]; !dup {
			seen[p.key.Value] = p.key
			out = append(out, p)
		}
	}
	return out
}

func (d *decoder) mergeSources(v *yaml.Node, path string) []pair {
	if !d.enter(v, path) {
		return nil
	}
	defer func() { d.depth-- }()
	src := deref(v)
	switch {
	case src != nil && src.Kind == yaml.MappingNode:
		return d.pairs(src, path)
	case src != nil && src.Kind == yaml.SequenceNode:
		var out []pair
		for _, item := range src.Content {
			m := deref(item)
			if m == nil || m.Kind != yaml.MappingNode {
				d.errorf(item, path, "a merge (<<) list may only hold mappings")
				continue
			}
			out = append(out, d.pairs(m, path)...)
		}
		return out
	default:
		d.errorf(v, path, "a merge (<<) value must be a mapping or a list of mappings")
		return nil
	}
}

// fieldsOf maps yaml key names to struct field indexes.
func fieldsOf(t reflect.Type) (map[string]int, []string) {
	idx := make(map[string]int)
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || name == "" {
			continue
		}
		idx[name] = i
		names = append(names, name)
	}
	return idx, names
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, "a mapping")
		return
	}
	idx, names := fieldsOf(v.Type())
	for _, p := range d.pairs(n, path) {
		kp := JoinKey(path, p.key.Value)
		d.lines[kp] = p.key.Line
		i, ok := idx[p.key.Value]
		if !ok {
			d.errorf(p.key, kp, "unknown key%s", suggest(p.key.Value, names))
			continue
		}
		d.decode(p.val, v.Field(i), kp)
	}
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.typeError(n, path, "a mapping")
		return
	}
	t := v.Type()
	if t.Key().Kind() != reflect.String {
		panic(fmt.Sprintf("config: cannot decode into %s", t))
	}
	m := reflect.MakeMap(t)
	for _, p := range d.pairs(n, path) {
		kp := JoinKey(path, p.key.Value)
		d.lines[kp] = p.key.Line
		elem := reflect.New(t.Elem()).Elem()
		d.decode(p.val, elem, kp)
		m.SetMapIndex(reflect.ValueOf(p.key.Value).Convert(t.Key()), elem)
	}
	v.Set(m)
}

func (d *decoder) decodeSlice(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.SequenceNode {
		d.typeError(n, path, "a list")
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		ip := JoinIndex(path, i)
		d.lines[ip] = item.Line
		d.decode(item, s.Index(i), ip)
	}
	v.Set(s)
}

// decodeAny decodes free-form data (plugin settings).
func (d *decoder) decodeAny(n *yaml.Node, path string) any {
	if !d.enter(n, path) {
		return nil
	}
	defer func() { d.depth-- }()
	if n = deref(n); n == nil {
		d.errorf(nil, path, "unresolvable alias")
		return nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any)
		for _, p := range d.pairs(n, path) {
			kp := JoinKey(path, p.key.Value)
			d.lines[kp] = p.key.Line
			m[p.key.Value] = d.decodeAny(p.val, kp)
		}
		return m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, item := range n.Content {
			ip := JoinIndex(path, i)
			d.lines[ip] = item.Line
			s[i] = d.decodeAny(item, ip)
		}
		return s
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			return n.Value
		}
		var x any
		if err := n.Decode(&x); err != nil {
			d.errorf(n, path, "cannot decode %s value %s", n.ShortTag(), d.quote(n))
			return nil
		}
		return x
	default:
		d.typeError(n, path, "a value")
		return nil
	}
}

func (d *decoder) typeError(n *yaml.Node, path, want string) {
	d.errorf(n, path, "expected %s, got %s", want, d.describe(n))
}

// describe names what node n holds, for type errors.
func (d *decoder) describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return d.quote(n)
	default:
		return "nothing"
	}
}

// quote shows a scalar as written in the file: a value that came from ${VAR}
// substitution is shown as its reference, never as the (possibly secret)
// substituted text.
func (d *decoder) quote(n *yaml.Node) string {
	if orig, ok := d.origin[n]; ok {
		return truncateQuote(orig) + " (after substitution)"
	}
	return truncateQuote(n.Value)
}

func truncateQuote(s string) string {
	const limit = 60
	if len(s) > limit {
		s = s[:limit] + "…"
	}
	return strconv.Quote(s)
}

// suggest returns a hint for an unknown key: the closest known key when one
// is close, else the list of known keys.
func suggest(key string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := editDistance(strings.ToLower(key), k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	sorted := slices.Clone(known)
	slices.Sort(sorted)
	return " (known keys: " + strings.Join(sorted, ", ") + ")"
}

// editDistance is the optimal-string-alignment distance: insertions,
// deletions, substitutions and swaps of adjacent characters cost 1.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
