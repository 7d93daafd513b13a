package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// operationsDoc is the operator's guide these tests keep honest.
const operationsDoc = "../../docs/operations.md"

// TestOperationsContents checks the contents list at the top of
// docs/operations.md: every "## " heading is listed, in order, under its own
// title and with the anchor GitHub gives it, and nothing else is listed.
// Every link to "#anchor" in the document must lead to a heading.
func TestOperationsContents(t *testing.T) {
	data, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range contentsProblems(string(data)) {
		t.Error(p)
	}

	// The check itself: a contents list missing a line, or listing one
	// that is not a heading, is reported.
	lines := strings.Split(string(data), "\n")
	at := slices.IndexFunc(lines, func(l string) bool { return contentsEntry.MatchString(l) })
	if at < 0 {
		t.Fatal("no contents list found")
	}
	removed := slices.Delete(slices.Clone(lines), at+2, at+3)
	if len(contentsProblems(strings.Join(removed, "\n"))) == 0 {
		t.Errorf("a contents list without %q is not reported", lines[at+2])
	}
	extra := slices.Insert(slices.Clone(lines), at+1, "2. [Not a heading](#2-not-a-heading)")
	if len(contentsProblems(strings.Join(extra, "\n"))) == 0 {
		t.Error("a contents line that is not a heading is not reported")
	}
}

var (
	contentsEntry = regexp.MustCompile(`^(\d+)\. \[([^\]]+)\]\(#([^)]+)\)$`)
	headingLine   = regexp.MustCompile(`^(#{1,6}) (.+?)\s*#*\s*$`)
	anchorLink    = regexp.MustCompile(`\]\(#([^)\s]+)\)`)
)

// contentsProblems lists what is wrong with the contents of doc, a
// Markdown document with a "Contents" line followed by a numbered list of
// links to its "## " headings.
func contentsProblems(doc string) []string {
	var problems []string
	lines := strings.Split(doc, "\n")

	var headings []string       // "## " headings, in order
	anchors := map[string]int{} // every heading's anchor
	fenced := false
	for _, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		m := headingLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := githubAnchor(m[2])
		if n := anchors[a]; n > 0 {
			// GitHub numbers the second one a-1: a link cannot tell them apart
			// by title.
			problems = append(problems, fmt.Sprintf("two headings have the anchor #%s", a))
			a = fmt.Sprintf("%s-%d", a, n)
		}
		anchors[a]++
		if m[1] == "##" {
			headings = append(headings, m[2])
		}
	}

	start := slices.Index(lines, "Contents")
	if start < 0 {
		return append(problems, `no "Contents" line`)
	}
	var listed []string
	for i := start + 1; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "#") {
			break
		}
		if l == "" {
			continue
		}
		m := contentsEntry.FindStringSubmatch(l)
		if m == nil {
			problems = append(problems, fmt.Sprintf("line %d: not a contents entry %q", i+1, l))
			continue
		}
		title := m[1] + ". " + m[2]
		if want := githubAnchor(title); m[3] != want {
			problems = append(problems, fmt.Sprintf("line %d: contents entry %q links to #%s, its heading's anchor is #%s", i+1, title, m[3], want))
		}
		listed = append(listed, title)
	}

	// Compare the two lists in order, naming what is missing or extra.
	for i, j := 0, 0; i < len(headings) || j < len(listed); {
		switch {
		case i < len(headings) && j < len(listed) && headings[i] == listed[j]:
			i++
			j++
		case i < len(headings) && !slices.Contains(listed[j:], headings[i]):
			problems = append(problems, fmt.Sprintf("heading %q is not in the contents", "## "+headings[i]))
			i++
		case j < len(listed) && !slices.Contains(headings[i:], listed[j]):
			problems = append(problems, fmt.Sprintf("contents entry %q is not a heading (or not in this order)", listed[j]))
			j++
		default:
			problems = append(problems, fmt.Sprintf("contents entry %q is out of order", listed[j]))
			j++
		}
	}

	// Links within the document lead to a heading.
	fenced = false
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
		}
		if fenced {
			continue
		}
		for _, m := range anchorLink.FindAllStringSubmatch(l, -1) {
			if anchors[m[1]] == 0 {
				problems = append(problems, fmt.Sprintf("line %d: link to #%s leads to no heading", i+1, m[1]))
			}
		}
	}
	return problems
}

