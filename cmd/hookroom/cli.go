package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/rs/zerolog"

	"github.com/hookroom/hookroom/bot"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/console"
	"github.com/hookroom/hookroom/internal/buildinfo"
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
  hookroom plugin install|update|remove|list [--config FILE] ...
                                  install and manage plugins in plugin_install.dir
                                  (hookroom plugin help lists the commands)
  hookroom appservice registration --config FILE [--out FILE] [--env FILE]
                                  print the application service registration that
                                  lets hookroom create its accounts without passwords
  hookroom knowledge reindex|status [--config FILE] [--full] [--json] [BASE...]
                                  re-index the knowledge bases now, or show their state
  hookroom e2ee recovery-key [--config FILE] [--env FILE] [--set] [--force]
                                  make the recovery key of the agents' key backup
  hookroom version                print the version

Docs: README.md, docs/operations.md, docs/hooks.md, config.example.yaml
`

// run is the hookroom command line. It returns the process exit code: 0
// on success, 1 when the command failed, 2 on a usage error. SIGINT and
// SIGTERM end it (hookroom run stops in order).
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := stopOnSignal()
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

// runContext is run until ctx ends.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, buildinfo.Read().String())
		return 0
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	case "init":
		return runInit(ctx, rest, initIO{stdin: os.Stdin, interactive: stdinIsTerminal(),
			lookupEnv: os.LookupEnv, stdout: stdout, stderr: stderr})
	case "plugin":
		return runPlugin(ctx, rest, stdout, stderr)
	case "appservice":
		return runAppService(ctx, rest, stdout, stderr)
	case "knowledge":
		return runKnowledge(ctx, rest, stdout, stderr)
	case "e2ee":
		return runE2EE(rest, e2eeIO{stdin: os.Stdin, stdout: stdout, stderr: stderr})
	case "run", "check", "hooks", "tools":
		return runServer(ctx, cmd, rest, stdout, stderr)
	}
	fmt.Fprintf(stderr, "hookroom: unknown command %q\n\n%s", cmd, usage)
	return 2
}

// runServer is hookroom run, check, hooks and tools.
func runServer(ctx context.Context, cmd string, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgPath := fs.String("config", "config.yaml", "path to config.yaml")
	asJSON := fs.Bool("json", false, "print JSON (hooks, tools)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hookroom %s: unexpected argument %q\n", cmd, fs.Arg(0))
		return 2
	}
	logs := console.NewLogBuffer(console.DefaultLogLines)
	ctx, cfg, err := load(ctx, *cfgPath, stderr, logs)
	if err != nil {
		printErrors(stderr, err)
		return 1
	}
	switch cmd {
	case "check":
		b, err := bot.New(ctx, cfg, bot.Options{Inspect: true})
		if err != nil {
			printErrors(stderr, err)
			return 1
		}
		b.Close()
		if err := bot.CheckAccounts(cfg); err != nil {
			printErrors(stderr, err)
			return 1
		}
		fmt.Fprintf(stdout, "%s is valid: %d agents, %d rooms, %d plugins\n", cfg.Path, len(cfg.Agents), len(cfg.Rooms), len(cfg.Plugins))
		return 0
	case "hooks":
		b, err := bot.New(ctx, cfg, bot.Options{Inspect: true})
		if err != nil {
			printErrors(stderr, err)
			return 1
		}
		defer b.Close()
		infos := b.Registry().Hooks()
		if *asJSON {
			printJSON(stdout, infos)
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
		b, err := bot.New(ctx, cfg, bot.Options{Inspect: true})
		if err != nil {
			printErrors(stderr, err)
			return 1
		}
		defer b.Close()
		printTools(stdout, b.Tools(), *asJSON)
		return 0
	}
	log := *zerolog.Ctx(ctx)
	b, err := bot.New(ctx, cfg, bot.Options{Watch: true, Logs: logs})
	if err != nil {
		bot.LogStartFailure(&log, err)
		return 1
	}
	if err := b.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		log.Error().Err(err).Msg("hookroom stopped with an error")
		return 1
	}
	return 0
}

// load hardens the process (the configuration holds secrets), loads the
// configuration at path and returns ctx with a logger for it, writing to
// stderr and, when given, to logs.
func load(ctx context.Context, path string, stderr io.Writer, logs *console.LogBuffer) (context.Context, *config.Config, error) {
	if err := hardenProcess(); err != nil {
		return ctx, nil, err
	}
	cfg, err := config.Load(ctx, path)
	if err != nil {
		return ctx, nil, err
	}
	var tee []io.Writer
	if logs != nil {
		tee = append(tee, logs)
	}
	log, err := bot.NewLogger(cfg.Log, stderr, tee...)
	if err != nil {
		return ctx, nil, err
	}
	return log.WithContext(ctx), cfg, nil
}

// printTools prints each agent's effective tools as a table or JSON.
func printTools(w io.Writer, list []bot.AgentTools, asJSON bool) {
	if asJSON {
		printJSON(w, list)
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

// printJSON prints v as indented JSON.
func printJSON(w io.Writer, v any) {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// stopOnSignal returns a context cancelled on SIGINT or SIGTERM. Unlike
// signal.NotifyContext's, its cause is the plain context.Canceled: requests
// cut short by a shutdown then read as cancelled (logged at debug by the
// Matrix client), not as failed with a "signal received" error.
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
// configuration error list, and each line of a message of several lines
// (a plugin's manifest problems), on a line of its own behind "hookroom: ".
func printErrors(w io.Writer, err error) {
	for _, e := range bot.SplitErrors(err) {
		for line := range strings.SplitSeq(e.Error(), "\n") {
			fmt.Fprintf(w, "hookroom: %s\n", line)
		}
	}
}
