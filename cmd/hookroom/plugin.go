package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hookroom/hookroom/bot"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/internal/buildinfo"
	"github.com/hookroom/hookroom/plugins/installer"
)

const pluginUsage = `Usage:
  hookroom plugin install [--config FILE] [--json] SOURCE
        SOURCE: a plugin directory, a .tar.gz archive, a git URL (https://, ssh://,
        git://, file://, user@host:path) with an optional #REF, or git+PATH[#REF]
  hookroom plugin update  [--config FILE] [--json] NAME...
        install the newest content of each plugin from the source it came from
  hookroom plugin remove  [--config FILE] [--force] NAME
  hookroom plugin list    [--config FILE] [--json] [--check]
        --check: exit 1 when a plugin's files changed or are missing

Plugins go into plugin_install.dir of config.yaml (default ./plugins next to it),
recorded in its hookroom-plugins.lock. Install and update first ask the
plugin:before_install hooks of the plugins config.yaml enables. An installed
plugin runs once its directory is in the plugins list of config.yaml.
`

// runPlugin is hookroom plugin.
func runPlugin(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, pluginUsage)
		return 2
	}
	sub, rest := args[0], args[1:]
	fs := flag.NewFlagSet("plugin "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, pluginUsage)
		fmt.Fprintf(stderr, "\nFlags of hookroom plugin %s:\n", sub)
		fs.PrintDefaults()
	}
	cfgPath := fs.String("config", "config.yaml", "path to config.yaml")
	var asJSON, force, check bool
	var minArgs, maxArgs int
	switch sub {
	case "help", "-h", "--help":
		fmt.Fprint(stdout, pluginUsage)
		return 0
	case "install":
		fs.BoolVar(&asJSON, "json", false, "print what was installed as JSON")
		minArgs, maxArgs = 1, 1
	case "update":
		fs.BoolVar(&asJSON, "json", false, "print what was updated as JSON")
		minArgs, maxArgs = 1, -1
	case "remove":
		fs.BoolVar(&force, "force", false, "remove the plugin even though config.yaml enables it")
		minArgs, maxArgs = 1, 1
	case "list":
		fs.BoolVar(&asJSON, "json", false, "print the list as JSON")
		fs.BoolVar(&check, "check", false, "exit 1 when an installed plugin's files changed or are missing")
	default:
		fmt.Fprintf(stderr, "hookroom plugin: unknown command %q\n\n%s", sub, pluginUsage)
		return 2
	}
	names, err := parseInterleaved(fs, rest)
	if err != nil {
		return 2
	}
	if len(names) < minArgs || (maxArgs >= 0 && len(names) > maxArgs) {
		what := map[string]string{"install": "one SOURCE", "update": "one or more NAMEs", "remove": "one NAME", "list": "no arguments"}[sub]
		fmt.Fprintf(stderr, "hookroom plugin %s: takes %s, not %q\n\n%s", sub, what, names, pluginUsage)
		return 2
	}

	// The source may be a git URL with a password: it never reaches the
	// output, whatever the installer and git say.
	var mask *strings.Replacer
	if sub == "install" {
		mask = passwordMask(names[0])
	}
	out := maskWriter{stdout, mask}
	errOut := maskWriter{stderr, mask}

	ctx, cfg, err := load(ctx, *cfgPath, errOut, nil)
	if err != nil {
		printErrors(errOut, err)
		return 1
	}
	p := pluginCmd{cfg: cfg, stdout: out, stderr: errOut, json: asJSON}
	opts := installerOptions(cfg)
	if sub == "install" || sub == "update" {
		closeGate, err := p.gate(ctx, &opts)
		if err != nil {
			printErrors(errOut, err)
			return 1
		}
		defer closeGate()
	}
	if p.inst, err = installer.New(opts); err != nil {
		printErrors(errOut, err)
		return 1
	}
	switch sub {
	case "install":
		return p.install(ctx, names[0])
	case "update":
		return p.update(ctx, names)
	case "remove":
		return p.remove(ctx, names[0], force)
	}
	return p.list(ctx, check)
}

// pluginCmd is one hookroom plugin command on a loaded configuration.
type pluginCmd struct {
	cfg            *config.Config
	inst           *installer.Installer
	stdout, stderr io.Writer
	json           bool
}

// installerOptions maps config.yaml's plugin_install onto the installer's
// options.
func installerOptions(cfg *config.Config) installer.Options {
	pi := cfg.PluginInstall
	return installer.Options{
		Dir:             pi.Dir,
		GitTimeout:      pi.GitTimeout.Std(),
		MaxSize:         int64(pi.MaxSize),
		MaxFiles:        pi.MaxFiles,
		LockWait:        pi.LockWait.Std(),
		Git:             pi.Git,
		HookroomVersion: buildinfo.Read().Version,
	}
}