// githubAnchor is the anchor GitHub gives a heading: lower case, spaces as
// '-', punctuation other than '-' and '_' removed.
func githubAnchor(heading string) string {
	heading = strings.ReplaceAll(heading, "`", "")
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestWarningsAreDocumented checks that every message hookroom's code logs
// at warn or error level (or above) appears verbatim in docs/operations.md,
// in a code span or a code block, so that an operator who sees one can look
// it up. For Msgf the part of the format before its first verb counts.
func TestWarningsAreDocumented(t *testing.T) {
	sites, dynamic, err := findLogSites("../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) < 50 {
		t.Fatalf("found only %d warn/error messages; is the search broken?", len(sites))
	}
	data, err := os.ReadFile(operationsDoc)
	if err != nil {
		t.Fatal(err)
	}
	spans := codeSpans(string(data))
	var missing []string
	for _, s := range sites {
		if !documented(spans, s) {
			missing = append(missing, fmt.Sprintf("%s: %s %q", s.pos, s.level, s.msg))
		} else if os.Getenv("HOOKROOM_LIST_LOG") != "" {
			t.Logf("%s: %s %q", s.pos, s.level, s.msg)
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d of %d warn/error messages are not in %s (add them to \"Warnings and errors in the log\"):\n%s",
			len(missing), len(sites), operationsDoc, strings.Join(missing, "\n"))
	}
	for _, d := range dynamic {
		if _, ok := dynamicMessages[d.key()]; !ok {
			t.Errorf("%s: %s message not known when compiled (in %s): give it a constant message, or add %q to dynamicMessages with what it logs", d.pos, d.level, d.fn, d.key())
		}
	}
	for k := range dynamicMessages {
		if !slices.ContainsFunc(dynamic, func(d logSite) bool { return d.key() == k }) {
			t.Errorf("dynamicMessages lists %q, which logs no message unknown when compiled any more", k)
		}
	}
	t.Logf("%d warn/error messages, %d logged with messages made at run time", len(sites), len(dynamic))

	// The check itself: a new warning in a package is found.
	dir := filepath.Join(t.TempDir(), "pkg")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src := `package pkg

import "github.com/rs/zerolog"

const prefix = "a new warning "

func f(log zerolog.Logger, err error) {
	log.Warn().Err(err).Str("k", "v").Msg(prefix + "nobody has documented")
	ev := log.Error()
	ev = ev.Int("n", 1)
	ev.Msgf("a new error %d", 2)
	helper(&log, zerolog.WarnLevel, "through a helper")
	log.Info().Msg("only info")
}

func helper(log *zerolog.Logger, level zerolog.Level, msg string) {
	log.WithLevel(level).Msg(msg)
}
`
	if err := os.WriteFile(filepath.Join(dir, "pkg.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	found, _, err := findLogSites(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range found {
		if !documented(spans, s) {
			got = append(got, s.level+" "+s.msg)
		}
	}
	want := []string{"warn a new warning nobody has documented", "error a new error %d", "warn through a helper"}
	if !slices.Equal(got, want) {
		t.Errorf("in a package with new warnings, undocumented: %q, want %q", got, want)
	}
}

// dynamicMessages are the warn/error log calls whose message is made at run
// time, keyed by file and function, with what they log. These are not
// checked against the documentation.
var dynamicMessages = map[string]string{
	"bot/plugins.go loadPlugins":        "the plugin loader's warnings about the configuration, each naming its file:line",
	"bot/tools.go applyTools":           "warnings about the tools of the configuration, each naming its file:line",
	"bot/mcp.go effectiveTools":         "the same tool warnings, when an MCP server's tools change",
	"mcp/set.go Load":                   "warnings about MCP servers that did not start, each naming its file:line",
	"plugins/process/host.go pluginLog": "a process plugin's own log line (host.log), at the level it asks for",
}

// logSite is one warn/error log call.
type logSite struct {
	pos   token.Position
	level string // "warn" or "error"
	msg   string // the message, or for Msgf its format
	msgf  bool   // msg is a Msgf format
	fn    string // the function holding the call
}

// key names a dynamic site in dynamicMessages: its file and function.
func (s logSite) key() string { return filepath.ToSlash(s.pos.Filename) + " " + s.fn }

// codeSpans returns the text of doc's code spans and code blocks, with
// runs of white space (a span may be wrapped) made one space.
func codeSpans(doc string) []string {
	var out []string
	var block []string
	fenced := false
	var rest strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			if fenced {
				out = append(out, normalizeSpace(strings.Join(block, " ")))
				block = nil
			}
			fenced = !fenced
			continue
		}
		if fenced {
			block = append(block, l)
			continue
		}
		rest.WriteString(l)
		rest.WriteByte('\n')
	}
	// Outside code blocks, spans are between single backticks; a table
	// escapes '|' as "\|".
	parts := strings.Split(rest.String(), "`")
	for i := 1; i < len(parts); i += 2 {
		out = append(out, strings.ReplaceAll(normalizeSpace(parts[i]), `\|`, "|"))
	}
	return out
}

func normalizeSpace(s string) string { return strings.Join(strings.Fields(s), " ") }

// documented reports whether the message of s is in one of spans. A Msgf
// format is documented when one span holds the text between its verbs, in
// order: "process plugin %q %s; killing it" as `process plugin "NAME" …;
// killing it`.
func documented(spans []string, s logSite) bool {
	if !s.msgf {
		msg := normalizeSpace(s.msg)
		return slices.ContainsFunc(spans, func(span string) bool { return strings.Contains(span, msg) })
	}
	var parts []string
	for _, p := range msgfVerb.Split(s.msg, -1) {
		if p = normalizeSpace(p); p != "" {
			parts = append(parts, p)
		}
	}
	return slices.ContainsFunc(spans, func(span string) bool {
		for _, p := range parts {
			i := strings.Index(span, p)
			if i < 0 {
				return false
			}
			span = span[i+len(p):]
		}
		return true
	})
}

// msgfVerb matches a fmt verb with its flags, width and precision.
var msgfVerb = regexp.MustCompile(`%[-+# 0]*(\d+|\*)?(\.(\d+|\*)?)?[a-zA-Z%]`)

// findLogSites returns every zerolog call under root that logs at warn or
// error level (or above) with a constant message, and those whose message
// is made at run time. It reads the code, not its types: a call chain
// counts when it starts at Warn(), Error(), a logger's Err(err), or
// WithLevel with a warn/error level (a zerolog constant, or a variable set
// to one), directly or through a variable holding the event. Functions and
// closures that log a message parameter (logErrors, sync's pause) are
// followed to their callers, which pass the message.
func findLogSites(root string) (sites, dynamic []logSite, err error) {
	pkgs := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			switch {
			case path == root:
			case strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules",
				rel == "tools", rel == "examples", rel == "plugins/sdk",
				// Test support packages (hstest, llmtest, consoletest, …).
				strings.HasSuffix(name, "test"):
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			pkgs[filepath.Dir(path)] = append(pkgs[filepath.Dir(path)], path)
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	dirs := make([]string, 0, len(pkgs))
	for d := range pkgs {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		p := &pkgScan{root: root, fset: token.NewFileSet(), consts: map[string]string{}, helpers: map[string]*logHelper{}}
		for _, f := range pkgs[dir] {
			af, err := parser.ParseFile(p.fset, f, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, nil, err
			}
			p.files = append(p.files, af)
		}
		p.scan()
		sites = append(sites, p.sites...)
		dynamic = append(dynamic, p.dynamic...)
	}
	return sites, dynamic, nil
}

// logHelper is a function or closure that logs its parameter msgParam (or
// a constant msg) at a fixed level or at the level passed as levelParam.
type logHelper struct {
	msgParam   int // -1: msg
	msg        string
	msgf       bool
	levels     []string
	levelParam int // -1: levels
}

type pkgScan struct {
	root    string
	fset    *token.FileSet
	files   []*ast.File
	consts  map[string]string     // the package's string constants
	helpers map[string]*logHelper // by function name, or "Func.closure" for a closure
	sites   []logSite
	dynamic []logSite
}

// funcScan is what is known in one function declaration (closures
// included): which variables hold a log event, and at what level, and
// which hold a zerolog level.
type funcScan struct {
	p         *pkgScan
	decl      *ast.FuncDecl
	events    map[string][]string // variable → levels of the event it holds
	levelVars map[string][]string // variable → the levels it is set to
	consts    map[string]string
	litNames  map[*ast.FuncLit]string // closures assigned to a variable
}

func (p *pkgScan) scan() {
	for _, f := range p.files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
				collectConsts(g, p.consts, p.consts)
			}
		}
	}
	var fns []*funcScan
	for _, f := range p.files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				fns = append(fns, p.newFunc(fd))
			}
		}
	}
	for _, fs := range fns {
		fs.walk(false)
	}
	for _, fs := range fns {
		fs.walk(true)
	}
}

