package knowledge

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"
)

// Defaults applied when an option is zero.
const (
	DefaultChunkSize    = 1200
	DefaultMaxFileBytes = 4 << 20
	DefaultMaxPDFBytes  = 32 << 20
	DefaultDebounce     = 300 * time.Millisecond
	DefaultTopK         = 3
	minChunkSize        = 200
	maxChunkSize        = 16 << 10
	maxTopK             = 20
)

// DefaultExtensions are the files a base without include patterns indexes.
// A file named *.pdf (any case) is read as a PDF, whichever pattern
// included it.
var DefaultExtensions = []string{".md", ".markdown", ".txt", ".text", ".pdf"}

// Options configure the knowledge bases (config.yaml's knowledge:
// section). The zero value has no bases.
type Options struct {
	// Bases maps a base's name to its folders.
	Bases map[string]BaseOptions `yaml:"bases"`
	// MaxFileBytes skips bigger files with a warning (default 4 MiB); for a
	// PDF it bounds the text extracted from it.
	MaxFileBytes int64 `yaml:"max_file_bytes"`
	// MaxPDFBytes skips bigger PDF files with a warning (default 32 MiB):
	// a PDF is mostly fonts, images and compressed streams, so one with
	// 4 MiB of text is far bigger than that on disk.
	MaxPDFBytes int64 `yaml:"max_pdf_bytes"`
	// Debounce is how long the watcher waits after the last change under a
	// base before re-indexing it (default 300ms).
	Debounce time.Duration `yaml:"debounce"`
}

// BaseOptions configure one base.
type BaseOptions struct {
	// Paths are the base's folders, indexed recursively. With more than one,
	// a file's path starts with its folder's name (which must differ).
	Paths []string `yaml:"paths"`
	// Include patterns pick the files to index (default: the files named
	// *.md, *.markdown, *.txt and *.text). A pattern without a slash matches
	// a file's name at any depth, one with a slash its path from the folder;
	// * and ? never match a slash, ** matches any number of folders.
	Include []string `yaml:"include"`
	// Exclude patterns drop files and whole folders (same syntax). Files
	// and folders whose name starts with a dot are always skipped.
	Exclude []string `yaml:"exclude"`
	// ChunkSize is the largest chunk in bytes (default 1200).
	ChunkSize int `yaml:"chunk_size"`
}

// AgentOptions say how one agent uses knowledge (an agent's knowledge:
// section). The zero value uses none.
type AgentOptions struct {
	// Bases the agent searches; the search_knowledge tool is given to an
	// agent with at least one.
	Bases []string `yaml:"bases"`
	// AutoEnrich adds the top chunks for each message to the turn.
	AutoEnrich bool `yaml:"auto_enrich"`
	// TopK is how many chunks auto-enrichment adds and the tool returns by
	// default (default 3, at most 20).
	TopK int `yaml:"top_k"`
}

// Limit is TopK with its default.
func (a AgentOptions) Limit() int {
	if a.TopK <= 0 {
		return DefaultTopK
	}
	return min(a.TopK, maxTopK)
}

func (o Options) maxFileBytes() int64 {
	if o.MaxFileBytes > 0 {
		return o.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

func (o Options) maxPDFBytes() int64 {
	if o.MaxPDFBytes > 0 {
		return o.MaxPDFBytes
	}
	return DefaultMaxPDFBytes
}

func (o Options) debounce() time.Duration {
	if o.Debounce > 0 {
		return o.Debounce
	}
	return DefaultDebounce
}

func (b BaseOptions) chunkSize() int {
	if b.ChunkSize > 0 {
		return b.ChunkSize
	}
	return DefaultChunkSize
}

// Names returns the bases' names, sorted.
func (o Options) Names() []string {
	names := make([]string, 0, len(o.Bases))
	for n := range o.Bases {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

var baseNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Validate reports every problem of o at once, each naming its key under
// bases.<name>: a bad name, a missing folder, a bad glob, a chunk size out
// of range.
func (o Options) Validate() error {
	var errs []error
	for _, name := range o.Names() {
		b := o.Bases[name]
		at := "bases." + name
		if !baseNamePattern.MatchString(name) {
			errs = append(errs, fmt.Errorf("%s: the name must be 1 to 64 characters of a-z, 0-9, _ and -, starting with a letter or digit", at))
		}
		if len(b.Paths) == 0 {
			errs = append(errs, fmt.Errorf("%s.paths: a base needs at least one folder", at))
		}
		seen := map[string]string{}
		for i, p := range b.Paths {
			if p == "" {
				errs = append(errs, fmt.Errorf("%s.paths[%d]: empty", at, i))
				continue
			}
			st, err := os.Stat(p)
			switch {
			case errors.Is(err, os.ErrNotExist):
				errs = append(errs, fmt.Errorf("%s.paths[%d]: folder %s does not exist", at, i, p))
				continue
			case err != nil:
				errs = append(errs, fmt.Errorf("%s.paths[%d]: %w", at, i, err))
				continue
			case !st.IsDir():
				errs = append(errs, fmt.Errorf("%s.paths[%d]: %s is not a folder", at, i, p))
				continue
			}
			short := filepath.Base(filepath.Clean(p))
			if other, dup := seen[short]; dup && len(b.Paths) > 1 {
				errs = append(errs, fmt.Errorf("%s.paths[%d]: %s has the same folder name as %s; files of both would have the same paths", at, i, p, other))
			}
			seen[short] = p
		}
		for i, g := range b.Include {
			if _, err := compileGlob(g); err != nil {
				errs = append(errs, fmt.Errorf("%s.include[%d]: %w", at, i, err))
			}
		}
		for i, g := range b.Exclude {
			if _, err := compileGlob(g); err != nil {
				errs = append(errs, fmt.Errorf("%s.exclude[%d]: %w", at, i, err))
			}
		}
		if b.ChunkSize != 0 && (b.ChunkSize < minChunkSize || b.ChunkSize > maxChunkSize) {
			errs = append(errs, fmt.Errorf("%s.chunk_size: %d is out of range (%d to %d bytes)", at, b.ChunkSize, minChunkSize, maxChunkSize))
		}
	}
	if o.MaxFileBytes < 0 {
		errs = append(errs, errors.New("max_file_bytes: must not be negative"))
	}
	if o.MaxPDFBytes < 0 {
		errs = append(errs, errors.New("max_pdf_bytes: must not be negative"))
	}
	if o.Debounce < 0 {
		errs = append(errs, errors.New("debounce: must not be negative"))
	}
	return errors.Join(errs...)
}

// ValidateAgent checks an agent's knowledge: section against o: every base
// it names exists, top_k is in range.
func (o Options) ValidateAgent(a AgentOptions) error {
	var errs []error
	for i, b := range a.Bases {
		if _, ok := o.Bases[b]; !ok {
			errs = append(errs, fmt.Errorf("bases[%d]: no knowledge base %q (known: %v)", i, b, o.Names()))
		}
	}
	if a.TopK < 0 || a.TopK > maxTopK {
		errs = append(errs, fmt.Errorf("top_k: %d is out of range (1 to %d, 0 for the default %d)", a.TopK, maxTopK, DefaultTopK))
	}
	if a.AutoEnrich && len(a.Bases) == 0 {
		errs = append(errs, errors.New("auto_enrich: needs at least one base"))
	}
	return errors.Join(errs...)
}
