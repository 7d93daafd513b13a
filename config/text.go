package config

import (
	"bytes"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Editing config.yaml as text (the operator console).
//
// The console edits the file's text, never a re-marshalled Config, so that
// comments, key order and formatting stay. A save goes:
//
//	data, _ := os.ReadFile(path)               // when the page loads
//	shown, _ := config.MaskText(data)          // secrets masked for display
//	hash := config.Hash(data)                  // kept by the page
//	…
//	current, _ := os.ReadFile(path)            // when the page saves
//	if config.Hash(current) != hash { stale }  // (WriteFile checks it too)
//	diff := config.DiffText(shown, typed)      // preview: what was shown
//	                                           // against what was typed
//	edited, err := config.Unmask(typed, current) // the real secrets back
//	err = config.Check(edited, path)           // errors at config.yaml:LINE
//	err = config.WriteFile(path, edited, hash) // atomic, refused when stale
//
// then the server reloads.

// RedactedValue is what MaskText writes instead of a secret, the same text
// a Secret prints.
const RedactedValue = redacted

// Check runs on data, the text of a configuration file, every check a load
// or reload of the configuration runs in this package: YAML syntax, ${VAR}
// substitution (from the process environment, or WithLookupEnv), strict
// decoding, defaults and validation. It has no side effects: Load is
// readFile plus Parse, and Parse reads no files and resolves relative paths
// only as strings. path names the file in messages and is the directory
// relative paths resolve against; give it as the server loads it (its
// Config.Path) so that the checks match.
//
// The error is an ErrorList of *Error values, each with file:line and key
// path, secrets masked: "config.yaml:12: models.gpt.provider: must be …".
//
// What a reload checks beyond this package is not included: plugin
// manifests, hook names in overrides and agents' tool names are checked
// where the plugins are loaded.
func Check(data []byte, path string, opts ...Option) error {
	_, err := Parse(data, path, opts...)
	return err
}

// SecretKeyPaths returns the key paths whose values MaskText masks, derived
// from the Secret-typed fields of Config: "models.*.api_key",
// "mcp_servers.*.headers.*", … ("*" stands for any map key, "[*]" for
// any index). Plugin settings are free-form: there, values under a key that
// looks secret (see Redacted) are masked too, which the last entry,
// "plugins[*].settings.**", stands for.
func SecretKeyPaths() []string {
	var out []string
	secretType := reflect.TypeFor[Secret]()
	var walk func(t reflect.Type, path string, depth int)
	walk = func(t reflect.Type, path string, depth int) {
		if depth > 20 {
			return
		}
		switch t.Kind() {
		case reflect.Pointer:
			walk(t.Elem(), path, depth+1)
		case reflect.Struct:
			idx, names := fieldsOf(t)
			for _, name := range names {
				walk(t.Field(idx[name]).Type, JoinKey(path, name), depth+1)
			}
		case reflect.Map:
			if t.Elem().Kind() == reflect.Interface {
				out = append(out, path+".**")
				return
			}
			walk(t.Elem(), path+".*", depth+1)
		case reflect.Slice:
			walk(t.Elem(), path+"[*]", depth+1)
		case reflect.Interface:
			out = append(out, path+".**")
		case reflect.String:
			if t == secretType {
				out = append(out, path)
			}
		}
	}
	walk(reflect.TypeFor[Config](), "", 0)
	return out
}

// MaskText returns data, the text of a configuration file, with the value
// of every secret replaced by RedactedValue ("REDACTED") and everything
// else (comments, key order, quoting, blank lines) byte for byte as it was.
// Secrets are the values of Secret-typed fields (http.admin_token,
// models.*.api_key, matrix.registration.*, account tokens and passwords,
// database.uri, mcp_servers.*.headers.*: see SecretKeyPaths), and in
// plugin settings every value under a key that looks secret (key, token,
// secret, password, passwd, credential). A value that uses a ${VAR}
// reference is shown as written: the reference names the secret, it is
// not one. An empty value stays empty (an unset secret is visible as
// unset). A masked value keeps its quotes ("REDACTED" stays quoted); a
// block scalar (| or >) becomes a plain REDACTED.
//
// The text must be valid YAML (the error is an ErrorList with the line);
// it need not be a valid configuration. Unmask puts the values back.
// MaskText checks its own result by parsing it again and fails rather than
// return text in which a secret may remain.
func MaskText(data []byte, opts ...Option) ([]byte, error) {
	_ = opts // reserved: masking does not depend on the environment
	doc, err := parseText(data)
	if err != nil {
		return nil, err
	}
	masked, err := doc.secretNodes()
	if err != nil {
		return nil, err
	}
	var reps []replacement
	for _, n := range masked {
		if !maskable(n) {
			continue
		}
		sp, err := doc.span(n)
		if err != nil {
			return nil, err
		}
		reps = append(reps, replacement{span: sp, text: maskedToken(n.Style)})
	}
	out := applyReplacements(data, reps)

	// Check: every scalar is as before except the masked ones, which are
	// now RedactedValue.
	check, err := parseText(out)
	if err != nil {
		return nil, fmt.Errorf("config: masking broke the YAML (please report this): %w", err)
	}
	want := make(map[*yaml.Node]bool)
	for _, n := range masked {
		if maskable(n) {
			want[n] = true
		}
	}
	a, b := doc.scalars(), check.scalars()
	if len(a) != len(b) {
		return nil, fmt.Errorf("config: masking changed the YAML structure (please report this)")
	}
	for i := range a {
		wantVal := a[i].Value
		if want[a[i]] {
			wantVal = RedactedValue
		}
		if b[i].Value != wantVal {
			return nil, fmt.Errorf("config: cannot mask the value at line %d (an unusual YAML form; please report this)", a[i].Line)
		}
	}
	return out, nil
}

// Unmask returns edited, a masked text (from MaskText) that a person
// edited, with every RedactedValue that stands where original had a
// masked secret replaced by the original value, exactly as it was written
// in original (its quoting too); everything else is left as edited. So
// saving a masked file does not overwrite the real secrets, and
// Unmask(MaskText(x), x) is x byte for byte. original is the file as it
// is on disk now (read it again when saving, and refuse to save if it
// changed since the page loaded: see WriteFile).
//
// A value is matched by its key path ("models.gpt.api_key",
// "plugins[2].settings.token"): a masked value moved to another key, or
// under a renamed or re-ordered parent (a plugins entry inserted above
// it), cannot be resolved, and Unmask returns an ErrorList naming its line
// and path and asking for the value to be typed again (or the move
// undone). A RedactedValue where original has the literal text REDACTED is
// left alone. Errors have no File: set it, or they print as "line N: …".
func Unmask(edited, original []byte) ([]byte, error) {
	orig, err := parseText(original)
	if err != nil {
		return nil, fmt.Errorf("config: the file on disk is not valid YAML: %w", err)
	}
	ed, err := parseText(edited)
	if err != nil {
		return nil, err
	}
	// The original secret values by where they were written.
	origMasked, err := orig.secretNodes()
	if err != nil {
		return nil, err
	}
	restore := make(map[string][]byte) // path → original bytes of the value
	for _, n := range origMasked {
		if !maskable(n) {
			continue
		}
		sp, err := orig.span(n)
		if err != nil {
			return nil, err
		}
		p := orig.info[n].path
		if orig.dupPaths[p] {
			continue
		}
		restore[p] = original[sp.start:sp.end]
	}
	origLiteral := make(map[string]bool) // paths where original has REDACTED written
	for _, n := range orig.scalars() {
		if n.Value == RedactedValue && orig.info[n].isValue {
			origLiteral[orig.info[n].path] = true
		}
	}

	var reps []replacement
	var restored []*yaml.Node
	var errs ErrorList
	for _, n := range ed.scalars() {
		inf := ed.info[n]
		if n.Value != RedactedValue || !inf.isValue {
			continue
		}
		if ed.dupPaths[inf.path] {
			errs = append(errs, &Error{Line: n.Line, Path: inf.path,
				Msg: "holds the masked value " + RedactedValue + " under a duplicate key; remove the duplicate"})
			continue
		}
		val, ok := restore[inf.path]
		if !ok {
			if origLiteral[inf.path] {
				continue
			}
			errs = append(errs, &Error{Line: n.Line, Path: inf.path,
				Msg: "holds the masked value " + RedactedValue + ", but the file on disk has no secret at this key path to keep " +
					"(was it moved, or its section renamed or re-ordered?): type the value (or a ${VAR} reference) here, or undo the move"})
			continue
		}
		sp, err := ed.span(n)
		if err != nil {
			return nil, err
		}
		reps = append(reps, replacement{span: sp, text: val})
		restored = append(restored, n)
	}
	if err := errs.asError(); err != nil {
		return nil, err
	}
	out := applyReplacements(edited, reps)

	// Check: every scalar of edited is as it was except the restored ones,
	// which hold the original values.
	check, err := parseText(out)
	if err != nil {
		return nil, fmt.Errorf("config: restoring the secrets broke the YAML (please report this): %w", err)
	}
	origVals := make(map[string]string)
	for _, n := range origMasked {
		origVals[orig.info[n].path] = n.Value
	}
	isRestored := make(map[*yaml.Node]bool)
	for _, n := range restored {
		isRestored[n] = true
	}
	a, b := ed.scalars(), check.scalars()
	if len(a) != len(b) {
		return nil, fmt.Errorf("config: restoring the secrets changed the YAML structure (please report this)")
	}
	for i := range a {
		wantVal := a[i].Value
		if isRestored[a[i]] {
			wantVal = origVals[ed.info[a[i]].path]
		}
		if b[i].Value != wantVal {
			return nil, fmt.Errorf("config: cannot restore the value at line %d (an unusual YAML form; please report this)", a[i].Line)
		}
	}
	return out, nil
}

// maskable reports whether a secret scalar is masked: it holds a literal
// value (not empty, not null, no ${VAR} reference).
func maskable(n *yaml.Node) bool {
	if n.Kind != yaml.ScalarNode || n.Value == "" || (n.Style == 0 && n.ShortTag() == "!!null") {
		return false
	}
	return !hasEnvRef(n.Value)
}

// hasEnvRef reports whether s holds a ${VAR} reference (as substitution
// reads it; "$${" is a literal). A malformed reference counts as none, so
// the value is masked.
func hasEnvRef(s string) bool {
	found := false
	_, _, _, err := expandEnv(s, func(string) (string, bool) {
		found = true
		return "", true
	}, nil)
	return found && err == nil
}

func maskedToken(style yaml.Style) []byte {
	switch {
	case style&yaml.DoubleQuotedStyle != 0:
		return []byte(`"` + RedactedValue + `"`)
	case style&yaml.SingleQuotedStyle != 0:
		return []byte(`'` + RedactedValue + `'`)
	default:
		return []byte(RedactedValue)
	}
}

type span struct{ start, end int }

type replacement struct {
	span
	text []byte
}

// applyReplacements replaces the (non-overlapping) spans of data.
func applyReplacements(data []byte, reps []replacement) []byte {
	slices.SortFunc(reps, func(a, b replacement) int { return a.start - b.start })
	var out bytes.Buffer
	out.Grow(len(data))
	at := 0
	for _, r := range reps {
		if r.start < at {
			continue // the same node reached twice
		}
		out.Write(data[at:r.start])
		out.Write(r.text)
		at = r.end
	}
	out.Write(data[at:])
	return out.Bytes()
}

// textDoc is a parsed configuration text with where each node was written.
type textDoc struct {
	data       []byte
	root       *yaml.Node // nil for an empty document
	lineStarts []int
	info       map[*yaml.Node]nodeInfo
	dupPaths   map[string]bool
	order      []*yaml.Node // scalar nodes in document order
}

type nodeInfo struct {
	path    string // key path where the node is written
	indent  int    // indentation of the block it is in (its key's column - 1)
	flow    bool   // inside a flow collection ({…} or […])
	isValue bool   // a mapping value or sequence item (not a key)
}

func parseText(data []byte) (*textDoc, error) {
	if len(data) > MaxFileSize {
		return nil, ErrorList{{Msg: tooLarge().Error(), Err: ErrFileTooLarge}}
	}
	root, errs := parseDocument(data, "")
	if len(errs) > 0 {
		return nil, errs.asError()
	}
	d := &textDoc{data: data, root: root, info: make(map[*yaml.Node]nodeInfo), dupPaths: make(map[string]bool)}
	d.lineStarts = []int{0}
	for i, c := range data {
		if c == '\n' {
			d.lineStarts = append(d.lineStarts, i+1)
		}
	}
	if root != nil {
		seen := make(map[string]bool)
		d.index(root, nodeInfo{indent: -1, isValue: true}, seen, 0)
	}
	return d, nil
}

// index records where every node is written, walking the tree as written
// (aliases are not followed: their anchors are indexed where defined).
func (d *textDoc) index(n *yaml.Node, inf nodeInfo, seen map[string]bool, depth int) {
	if depth > maxDecodeDepth {
		return
	}
	d.info[n] = inf
	if n.Kind == yaml.ScalarNode {
		d.order = append(d.order, n)
		if inf.isValue {
			if seen[inf.path] {
				d.dupPaths[inf.path] = true
			}
			seen[inf.path] = true
		}
		return
	}
	flow := inf.flow || n.Style&yaml.FlowStyle != 0
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			kp := JoinKey(inf.path, k.Value)
			if isMergeKey(k) {
				kp = inf.path + "<<"
			}
			d.index(k, nodeInfo{path: kp, indent: k.Column - 1, flow: flow}, seen, depth+1)
			d.index(v, nodeInfo{path: kp, indent: k.Column - 1, flow: flow, isValue: true}, seen, depth+1)
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			d.index(c, nodeInfo{path: JoinIndex(inf.path, i), indent: n.Column - 1, flow: flow, isValue: true}, seen, depth+1)
		}
	}
}