func (p *pkgScan) newFunc(fd *ast.FuncDecl) *funcScan {
	fs := &funcScan{p: p, decl: fd, events: map[string][]string{}, levelVars: map[string][]string{},
		consts: map[string]string{}, litNames: map[*ast.FuncLit]string{}}
	for k, v := range p.consts {
		fs.consts[k] = v
	}
	var assigns [][2]ast.Expr
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.AssignStmt:
			if len(n.Lhs) == len(n.Rhs) {
				for i := range n.Lhs {
					assigns = append(assigns, [2]ast.Expr{n.Lhs[i], n.Rhs[i]})
					if lit, ok := n.Rhs[i].(*ast.FuncLit); ok {
						if id, ok := n.Lhs[i].(*ast.Ident); ok {
							fs.litNames[lit] = id.Name
						}
					}
				}
			}
		case *ast.GenDecl:
			if n.Tok == token.CONST {
				collectConsts(n, fs.consts, fs.consts)
			}
			if n.Tok == token.VAR {
				for _, s := range n.Specs {
					vs := s.(*ast.ValueSpec)
					if len(vs.Names) == len(vs.Values) {
						for i := range vs.Names {
							assigns = append(assigns, [2]ast.Expr{vs.Names[i], vs.Values[i]})
						}
					}
				}
			}
		}
		return true
	})
	// ev = ev.Str(…) keeps ev's level: a few rounds reach the fixed point.
	params := paramNames(fd.Type)
	for range 3 {
		for _, a := range assigns {
			id, ok := a[0].(*ast.Ident)
			if !ok {
				continue
			}
			if lv := fs.levelConst(a[1]); lv != "" {
				fs.levelVars[id.Name] = addLevels(fs.levelVars[id.Name], lv)
			}
			if lv := fs.eventLevels(a[1], params); len(lv) > 0 {
				fs.events[id.Name] = addLevels(fs.events[id.Name], lv...)
			}
		}
	}
	return fs
}

