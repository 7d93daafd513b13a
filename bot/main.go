package bot

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/console"
)

const usage = `hookroom — a Matrix chat-agent server with a hook engine

Usage:
  hookroom init   --homeserver URL [flags]
                                  write config.yaml and hookroom.env for a homeserver
                                  (hookroom init -h lists the flags)
  hookroom run    --config FILE   run the server
  hookroom check  --config FILE   validate the configuration and the plugins
  hookroom hooks  --config FILE   list every hook with its effective settings
  hookroom tools  --config FILE   list each agent's effective tools
  hookroom version                print the version

Docs: README.md, docs/hooks.md, config.example.yaml
`

// Version is set at build time with -ldflags "-X github.com/hookroom/hookroom/bot.Version=…".
// Left at "dev", the module version from the build info is used when there
// is one (go install …@v1.2.3).
var Version = "dev"

// buildInfo names this binary: the version (Version, or the module version
// of a go install …@v1.2.3 build), the VCS revision and time it was built
// from, whether the tree had local changes, and the Go version. hookroom
// version, the console and hookroom_build_info all report it.
type buildInfo struct {
	version, revision, at, goVersion string
	modified                         bool
}

func readBuildInfo() buildInfo {
	b := buildInfo{version: Version}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.goVersion = info.GoVersion
	if b.version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.revision = s.Value
		case "vcs.time":
			b.at = s.Value
		case "vcs.modified":
			b.modified = s.Value == "true"
		}
	}
	return b
}

// versionLine describes this build for `hookroom version`.
func versionLine() string {
	b := readBuildInfo()
	line := "hookroom " + b.version
	if b.revision != "" {
		line += " (revision " + b.revision[:min(len(b.revision), 12)]
		if b.at != "" {
			line += ", " + b.at
		}
		if b.modified {
			line += ", modified"
		}
		line += ")"
	}
	if b.goVersion != "" {
		line += " " + b.goVersion
	}
	return line
}

// Main is the hookroom command line. It returns the process exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "path to config.yaml")
	asJSON := fs.Bool("json", false, "print JSON (hooks, tools)")
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, versionLine())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "init":
		ctx, stop := stopOnSignal()
		defer stop()
		return runInit(ctx, rest, initIO{stdin: os.Stdin, interactive: stdinIsTerminal(),
			lookupEnv: os.LookupEnv, stdout: stdout, stderr: stderr})
	case "run", "check", "hooks", "tools":
	default:
		fmt.Fprintf(stderr, "hookroom: unknown command %q\n\n%s", cmd, usage)
		return 2
	}
	if err := fs.Parse(rest); err != nil {
		return 2
	}
	if err := hardenProcess(); err != nil {
		fmt.Fprintf(stderr, "hookroom: %v\n", err)
		return 1
	}
	ctx, stop := stopOnSignal()
	defer stop()
	cfg, err := config.Load(ctx, *cfgPath)
	if err != nil {
		printErrors(stderr, err)
		return 1
	}
	logs := console.NewLogBuffer(console.DefaultLogLines)
	log, err := NewLogger(cfg.Log, stderr, logs)
	if err != nil {
		fmt.Fprintf(stderr, "hookroom: %v\n", err)
		return 1
	}
	ctx = log.WithContext(ctx)
	switch cmd {
	case "check":
		b, err := New(ctx, cfg, Options{Inspect: true})
		if err != nil {
			printErrors(stderr, err)
			return 1
		}
		b.Close()
		if err := checkAccounts(cfg); err != nil {
			printErrors(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s is valid: %d agents, %d rooms, %d plugins\n", cfg.Path, len(cfg.Agents), len(cfg.Rooms), len(cfg.Plugins))
		return 0
	case "hooks":
		b, err := New(ctx, cfg, Options{Inspect: true})
		if err != nil {
			printErrors(stderr, err)
			return 1
		}
		defer b.Close()
		infos := b.Registry().Hooks()
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(infos)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "EVENT\tMODE\t#\tPLUGIN\tHOOK\tPRIORITY\tTIMEOUT\tPOLICY\tAGENTS\tROOMS")
		for _, h := range infos {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%d\t%s\t%s\t%v\t%v\n", h.Event, h.Mode, h.Position, h.Plugin, h.Hook, h.Priority, h.Timeout, h.FailurePolicy, h.Agents, h.Rooms)
		}
		_ = tw.Flush()
		fmt.Fprintln(stdout, "\nEach agent's tools: hookroom tools --config", cfg.Path)
		return 0
	case "tools":
		b, err := New(ctx, cfg, Options{Inspect: true})
		if err != nil {
			printErrors(stderr, err)
			return 1
		}
		defer b.Close()
		printTools(stdout, b.Tools(), *asJSON)
		return 0
	}
	b, err := New(ctx, cfg, Options{Watch: true, Logs: logs})
	if err != nil {
		logErrors(&log, zerolog.ErrorLevel, err, "failed to start")
		return 1
	}
	if err := b.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("hookroom stopped with an error")
		return 1
	}
	return 0
}

// printTools prints each agent's effective tools as a table or JSON.
func printTools(w io.Writer, list []AgentTools, asJSON bool) {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(list)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tTOOL\tSOURCE\tDESCRIPTION")
	for _, a := range list {
		if len(a.Tools) == 0 {
			fmt.Fprintf(tw, "%s\t(none)\t\t\n", a.Agent)
		}
		for _, t := range a.Tools {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", a.Agent, t.Name, t.Source, t.Description)
		}
	}
	_ = tw.Flush()
}

// stopOnSignal returns a context cancelled on SIGINT or SIGTERM. Unlike
// signal.NotifyContext's, its cause is the plain context.Canceled: requests
// cut short by a shutdown then read as cancelled (logged at debug by the
// Matrix client, see routineWarnings), not as failed with a "signal received"
// error.
func stopOnSignal() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() { signal.Stop(sigs); cancel() }
}

// printErrors prints err for the command line: each problem of a
// configuration error list on a line of its own, behind what failed.
func printErrors(w io.Writer, err error) {
	for _, e := range splitErrors(err) {
		fmt.Fprintf(w, "hookroom: %v\n", e)
	}
}
