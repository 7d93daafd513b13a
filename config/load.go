package config

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"
)

// Option changes how Load and Parse read a configuration.
type Option func(*options)

type options struct {
	lookupEnv  func(string) (string, bool)
	validators []func(*Config) ErrorList
}

// WithValidator adds a check that runs after the configuration's own
// validation, for settings whose rules live in another package (the
// authorization policy's patterns): its problems are reported like the
// configuration's own, with file and line (Config.Errorf).
func WithValidator(check func(*Config) ErrorList) Option {
	return func(o *options) { o.validators = append(o.validators, check) }
}

// WithLookupEnv replaces os.LookupEnv as the source of ${VAR} values (tests
// use it to supply a fake environment).
func WithLookupEnv(lookup func(name string) (string, bool)) Option {
	return func(o *options) { o.lookupEnv = lookup }
}

// Load reads, decodes, defaults and validates the configuration file at path.
// It is called at start-up and on every reload; it has no side effects besides
// reading the file. On failure it returns an ErrorList describing every
// problem found, each with file, line and key path.
func Load(ctx context.Context, path string, opts ...Option) (*Config, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	data, err := readFile(path)
	if err != nil {
		return nil, ErrorList{{File: path, Msg: err.Error(), Err: err}}
	}
	c, err := Parse(data, path, opts...)
	if err != nil {
		return nil, err
	}
	zerolog.Ctx(ctx).Debug().
		Str("path", c.Path).
		Int("agents", len(c.Agents)).
		Int("rooms", len(c.Rooms)).
		Int("plugins", len(c.Plugins)).
		Msg("Loaded configuration")
	return c, nil
}

// MaxFileSize is the largest configuration file Load and Parse read. A
// real config.yaml is a few KiB; anything near this is a mistake (a log
// file or a database given as the config) and is refused before parsing.
const MaxFileSize = 8 << 20

// ErrFileTooLarge is wrapped by the error for a file over MaxFileSize.
var ErrFileTooLarge = errors.New("config file is too large")

// readFile reads path, refusing files over MaxFileSize without reading
// them whole.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to read config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read config: %w", err)
	}
	if len(data) > MaxFileSize {
		return nil, tooLarge()
	}
	return data, nil
}

func tooLarge() error {
	return fmt.Errorf("%w: over %s (a config.yaml is a few KiB; is this the right file?)", ErrFileTooLarge, ByteSize(MaxFileSize))
}

// Parse decodes, defaults and validates a configuration held in memory.
// filename names it in error messages, and its directory is the one relative
// paths are resolved against ("" means the working directory). On failure it
// returns an ErrorList describing every problem found, sorted by line.
func Parse(data []byte, filename string, opts ...Option) (*Config, error) {
	o := options{lookupEnv: os.LookupEnv}
	for _, opt := range opts {
		opt(&o)
	}
	if len(data) > MaxFileSize {
		err := tooLarge()
		return nil, ErrorList{{File: filename, Msg: err.Error(), Err: err}}
	}
	c := &Config{file: filename}
	abs, err := filepath.Abs(filename)
	if err != nil {
		return nil, ErrorList{{File: filename, Msg: fmt.Sprintf("failed to resolve config path: %v", err), Err: err}}
	}
	if filename == "" {
		c.Dir = abs
	} else {
		c.Path, c.Dir = abs, filepath.Dir(abs)
	}

	root, errs := parseDocument(data, filename)
	if len(errs) > 0 {
		return nil, errs.asError()
	}

	s := &substituter{
		lookup:    o.lookupEnv,
		file:      filename,
		origin:    make(map[*yaml.Node]string),
		fromEnv:   make(map[string]bool),
		envValues: make(map[string]string),
		bad:       make(map[string]bool),
	}
	d := newDecoder(filename)
	d.origin, d.bad = s.origin, s.bad
	if root != nil {
		s.walk(root, "")
		switch {
		case isNull(root):
		case root.Kind != yaml.MappingNode:
			d.typeError(root, "", "a mapping at the top level")
		default:
			d.decode(root, reflect.ValueOf(c).Elem(), "")
		}
	}
	c.lines, c.fromEnv, c.envValues = d.lines, s.fromEnv, s.envValues
	c.masker = newEnvMasker(c.envValues)

	c.ApplyDefaults()
	all := append(s.errs, d.errs...)
	problems := c.validate()
	if len(problems) == 0 && len(all) == 0 {
		for _, check := range o.validators {
			problems = append(problems, check(c)...)
		}
	}
	for _, e := range problems {
		// A value that failed to substitute or decode is reported once.
		if !d.isBad(e.Path) {
			all = append(all, e)
		}
	}
	if err := all.asError(); err != nil {
		return nil, err
	}
	return c, nil
}

// parseDocument parses data into the root node of its single YAML document
// (nil for an empty file).
func parseDocument(data []byte, filename string) (*yaml.Node, ErrorList) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, ErrorList{syntaxError(filename, data, err)}
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, ErrorList{syntaxError(filename, data, err)}
	default:
		return nil, ErrorList{{File: filename, Line: extra.Line, Msg: "the file must hold a single YAML document"}}
	}
	if len(doc.Content) == 0 {
		return nil, nil
	}
	return doc.Content[0], nil
}

var yamlLineRE = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// yamlParserProblems are the messages of yaml.v3's parser (as opposed to its
// scanner). yaml.v3 reports their lines counted from 0, and omits the line
// when it is the first one; syntaxError corrects that.
var yamlParserProblems = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxError turns a yaml.v3 parse error into an *Error with its line. For
// an unclosed construct the line is where the construct starts.
func syntaxError(filename string, data []byte, err error) *Error {
	msg := err.Error()
	line := 0
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		if yamlParserProblems[msg] {
			line++
		}
	}
	if lines := bytes.Split(data, []byte("\n")); line > 0 && line <= len(lines) &&
		strings.Contains(msg, "did not find expected ',' or") && bytes.Contains(lines[line-1], []byte("${")) {
		msg += ` (inside [ ] or { }, quote values that use ${VAR}: "${VAR}")`
	}
	return &Error{File: filename, Line: line, Msg: "invalid YAML: " + msg, Err: err}
}