func addLevels(to []string, levels ...string) []string {
	for _, l := range levels {
		if !slices.Contains(to, l) {
			to = append(to, l)
		}
	}
	return to
}

// collectConsts adds the string constants of g to into, resolving names
// through known.
func collectConsts(g *ast.GenDecl, into, known map[string]string) {
	for _, s := range g.Specs {
		vs := s.(*ast.ValueSpec)
		for i, name := range vs.Names {
			if i < len(vs.Values) {
				if v, ok := constString(vs.Values[i], known); ok {
					into[name.Name] = v
				}
			}
		}
	}
}

func constString(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.ParenExpr:
		return constString(e.X, consts)
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	case *ast.BinaryExpr:
		if e.Op == token.ADD {
			a, ok1 := constString(e.X, consts)
			b, ok2 := constString(e.Y, consts)
			return a + b, ok1 && ok2
		}
	}
	return "", false
}

// levelConst returns "warn", "error" or "other" for zerolog.XLevel, "" for
// anything else.
func (fs *funcScan) levelConst(e ast.Expr) string {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "zerolog" || !strings.HasSuffix(sel.Sel.Name, "Level") {
		return ""
	}
	switch sel.Sel.Name {
	case "WarnLevel":
		return "warn"
	case "ErrorLevel", "FatalLevel", "PanicLevel":
		return "error"
	}
	return "other"
}

// paramLevel is how eventLevels names a level passed as the enclosing
// function's parameter i.
func paramLevel(i int) string { return "param:" + strconv.Itoa(i) }

// eventLevels returns the levels the log event e may have: "warn",
// "error", "other", or paramLevel(i) when it is the enclosing function's
// parameter i (params). Nil: e is not known to be a log event.
func (fs *funcScan) eventLevels(e ast.Expr, params []string) []string {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return fs.eventLevels(e.X, params)
	case *ast.Ident:
		return fs.events[e.Name]
	case *ast.CallExpr:
		if sel, ok := e.Fun.(*ast.SelectorExpr); ok {
			switch name := sel.Sel.Name; {
			case len(e.Args) == 0 && name == "Warn":
				return []string{"warn"}
			case len(e.Args) == 0 && (name == "Error" || name == "Fatal" || name == "Panic"):
				return []string{"error"}
			case len(e.Args) == 0 && (name == "Info" || name == "Debug" || name == "Trace" || name == "Log"):
				return []string{"other"}
			case len(e.Args) == 1 && name == "WithLevel":
				if lv := fs.levelConst(e.Args[0]); lv != "" {
					return []string{lv}
				}
				if id, ok := e.Args[0].(*ast.Ident); ok {
					if i := slices.Index(params, id.Name); i >= 0 {
						return []string{paramLevel(i)}
					}
					if lv := fs.levelVars[id.Name]; len(lv) > 0 {
						return lv
					}
				}
				return []string{"unknown"}
			case len(e.Args) == 1 && name == "Err":
				if lv := fs.eventLevels(sel.X, params); len(lv) > 0 {
					return lv // Event.Err
				}
				if id, ok := sel.X.(*ast.Ident); ok && fs.events[id.Name] != nil {
					return nil
				}
				return []string{"error"} // Logger.Err: error level when err is not nil
			}
			if lv := fs.eventLevels(sel.X, params); len(lv) > 0 {
				return lv
			}
		}
		// A function that takes the event and hands it back
		// (logLimiter.event).
		for _, a := range e.Args {
			if lv := fs.eventLevels(a, params); len(lv) > 0 {
				return lv
			}
		}
	}
	return nil
}