// gate sets opts.Gate to the plugin:before_install hooks of the plugins
// config.yaml enables, loaded as hookroom check loads them. Entries for
// directories of the plugin directory that do not exist yet (a plugin
// listed before it is installed) are left out: they have no hooks to ask.
// The returned function stops the plugins.
func (p *pluginCmd) gate(ctx context.Context, opts *installer.Options) (func(), error) {
	cfg := p.cfg.Clone()
	dir := filepath.Clean(opts.Dir)
	cfg.Plugins = slices.DeleteFunc(cfg.Plugins, func(e config.PluginEntry) bool {
		if e.Builtin != "" || filepath.Dir(filepath.Clean(e.AbsPath)) != dir {
			return false
		}
		_, err := os.Stat(e.AbsPath)
		return errors.Is(err, fs.ErrNotExist)
	})
	b, err := bot.New(ctx, cfg, bot.Options{Inspect: true})
	if err != nil {
		return nil, fmt.Errorf("failed to load the plugins of %s, whose plugin:before_install hooks decide on installs: %w", cfg.Path, err)
	}
	opts.Gate = installer.HookGate(b.Registry())
	return b.Close, nil
}

// installOutput is what install and update print with --json: the
// installer's report, and whether config.yaml enables the plugin.
type installOutput struct {
	installer.Installed
	// Enabled: an entry of config.yaml's plugins list names the plugin's
	// directory and is not disabled.
	Enabled bool `json:"enabled"`
	// ConfigEntry is the plugins list entry that enables it.
	ConfigEntry string `json:"config_entry"`
}

func (p *pluginCmd) install(ctx context.Context, source string) int {
	res, err := p.inst.Install(ctx, source)
	if err != nil {
		printErrors(p.stderr, err)
		return 1
	}
	if p.json {
		printJSON(p.stdout, p.output(res))
		return 0
	}
	p.printInstalled(res)
	return 0
}

func (p *pluginCmd) update(ctx context.Context, names []string) int {
	code := 0
	outs := []installOutput{}
	for _, name := range names {
		res, err := p.inst.Update(ctx, name)
		if err != nil {
			printErrors(p.stderr, err)
			code = 1
			continue
		}
		if p.json {
			outs = append(outs, p.output(res))
			continue
		}
		p.printInstalled(res)
	}
	if p.json {
		printJSON(p.stdout, outs)
	}
	return code
}

func (p *pluginCmd) output(res installer.Installed) installOutput {
	_, enabled := p.listed(res.Dir)
	return installOutput{Installed: res, Enabled: enabled, ConfigEntry: "- " + p.entryPath(res.Dir)}
}

// printInstalled reports an install or update: what is in place now, and
// what the operator still has to do.
func (p *pluginCmd) printInstalled(res installer.Installed) {
	w := p.stdout
	from := res.SourceString()
	if res.Commit != "" {
		from += " (commit " + shortCommit(res.Commit) + ")"
	}
	switch {
	case res.Unchanged:
		fmt.Fprintf(w, "%s %s is up to date: %s in %s\n", res.Name, res.Version, from, res.Dir)
	case res.Previous != nil:
		fmt.Fprintf(w, "updated %s %s → %s from %s in %s\n", res.Name, res.Previous.Version, res.Version, from, res.Dir)
	default:
		fmt.Fprintf(w, "installed %s %s from %s into %s\n", res.Name, res.Version, from, res.Dir)
	}
	fmt.Fprintf(w, "checksum %s\n", res.Checksum)
	for _, warning := range res.Warnings {
		fmt.Fprintf(w, "warning: %s\n", warning)
	}
	i, enabled := p.listed(res.Dir)
	switch {
	case enabled && !res.Unchanged:
		fmt.Fprintf(w, "%s enables it (%s): a running hookroom loads the new files by itself (hot reload).\n", p.cfg.Path, p.entryLine(i))
	case enabled:
	case i >= 0:
		fmt.Fprintf(w, "%s lists it with enabled: false (%s).\n", p.cfg.Path, p.entryLine(i))
	default:
		fmt.Fprintf(w, "To enable it, add to plugins: in %s:\n  - %s\n", p.cfg.Path, p.entryPath(res.Dir))
	}
}

func (p *pluginCmd) remove(ctx context.Context, name string, force bool) int {
	dir := filepath.Join(p.inst.Dir(), name)
	i, enabled := p.listed(dir)
	if enabled && !force {
		fmt.Fprintf(p.stderr, "hookroom: %s still enables plugin %s: delete its entry (%s) first, or remove it anyway with --force\n",
			p.cfg.Path, name, p.entryLine(i))
		return 1
	}
	e, err := p.inst.Remove(ctx, name)
	if err != nil {
		printErrors(p.stderr, err)
		return 1
	}
	fmt.Fprintf(p.stdout, "removed %s %s (%s)\n", e.Name, e.Version, dir)
	if i >= 0 {
		fmt.Fprintf(p.stdout, "%s still lists it (%s): delete that entry, or hookroom check and run fail on it\n", p.cfg.Path, p.entryLine(i))
	}
	return 0
}