// scalars returns the scalar nodes (keys and values) in document order.
func (d *textDoc) scalars() []*yaml.Node { return d.order }

// secretNodes returns the scalar nodes that hold secrets: by the Go type
// they decode into (Secret), and in free-form values (plugin settings)
// everything under a key that looks secret. Aliases and merge keys are
// followed to the nodes where the values are written.
func (d *textDoc) secretNodes() ([]*yaml.Node, error) {
	if d.root == nil {
		return nil, nil
	}
	w := &secretWalker{seen: make(map[visit]bool)}
	w.walk(d.root, reflect.TypeFor[Config](), false, 0)
	if w.stopped {
		return nil, ErrorList{{Line: d.root.Line, Msg: "document is nested too deeply or expands too many aliases"}}
	}
	return w.out, nil
}

type visit struct {
	n      *yaml.Node
	t      reflect.Type
	secret bool
}

type secretWalker struct {
	out     []*yaml.Node
	seen    map[visit]bool
	nodes   int
	stopped bool
}

func (w *secretWalker) walk(n *yaml.Node, t reflect.Type, secret bool, depth int) {
	if n == nil || w.stopped {
		return
	}
	w.nodes++
	if depth > maxDecodeDepth || w.nodes > maxDecodeNodes {
		w.stopped = true
		return
	}
	n = deref(n)
	if n == nil {
		return
	}
	v := visit{n, t, secret}
	if w.seen[v] {
		return
	}
	w.seen[v] = true
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[Secret]() {
		if n.Kind == yaml.ScalarNode {
			w.out = append(w.out, n)
			return
		}
		// A list or mapping where a secret belongs does not load, but may
		// hold the secret all the same: mask all of it.
		t, secret = reflect.TypeFor[any](), true
	}
	if n.Kind == yaml.ScalarNode {
		if secret {
			w.out = append(w.out, n)
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return
		}
		idx, _ := fieldsOf(t)
		w.pairs(n, depth, func(k, val *yaml.Node) {
			if i, ok := idx[k.Value]; ok {
				w.walk(val, t.Field(i).Type, false, depth+1)
			}
		})
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		free := t.Elem().Kind() == reflect.Interface // free-form values: plugin settings
		w.pairs(n, depth, func(k, val *yaml.Node) {
			w.walk(val, t.Elem(), free && isSecretKey(k.Value), depth+1)
		})
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for _, c := range n.Content {
			w.walk(c, t.Elem(), false, depth+1)
		}
	case reflect.Interface:
		switch n.Kind {
		case yaml.MappingNode:
			w.pairs(n, depth, func(k, val *yaml.Node) {
				w.walk(val, t, secret || isSecretKey(k.Value), depth+1)
			})
		case yaml.SequenceNode:
			for _, c := range n.Content {
				w.walk(c, t, secret, depth+1)
			}
		}
	}
}

