package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"go.mau.fi/util/dbutil"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
	"github.com/hookroom/hookroom/internal/database"
	kb "github.com/hookroom/hookroom/knowledge"
	"github.com/hookroom/hookroom/plugins"
	kplugin "github.com/hookroom/hookroom/plugins/builtin/knowledge"
)

const knowledgeUsage = `Usage:
  hookroom knowledge reindex [--config FILE] [--full] [--json] [BASE...]
        bring the knowledge bases up to date with their folders now: new and
        changed files are indexed, deleted ones removed (--full: every file is
        indexed again, as if new)
  hookroom knowledge status  [--config FILE] [--json] [BASE...]
        each base's files, chunks, bytes, last indexing and skipped files

The bases are those of the knowledge plugin's settings in config.yaml
(plugins: - builtin: knowledge); without BASE, all of them. Both commands
use hookroom's database and are safe while hookroom runs.
`

// runKnowledge is hookroom knowledge. It returns the process exit code: 0
// when every base was reported, 1 when something failed (an unknown base,
// an unreachable database, a failed re-index), 2 on a usage error.
func runKnowledge(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, knowledgeUsage)
		return 2
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, knowledgeUsage)
		return 0
	case "reindex", "status":
	default:
		fmt.Fprintf(stderr, "hookroom knowledge: unknown command %q\n\n%s", sub, knowledgeUsage)
		return 2
	}
	fs := flag.NewFlagSet("knowledge "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, knowledgeUsage)
		fmt.Fprintf(stderr, "\nFlags of hookroom knowledge %s:\n", sub)
		fs.PrintDefaults()
	}
	cfgPath := fs.String("config", "config.yaml", "path to config.yaml")
	asJSON := fs.Bool("json", false, "print the bases as JSON")
	var full bool
	if sub == "reindex" {
		fs.BoolVar(&full, "full", false, "index every file again, also unchanged ones")
	}
	names, err := parseInterleaved(fs, rest)
	if err != nil {
		return 2
	}
	ctx, cfg, err := load(ctx, *cfgPath, stderr, nil)
	if err != nil {
		printErrors(stderr, err)
		return 1
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "hookroom knowledge %s: %v\n", sub, err)
		return 1
	}
	entry, at, ok := knowledgeEntry(cfg)
	if !ok {
		return fail(fmt.Errorf("%s enables no knowledge plugin (plugins: - builtin: knowledge), so there is no knowledge base", cfg.Path))
	}
	settings, err := hooks.NewSettings(entry.Settings)
	if err != nil {
		return fail(cfg.Errorf(at+".settings", "%v", err))
	}
	db, err := openSharedDatabase(ctx, cfg)
	if err != nil {
		return fail(err)
	}
	defer db.Close()
	ix, err := kplugin.OpenIndex(ctx, plugins.Env{Name: kplugin.Name, Settings: settings, ConfigDir: cfg.Dir, DB: db})
	if err != nil {
		var se *plugins.SettingsError
		if errors.As(err, &se) {
			key := at + ".settings"
			if se.Path != "" {
				key += "." + se.Path
			}
			return fail(cfg.Errorf(key, "%v", se.Err))
		}
		return fail(err)
	}
	known := ix.Options().Names()
	if len(names) == 0 {
		names = known
	}
	for _, n := range names {
		if _, ok := ix.Options().Bases[n]; !ok {
			list := strings.Join(known, ", ")
			if list == "" {
				list = "none"
			}
			return fail(fmt.Errorf("no knowledge base named %q in %s (its bases: %s)", n, cfg.Path, list))
		}
	}

	code := 0
	reports := map[string]*kb.Report{}
	if sub == "reindex" {
		for _, n := range names {
			rep, err := ix.Reindex(ctx, n, full)
			if err != nil {
				fmt.Fprintf(stderr, "hookroom knowledge reindex: %v\n", err)
				code = 1
				continue
			}
			reports[n] = &rep
		}
	}
	all, err := ix.Status(ctx)
	if err != nil {
		return fail(err)
	}
	out := make([]knowledgeBase, 0, len(names))
	for _, n := range names {
		for _, s := range all {
			if s.Base == n {
				out = append(out, knowledgeBase{BaseStatus: s, Reindexed: reports[n]})
			}
		}
	}
	if *asJSON {
		printJSON(stdout, out)
	} else {
		printKnowledge(stdout, out)
	}
	return code
}

