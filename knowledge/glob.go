package knowledge

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
)

// glob is a compiled include or exclude pattern.
type glob struct {
	re *regexp.Regexp
	// base: the pattern has no slash and matches a name at any depth.
	base bool
}

// compileGlob compiles pattern: * and ? match within one path segment,
// ** any number of segments, [...] a character class.
func compileGlob(pattern string) (glob, error) {
	if pattern == "" {
		return glob{}, errors.New("empty pattern")
	}
	p := strings.TrimPrefix(pattern, "/")
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(?:.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '[':
			end := strings.IndexByte(p[i+1:], ']')
			if end < 0 {
				return glob{}, fmt.Errorf("bad pattern %q: unclosed [", pattern)
			}
			class := p[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			if class == "" || class == "^" || strings.Contains(class, "[") {
				return glob{}, fmt.Errorf("bad pattern %q: bad character class", pattern)
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return glob{}, fmt.Errorf("bad pattern %q: %w", pattern, err)
	}
	return glob{re: re, base: !strings.Contains(p, "/")}, nil
}

// match reports whether rel, a slash-separated path from a base's folder,
// matches.
func (g glob) match(rel string) bool {
	if g.base {
		return g.re.MatchString(path.Base(rel))
	}
	return g.re.MatchString(rel)
}

// filter decides which files of a base are indexed.
type filter struct {
	include, exclude []glob
}

func newFilter(b BaseOptions) (filter, error) {
	var f filter
	for _, p := range b.Include {
		g, err := compileGlob(p)
		if err != nil {
			return f, err
		}
		f.include = append(f.include, g)
	}
	for _, p := range b.Exclude {
		g, err := compileGlob(p)
		if err != nil {
			return f, err
		}
		f.exclude = append(f.exclude, g)
	}
	return f, nil
}

// skipDir reports whether the folder rel (not the base's root) is left
// out: hidden, or excluded.
func (f filter) skipDir(rel string) bool {
	if strings.HasPrefix(path.Base(rel), ".") {
		return true
	}
	for _, g := range f.exclude {
		if g.match(rel) {
			return true
		}
	}
	return false
}

// file reports whether the file rel is indexed.
func (f filter) file(rel string) bool {
	if strings.HasPrefix(path.Base(rel), ".") {
		return false
	}
	for _, g := range f.exclude {
		if g.match(rel) {
			return false
		}
	}
	if len(f.include) == 0 {
		ext := strings.ToLower(path.Ext(rel))
		for _, e := range DefaultExtensions {
			if ext == e {
				return true
			}
		}
		return false
	}
	for _, g := range f.include {
		if g.match(rel) {
			return true
		}
	}
	return false
}

// isMarkdown reports whether rel is chunked as Markdown (else as text).
func isMarkdown(rel string) bool {
	switch strings.ToLower(path.Ext(rel)) {
	case ".md", ".markdown", ".mdown", ".mkd", ".mdx":
		return true
	}
	return false
}