// pairs calls f for each key and value of mapping n, following merge keys.
func (w *secretWalker) pairs(n *yaml.Node, depth int, f func(k, v *yaml.Node)) {
	if depth > maxDecodeDepth {
		w.stopped = true
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), n.Content[i+1]
		if k == nil || k.Kind != yaml.ScalarNode {
			continue
		}
		if !isMergeKey(k) {
			f(k, v)
			continue
		}
		src := deref(v)
		switch {
		case src == nil:
		case src.Kind == yaml.MappingNode:
			w.pairs(src, depth+1, f)
		case src.Kind == yaml.SequenceNode:
			for _, m := range src.Content {
				if m = deref(m); m != nil && m.Kind == yaml.MappingNode {
					w.pairs(m, depth+1, f)
				}
			}
		}
	}
}

// offset returns the byte offset of a node's line and (1-based, counted
// in characters) column.
func (d *textDoc) offset(line, col int) (int, bool) {
	if line < 1 || line > len(d.lineStarts) || col < 1 {
		return 0, false
	}
	off := d.lineStarts[line-1]
	if line == 1 && bytes.HasPrefix(d.data, []byte("\xef\xbb\xbf")) {
		off += 3
	}
	for range col - 1 {
		if off >= len(d.data) || d.data[off] == '\n' {
			return 0, false
		}
		_, size := utf8.DecodeRune(d.data[off:])
		off += size
	}
	return off, true
}

