package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/hookroom/hookroom/config"
)

// ManifestFile is the name of the manifest every plugin directory holds.
const ManifestFile = "hookroom-plugin.json"

// APIVersion is the plugin API version this host speaks. A manifest must
// declare exactly this api_version.
const APIVersion = 1

// NameRE is the grammar of plugin names (manifest name, builtin name).
var NameRE = regexp.MustCompile(`^[a-z0-9_-]+$`)

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// baseEnv are the variables every process plugin gets; a manifest cannot
// ask for them (HOME is the plugin's state directory, not the server's).
var baseEnv = []string{"PATH", "HOME", "LANG"}

// Manifest is the content of a plugin directory's hookroom-plugin.json:
//
//	{
//	  "name": "geo",
//	  "version": "1.2.0",
//	  "api_version": 1,
//	  "hookroom": ">=0.5, <2",
//	  "description": "Adds the requester's location to every turn",
//	  "command": ["python3", "plugin.py"],
//	  "env": ["DAWARICH_API_KEY"]
//	}
//
// Exactly one of Command and Builtin is set.
type Manifest struct {
	// Name is the plugin's name (^[a-z0-9_-]+$), unique among the loaded
	// plugins; it names the state directory <data_dir>/plugins/<name>/.
	Name string `json:"name"`
	// Version is the plugin's own version, free-form ("1.2.0").
	Version string `json:"version"`
	// APIVersion is the plugin API version the plugin was written for; the
	// host supports APIVersion.
	APIVersion int `json:"api_version"`
	// Command runs a process plugin: argv, with relative paths resolved
	// against the plugin directory (see ResolveCommand).
	Command []string `json:"command,omitempty"`
	// Builtin names a built-in Go plugin this directory configures.
	Builtin string `json:"builtin,omitempty"`
	// Env names environment variables the process plugin may receive, if
	// config.yaml also allows them. PATH, LANG and HOME (the state
	// directory) are always set.
	Env []string `json:"env,omitempty"`
	// Description says what the plugin does, for listings.
	Description string `json:"description,omitempty"`
	// Hookroom is the range of hookroom versions the plugin works with
	// (see VersionRange), checked by `hookroom plugin install`; "" allows
	// every version.
	Hookroom string `json:"hookroom,omitempty"`
}

// ManifestError is one problem in a manifest file, reported like a
// config.yaml problem: "file:line: key: message" (Path is the manifest key,
// "" for the file as a whole; File is "" for ParseManifest).
type ManifestError = config.Error

// ErrNoManifest is wrapped by the error ReadManifest returns for a directory
// without a manifest.
var ErrNoManifest = errors.New("no " + ManifestFile)

// ReadManifest reads and validates dir/hookroom-plugin.json. Problems are
// *ManifestError values naming the file (several are joined).
func ReadManifest(dir string) (*Manifest, error) {
	file := filepath.Join(dir, ManifestFile)
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &ManifestError{File: file, Msg: fmt.Sprintf("%v in the plugin directory", ErrNoManifest), Err: ErrNoManifest}
	} else if err != nil {
		return nil, &ManifestError{File: file, Msg: fmt.Sprintf("failed to read manifest: %v", err), Err: err}
	}
	m, err := ParseManifest(data)
	if err != nil {
		var errs []error
		for _, e := range splitErrors(err) {
			var me *ManifestError
			if errors.As(e, &me) {
				me.File = file
			}
			errs = append(errs, e)
		}
		return nil, errors.Join(errs...)
	}
	return m, nil
}

// ParseManifest decodes and validates a manifest strictly: unknown or
// repeated keys, wrong types and trailing data are errors, as are a name
// outside ^[a-z0-9_-]+$, a missing version, an api_version other than
// APIVersion, both or neither of command and builtin, invalid env names
// and a hookroom version range that does not parse. Every problem is
// reported as a *ManifestError with its line (several are joined).
func ParseManifest(data []byte) (*Manifest, error) {
	p := manifestParser{data: data}
	m := p.parse()
	if len(p.errs) > 0 {
		return nil, errors.Join(p.errs...)
	}
	return m, nil
}

type manifestParser struct {
	data []byte
	errs []error
}

func (p *manifestParser) line(off int64) int {
	if off > int64(len(p.data)) {
		off = int64(len(p.data))
	}
	return bytes.Count(p.data[:off], []byte{'\n'}) + 1
}

func (p *manifestParser) errorf(line int, field, format string, args ...any) {
	p.errs = append(p.errs, &ManifestError{Line: line, Path: field, Msg: fmt.Sprintf(format, args...)})
}

// syntax reports a JSON decoding error at the position the decoder was at.
func (p *manifestParser) syntax(dec *json.Decoder, err error) {
	off := dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		p.errs = append(p.errs, &ManifestError{Line: p.line(off), Msg: "unexpected end of JSON", Err: err})
		return
	}
	p.errs = append(p.errs, &ManifestError{Line: p.line(off), Msg: fmt.Sprintf("invalid JSON: %v", err), Err: err})
}

var manifestFields = []string{"name", "version", "api_version", "hookroom", "command", "builtin", "env", "description"}