// knowledgeBase is what hookroom knowledge prints of one base: its state
// and, after reindex, what the re-index did.
type knowledgeBase struct {
	kb.BaseStatus
	Reindexed *kb.Report `json:"reindexed,omitempty"`
}

// printKnowledge prints the bases for people, one paragraph each.
func printKnowledge(w io.Writer, bases []knowledgeBase) {
	for _, b := range bases {
		when := "never indexed"
		if !b.LastIndexed.IsZero() {
			when = "last indexed " + b.LastIndexed.UTC().Format("2006-01-02 15:04:05") + " UTC"
		}
		fmt.Fprintf(w, "%s: %d files, %d chunks (%d with embeddings), %d bytes, %s\n",
			b.Base, b.Files, b.Chunks, b.Embedded, b.Bytes, when)
		if r := b.Reindexed; r != nil {
			fmt.Fprintf(w, "  re-indexed in %s: %d changed (%d chunks, %d bytes), %d unchanged, %d removed\n",
				r.Duration.Round(time.Millisecond), r.Changed, r.Chunks, r.Bytes, r.Unchanged, r.Removed)
		}
		if b.Error != "" {
			fmt.Fprintf(w, "  problem: %s\n", b.Error)
		}
		for _, f := range b.Skipped {
			fmt.Fprintf(w, "  skipped %s: %s\n", f.Path, f.Error)
		}
	}
}

// knowledgeEntry returns config.yaml's enabled "builtin: knowledge" entry
// and its key path (plugins[N]).
func knowledgeEntry(cfg *config.Config) (config.PluginEntry, string, bool) {
	for i, e := range cfg.Plugins {
		if e.Builtin == kplugin.Name && (e.Enabled == nil || *e.Enabled) {
			return e, fmt.Sprintf("plugins[%d]", i), true
		}
	}
	return config.PluginEntry{}, "", false
}

// openSharedDatabase opens the database config.yaml names without the
// lock that makes a server its only user, so that it works next to a
// running hookroom: SQLite (which must exist) in WAL mode with a busy
// timeout, so that the server's and this process's transactions wait for
// each other instead of failing, or PostgreSQL.
func openSharedDatabase(ctx context.Context, cfg *config.Config) (*dbutil.Database, error) {
	uri := cfg.Database.URI.Reveal()
	if cfg.Database.Type == config.DatabasePostgres {
		where := redactDatabaseURI(uri)
		db, err := dbutil.NewWithDialect(uri, "postgres")
		if err != nil {
			return nil, fmt.Errorf("failed to open the postgres database %s: %w", where, err)
		}
		pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		if err := db.RawDB.PingContext(pctx); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("failed to reach the postgres database %s: %w", where, err)
		}
		return db, nil
	}
	path := strings.TrimPrefix(uri, "file:")
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	path = cfg.ResolvePath(path)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("failed to open the sqlite database %s (database.uri in %s; has hookroom run with it?): %w", path, cfg.Path, err)
	}
	return database.OpenSQLite(ctx, path)
}

// redactDatabaseURI is a PostgreSQL connection string without its
// password and parameters, for messages.
func redactDatabaseURI(uri string) string {
	if u, err := url.Parse(uri); err == nil && u.Scheme != "" {
		if u.User != nil {
			u.User = url.User(u.User.Username())
		}
		u.RawQuery, u.Fragment = "", ""
		return u.String()
	}
	return "(database.uri)"
}