// lineEnd returns the offset of the end of the line holding off (before
// "\r\n" or "\n").
func (d *textDoc) lineEnd(off int) int {
	end := off
	for end < len(d.data) && d.data[end] != '\n' {
		end++
	}
	if end > off && d.data[end-1] == '\r' {
		end--
	}
	return end
}

// span returns where scalar n is written: its token, from the first
// character (after an anchor or tag) to the last, quotes included; a block
// scalar from its indicator to the end of its last line.
func (d *textDoc) span(n *yaml.Node) (span, error) {
	fail := func() (span, error) {
		return span{}, fmt.Errorf("config: cannot find the value at line %d in the text (an unusual YAML form; please report this)", n.Line)
	}
	off, ok := d.offset(n.Line, n.Column)
	if !ok {
		return fail()
	}
	data := d.data
	// Skip the node's properties: an anchor (&a) and a tag (!!str).
	for range 2 {
		if off < len(data) && (data[off] == '&' || data[off] == '!') {
			for off < len(data) && !isBlank(data[off]) && data[off] != '\n' {
				off++
			}
			for off < len(data) && isBlank(data[off]) {
				off++
			}
		}
	}
	if off >= len(data) {
		return fail()
	}
	inf := d.info[n]
	switch {
	case n.Style&yaml.DoubleQuotedStyle != 0:
		if data[off] != '"' {
			return fail()
		}
		for i := off + 1; i < len(data); i++ {
			switch data[i] {
			case '\\':
				i++
			case '"':
				return span{off, i + 1}, nil
			}
		}
		return fail()
	case n.Style&yaml.SingleQuotedStyle != 0:
		if data[off] != '\'' {
			return fail()
		}
		for i := off + 1; i < len(data); i++ {
			if data[i] == '\'' {
				if i+1 < len(data) && data[i+1] == '\'' {
					i++
					continue
				}
				return span{off, i + 1}, nil
			}
		}
		return fail()
	case n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		if data[off] != '|' && data[off] != '>' {
			return fail()
		}
		end := d.lineEnd(off)
		// Content lines: blank, or indented more than the block.
		for next := end; next < len(data); {
			if data[next] == '\r' {
				next++
			}
			if next >= len(data) || data[next] != '\n' {
				break
			}
			start := next + 1
			le := d.lineEnd(start)
			line := data[start:le]
			ind := 0
			for ind < len(line) && line[ind] == ' ' {
				ind++
			}
			switch {
			case len(bytes.TrimSpace(line)) == 0:
				next = le // a blank line: content only if more follows
				continue
			case ind <= inf.indent:
			default:
				end, next = le, le
				continue
			}
			break
		}
		return span{off, end}, nil
	default: // plain
		end := d.plainEnd(off, inf.flow)
		if string(data[off:end]) == n.Value {
			return span{off, end}, nil
		}
		if inf.flow {
			return fail()
		}
		// A plain scalar over several lines: the lines that follow and are
		// indented more than the block.
		last := end
		for next := d.lineEnd(off); next < len(data); {
			if data[next] == '\r' {
				next++
			}
			if next >= len(data) || data[next] != '\n' {
				break
			}
			start := next + 1
			le := d.lineEnd(start)
			line := data[start:le]
			ind := 0
			for ind < len(line) && (line[ind] == ' ' || line[ind] == '\t') {
				ind++
			}
			if ind == len(line) {
				next = le
				continue
			}
			if ind <= inf.indent || line[ind] == '#' {
				break
			}
			last = d.plainEnd(start+ind, false)
			next = le
		}
		return span{off, last}, nil
	}
}

// plainEnd returns where the plain scalar text starting at off ends on its
// line: before a comment (" #"), and in flow context before ",", "]", "}"
// or ": ", with trailing blanks dropped.
func (d *textDoc) plainEnd(off int, flow bool) int {
	le := d.lineEnd(off)
	end := le
	for i := off; i < le; i++ {
		c := d.data[i]
		if c == '#' && i > off && isBlank(d.data[i-1]) {
			end = i
			break
		}
		if flow && (c == ',' || c == ']' || c == '}' || c == '[' || c == '{') {
			end = i
			break
		}
		if c == ':' && (i+1 == le || isBlank(d.data[i+1]) || flow && strings.IndexByte(",]}", d.data[i+1]) >= 0) {
			end = i
			break
		}
	}
	for end > off && isBlank(d.data[end-1]) {
		end--
	}
	return end
}

func isBlank(c byte) bool { return c == ' ' || c == '\t' }