func (p *pluginCmd) list(ctx context.Context, check bool) int {
	list, err := p.inst.List(ctx)
	if err != nil {
		printErrors(p.stderr, err)
		return 1
	}
	if p.json {
		if list == nil {
			list = []installer.Status{}
		}
		printJSON(p.stdout, list)
	} else if len(list) == 0 {
		fmt.Fprintf(p.stdout, "no plugins in %s\n", p.inst.Dir())
	} else {
		tw := tabwriter.NewWriter(p.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tVERSION\tSTATE\tSOURCE\tINSTALLED")
		for _, s := range list {
			installed := "-"
			if !s.InstalledAt.IsZero() {
				installed = s.InstalledAt.UTC().Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, cmpOr(s.Version, "-"), s.State, cmpOr(s.SourceString(), "-"), installed)
		}
		_ = tw.Flush()
		for _, s := range list {
			if s.Problem != "" {
				fmt.Fprintf(p.stdout, "%s: %s\n", s.Name, s.Problem)
			}
		}
	}
	if !check {
		return 0
	}
	var drifted []string
	for _, s := range list {
		if s.State == installer.StateModified || s.State == installer.StateMissing {
			drifted = append(drifted, fmt.Sprintf("%s (%s)", s.Name, s.State))
		}
	}
	if len(drifted) > 0 {
		fmt.Fprintf(p.stderr, "hookroom: installed plugins differ from %s: %s\n",
			filepath.Join(p.inst.Dir(), installer.LockFile), strings.Join(drifted, ", "))
		return 1
	}
	return 0
}

// listed returns the index of the plugins list entry naming dir, and
// whether it is enabled; -1 when none does.
func (p *pluginCmd) listed(dir string) (int, bool) {
	dir = filepath.Clean(dir)
	for i, e := range p.cfg.Plugins {
		if e.Builtin == "" && filepath.Clean(e.AbsPath) == dir {
			return i, e.IsEnabled()
		}
	}
	return -1, false
}

// entryPath is how config.yaml's plugins list names dir: relative to the
// config directory ("./plugins/geo") when it lies below it.
func (p *pluginCmd) entryPath(dir string) string {
	rel, err := filepath.Rel(p.cfg.Dir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return dir
	}
	return "./" + filepath.ToSlash(rel)
}

// entryLine names plugins list entry i: "config.yaml:12: - ./plugins/geo".
func (p *pluginCmd) entryLine(i int) string {
	e := p.cfg.Plugins[i]
	return fmt.Sprintf("%s:%d: - %s", filepath.Base(p.cfg.Path), p.cfg.Line(config.JoinIndex("plugins", i)), e.Path)
}

// shortCommit abbreviates a commit hash as git log --abbrev=12 does.
func shortCommit(c string) string { return c[:min(len(c), 12)] }

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// parseInterleaved parses fs's flags wherever they stand among the
// arguments ("install ./geo --json" as "install --json ./geo") and returns
// the other arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, nil
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

// passwordMask returns a replacer that masks the password of a git URL
// among the install sources ("https://user:PASSWORD@host/repo.git"), as
// written and as decoded; nil when there is none. The installer leaves it
// out of what it prints and records: this is a second line of defence.
func passwordMask(source string) *strings.Replacer {
	s := source
	if len(s) >= 4 && strings.EqualFold(s[:4], "git+") {
		s = s[4:]
	}
	s, _, _ = strings.Cut(s, "#")
	_, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil
	}
	authority, _, _ := strings.Cut(rest, "/")
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return nil
	}
	_, raw, ok := strings.Cut(authority[:at], ":")
	if !ok || raw == "" {
		return nil
	}
	pairs := []string{raw, "***"}
	if dec, err := url.PathUnescape(raw); err == nil && dec != raw {
		pairs = append(pairs, dec, "***")
	}
	if esc := url.QueryEscape(raw); esc != raw {
		pairs = append(pairs, esc, "***")
	}
	return strings.NewReplacer(pairs...)
}

// maskWriter writes through m (when not nil) to w. Every write of the
// plugin commands is a whole line or more, so a secret is never split
// across two writes.
type maskWriter struct {
	w io.Writer
	m *strings.Replacer
}

func (mw maskWriter) Write(b []byte) (int, error) {
	if mw.m == nil {
		return mw.w.Write(b)
	}
	if _, err := io.WriteString(mw.w, mw.m.Replace(string(b))); err != nil {
		return 0, err
	}
	return len(b), nil
}