func (p *manifestParser) parse() *Manifest {
	dec := json.NewDecoder(bytes.NewReader(p.data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		p.syntax(dec, err)
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		p.errorf(1, "", "a manifest is a JSON object, not %s", jsonKind(tok))
		return nil
	}
	m := &Manifest{}
	lines := map[string]int{}
	bad := map[string]bool{} // keys already reported as the wrong type
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			p.syntax(dec, err)
			return nil
		}
		key, _ := tok.(string)
		line := p.line(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			p.syntax(dec, err)
			return nil
		}
		if first, dup := lines[key]; dup {
			p.errorf(line, key, "repeated key (first on line %d)", first)
			continue
		}
		lines[key] = line
		var dst any
		var want string
		switch key {
		case "name":
			dst, want = &m.Name, "a string"
		case "version":
			dst, want = &m.Version, "a string"
		case "api_version":
			dst, want = &m.APIVersion, "an integer"
		case "command":
			dst, want = &m.Command, "a list of strings"
		case "builtin":
			dst, want = &m.Builtin, "a string"
		case "env":
			dst, want = &m.Env, "a list of strings"
		case "description":
			dst, want = &m.Description, "a string"
		case "hookroom":
			dst, want = &m.Hookroom, "a string (a version range such as \">=0.5, <2\")"
		default:
			p.errorf(line, key, "unknown key (known: %s)", strings.Join(manifestFields, ", "))
			continue
		}
		if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			p.errorf(line, key, "must be %s, not null", want)
			bad[key] = true
			continue
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			p.errorf(line, key, "must be %s", want)
			bad[key] = true
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		p.syntax(dec, err)
		return nil
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		p.errorf(p.line(dec.InputOffset()), "", "unexpected data after the manifest object")
	}
	p.validate(m, lines, bad)
	return m
}

func jsonKind(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", tok)
}

// validate checks the decoded manifest; lines holds the line of every key
// present, bad the keys whose value was already reported.
func (p *manifestParser) validate(m *Manifest, lines map[string]int, bad map[string]bool) {
	at := func(key string) int { return lines[key] }
	has := func(key string) bool { _, ok := lines[key]; return ok }
	ok := func(key string) bool { return has(key) && !bad[key] }
	switch {
	case !has("name"):
		p.errorf(1, "name", "is required")
	case ok("name") && !NameRE.MatchString(m.Name):
		p.errorf(at("name"), "name", "%q must match %s", m.Name, NameRE)
	}
	switch {
	case !has("version"):
		p.errorf(1, "version", "is required")
	case ok("version") && strings.TrimSpace(m.Version) == "":
		p.errorf(at("version"), "version", "must not be empty")
	}
	switch {
	case !has("api_version"):
		p.errorf(1, "api_version", "is required (this hookroom speaks %d)", APIVersion)
	case ok("api_version") && m.APIVersion != APIVersion:
		p.errorf(at("api_version"), "api_version", "%d is not supported (this hookroom speaks %d)", m.APIVersion, APIVersion)
	}
	if ok("hookroom") {
		if _, err := ParseVersionRange(m.Hookroom); err != nil {
			p.errorf(at("hookroom"), "hookroom", "%v (want comparisons such as \">=0.5, <2\")", err)
		}
	}
	switch {
	case has("command") && has("builtin"):
		p.errorf(at("builtin"), "builtin", "set either command or builtin, not both")
	case !has("command") && !has("builtin"):
		p.errorf(1, "", "set command (a process to run) or builtin (a compiled-in plugin)")
	case ok("command"):
		if len(m.Command) == 0 {
			p.errorf(at("command"), "command", "must name the program to run")
		} else if strings.TrimSpace(m.Command[0]) == "" {
			p.errorf(at("command"), "command", "the program name must not be empty")
		}
	case has("builtin"):
		if ok("builtin") && !NameRE.MatchString(m.Builtin) {
			p.errorf(at("builtin"), "builtin", "%q must match %s", m.Builtin, NameRE)
		}
		if has("env") {
			p.errorf(at("env"), "env", "applies to process plugins only (a built-in runs inside hookroom)")
		}
	}
	seen := map[string]bool{}
	for _, e := range m.Env {
		switch {
		case !envNameRE.MatchString(e):
			p.errorf(at("env"), "env", "%q is not a valid environment variable name", e)
		case slices.Contains(baseEnv, e):
			p.errorf(at("env"), "env", "%s is always set by the host and cannot be requested", e)
		case seen[e]:
			p.errorf(at("env"), "env", "%s is listed twice", e)
		}
		seen[e] = true
	}
}

func splitErrors(err error) []error {
	if u, ok := err.(interface{ Unwrap() []error }); ok {
		return u.Unwrap()
	}
	return []error{err}
}

// ResolveCommand returns the manifest's command with paths made absolute
// for a process whose working directory is not the plugin directory: the
// program is resolved against dir when it contains a path separator or
// names a file in dir, and looked up in PATH otherwise; an argument is
// resolved against dir when it names an existing file or directory there
// ("plugin.py" becomes /…/plugins/geo/plugin.py).
func ResolveCommand(dir string, command []string) ([]string, error) {
	if len(command) == 0 {
		return nil, errors.New("empty command")
	}
	out := slices.Clone(command)
	prog := command[0]
	switch {
	case filepath.IsAbs(prog):
	case strings.ContainsRune(prog, '/') || strings.ContainsRune(prog, filepath.Separator) || isFile(filepath.Join(dir, prog)):
		prog = filepath.Join(dir, prog)
		if !isFile(prog) {
			return nil, fmt.Errorf("program %q does not exist in the plugin directory", command[0])
		}
		out[0] = prog
	}
	for i, a := range command[1:] {
		if a == "" || filepath.IsAbs(a) || strings.HasPrefix(a, "-") {
			continue
		}
		if p := filepath.Join(dir, a); exists(p) && within(dir, p) {
			out[i+1] = p
		}
	}
	return out, nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// within reports whether p lies inside dir (after cleaning).
func within(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