func paramNames(ft *ast.FuncType) []string {
	var names []string
	for _, f := range ft.Params.List {
		if len(f.Names) == 0 {
			names = append(names, "_")
		}
		for _, n := range f.Names {
			names = append(names, n.Name)
		}
	}
	return names
}

// walk visits the function's log calls: with calls false it records log
// calls and helpers, with calls true the calls of helpers.
func (fs *funcScan) walk(calls bool) {
	p := fs.p
	var stack []ast.Node
	ast.Inspect(fs.decl, func(n ast.Node) bool {
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		// The innermost function: its name (for a helper) and parameters.
		var helperName string
		var params []string
		for i := len(stack) - 1; i >= 0; i-- {
			if lit, ok := stack[i].(*ast.FuncLit); ok {
				params = paramNames(lit.Type)
				if name, ok := fs.litNames[lit]; ok {
					helperName = fs.decl.Name.Name + "." + name
				}
				break
			}
			if fd, ok := stack[i].(*ast.FuncDecl); ok {
				params = paramNames(fd.Type)
				if fd.Recv == nil {
					helperName = fd.Name.Name
				}
			}
		}
		pos := p.fset.Position(call.Pos())
		if rel, err := filepath.Rel(p.root, pos.Filename); err == nil {
			pos.Filename = filepath.ToSlash(rel)
		}
		record := func(levels []string, msg string, msgf, known bool) {
			level := ""
			if slices.Contains(levels, "warn") {
				level = "warn"
			}
			if slices.Contains(levels, "error") {
				level = "error"
			}
			if level == "" {
				return
			}
			site := logSite{pos: pos, level: level, msg: msg, msgf: msgf, fn: fs.decl.Name.Name}
			if known {
				p.sites = append(p.sites, site)
			} else {
				p.dynamic = append(p.dynamic, site)
			}
		}

		if calls {
			id, ok := call.Fun.(*ast.Ident)
			if !ok {
				return true
			}
			h := p.helpers[fs.decl.Name.Name+"."+id.Name]
			if h == nil {
				h = p.helpers[id.Name]
			}
			if h == nil {
				return true
			}
			levels := h.levels
			if h.levelParam >= 0 && h.levelParam < len(call.Args) {
				if lv := fs.levelConst(call.Args[h.levelParam]); lv != "" {
					levels = []string{lv}
				} else if a, ok := call.Args[h.levelParam].(*ast.Ident); ok {
					levels = fs.levelVars[a.Name]
				}
			}
			if h.msgParam < 0 {
				record(levels, h.msg, h.msgf, true)
			} else if h.msgParam < len(call.Args) {
				msg, ok := constString(call.Args[h.msgParam], fs.consts)
				record(levels, msg, false, ok)
			}
			return true
		}

		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || (sel.Sel.Name != "Msg" && sel.Sel.Name != "Msgf") || len(call.Args) == 0 {
			return true
		}
		levels := fs.eventLevels(sel.X, params)
		if len(levels) == 0 {
			return true
		}
		msg, known := constString(call.Args[0], fs.consts)
		// A helper: the message or the level is a parameter.
		h := &logHelper{msgParam: -1, msg: msg, msgf: sel.Sel.Name == "Msgf", levelParam: -1}
		for _, l := range levels {
			if i, ok := strings.CutPrefix(l, "param:"); ok {
				h.levelParam, _ = strconv.Atoi(i)
			} else {
				h.levels = append(h.levels, l)
			}
		}
		if id, ok := call.Args[0].(*ast.Ident); ok && !known && sel.Sel.Name == "Msg" {
			h.msgParam = slices.Index(params, id.Name)
		}
		if helperName != "" && (h.msgParam >= 0 || h.levelParam >= 0) && (known || h.msgParam >= 0) {
			p.helpers[helperName] = h
			return true
		}
		record(levels, msg, sel.Sel.Name == "Msgf", known)
		return true
	})
}
