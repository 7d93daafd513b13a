package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/matrixio"
)

// The environment variables the appservice block of config.yaml reads its
// tokens from, as hookroom appservice registration suggests it.
const (
	envASToken = "HOOKROOM_AS_TOKEN"
	envHSToken = "HOOKROOM_HS_TOKEN"
)

const appServiceUsage = `Usage: hookroom appservice registration [--config FILE] [--out FILE] [--env FILE]

Prints the application service registration file for the accounts of
config.yaml (the router, which is the service's sender, and every agent
hookroom creates), to add to the homeserver's configuration. hookroom then
registers and logs in its accounts with the file's as_token: no password
and no shared secret. The tokens in matrix.registration.appservice are
reused; missing ones are generated (32 random bytes).

`

// runAppService is hookroom appservice. It returns the process exit code.
func runAppService(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "registration" {
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, appServiceUsage)
			return 0
		}
		fmt.Fprint(stderr, appServiceUsage)
		return 2
	}
	fs := flag.NewFlagSet("appservice registration", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, appServiceUsage)
		fs.PrintDefaults()
	}
	cfgPath := fs.String("config", "config.yaml", "path to config.yaml")
	out := fs.String("out", "", "write the registration to this file (mode 0600) instead of printing it")
	envPath := fs.String("env", "", "add the generated tokens to this env file (KEY=value lines, mode 0600; created if missing)")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hookroom appservice registration: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	ctx, cfg, err := load(ctx, *cfgPath, stderr, nil)
	if err != nil {
		printErrors(stderr, err)
		return 1
	}
	if err := appServiceRegistration(ctx, cfg, *out, *envPath, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "hookroom appservice registration: %v\n", err)
		return 1
	}
	return 0
}

// appServiceRegistration builds the registration of cfg's accounts and
// writes it to out (stdout when empty), the generated tokens to envPath
// when given, and the next steps to the terminal.
func appServiceRegistration(_ context.Context, cfg *config.Config, out, envPath string, stdout, stderr io.Writer) error {
	reg, generated, err := registrationFor(cfg)
	if err != nil {
		return err
	}
	data, err := reg.Marshal()
	if err != nil {
		return err
	}
	// The env file is checked before anything is written: new tokens
	// written to out but not to envPath would be lost.
	var envText []byte
	if envPath != "" && len(generated) > 0 {
		if envText, err = envFileWith(envPath, generated); err != nil {
			return err
		}
	}
	steps := stderr // the file goes to stdout, to redirect it
	if out != "" {
		if err := writeFileAtomic(out, data, 0o600); err != nil {
			return err
		}
		steps = stdout
	}
	if envText != nil {
		if err := writeFileAtomic(envPath, envText, 0o600); err != nil {
			return err
		}
	}
	if out == "" {
		if _, err := stdout.Write(data); err != nil {
			return err
		}
	}

	w := steps
	if out != "" {
		fmt.Fprintf(w, "Wrote %s (mode 0600: it holds hookroom's token).\n", out)
	}
	fmt.Fprintf(w, "Application service %q: sender @%s:%s, users %s.\n\n", reg.ID, reg.SenderLocalpart, cfg.Matrix.ServerName, reg.Namespaces.Users[0].Regex)
	file := out
	if file == "" {
		file = "the registration file"
	}
	step := 0
	next := func(format string, args ...any) {
		step++
		fmt.Fprintf(w, "%d. "+format+"\n", append([]any{step}, args...)...)
	}
	fmt.Fprintln(w, "Next steps:")
	next("Copy %s to the homeserver's machine, list it in its configuration and restart it:\n"+
		"     Synapse  (homeserver.yaml): app_service_config_files: [/path/to/hookroom-registration.yaml]\n"+
		"     Dendrite (dendrite.yaml):   app_service_api: {config_files: [/path/to/hookroom-registration.yaml]}", file)
	if len(generated) > 0 {
		if envPath != "" {
			next("The new tokens are in %s (%s).", envPath, strings.Join(envNames(generated), ", "))
		} else {
			var lines strings.Builder
			for _, kv := range generated {
				fmt.Fprintf(&lines, "\n     %s=%s", kv[0], shellQuote(kv[1]))
			}
			next("Add the new tokens to the environment hookroom runs with (hookroom.env, mode 0600):%s", lines.String())
		}
		next("In config.yaml, put this under matrix.registration:\n     appservice:\n       as_token: ${%s}\n       hs_token: ${%s}",
			envASToken, envHSToken)
	}
	if r := cfg.Matrix.Registration; r.SharedSecret.IsSet() || r.Token.IsSet() {
		next("Remove matrix.registration.shared_secret and token from config.yaml: hookroom uses one method.")
	}
	next("hookroom check --config %s, then hookroom run: it registers and logs in the accounts through the application service.", shellQuote(cfg.Path))
	if cfg.Matrix.Registration.AppService.UserPrefix == "" {
		fmt.Fprintln(w, "After adding an agent, run this command again and replace the file on the homeserver (or set matrix.registration.appservice.user_prefix).")
	}
	return nil
}

// registrationFor builds the registration of cfg's accounts: the router
// is the sender, and the namespace covers it and every agent whose account
// hookroom creates (not those configured as existing accounts). It returns
// the environment variables (name, value) of the tokens it generated.
func registrationFor(cfg *config.Config) (*matrixio.AppServiceRegistration, [][2]string, error) {
	if cfg.Matrix.ServerName == "" {
		return nil, nil, errors.New("matrix.server_name is required: the registration's namespace is made of user ids")
	}
	as := cfg.Matrix.Registration.AppService
	opts := matrixio.AppServiceOptions{
		ID:              as.ID,
		ServerName:      cfg.Matrix.ServerName,
		SenderLocalpart: cfg.Matrix.Router.Username,
		UserPrefix:      as.UserPrefix,
		ASToken:         as.ASToken.Reveal(),
		HSToken:         as.HSToken.Reveal(),
	}
	for _, name := range cfg.AgentNames() {
		if a := cfg.Agents[name]; !a.Account.IsSet() {
			opts.Localparts = append(opts.Localparts, a.Username)
		}
	}
	reg, err := matrixio.NewAppServiceRegistration(opts)
	if err != nil {
		return nil, nil, err
	}
	var generated [][2]string
	if opts.ASToken == "" {
		generated = append(generated, [2]string{envASToken, reg.ASToken})
	}
	if opts.HSToken == "" {
		generated = append(generated, [2]string{envHSToken, reg.HSToken})
	}
	return reg, generated, nil
}

func envNames(kvs [][2]string) []string {
	names := make([]string, len(kvs))
	for i, kv := range kvs {
		names[i] = kv[0]
	}
	return names
}

// envFileWith returns the env file at path (empty when missing) with
// KEY=value lines for kvs appended. It refuses when the file already sets
// one of the keys: the configuration would then read the old value.
func envFileWith(path string, kvs [][2]string) ([]byte, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	sc := bufio.NewScanner(strings.NewReader(string(old)))
	for sc.Scan() {
		line := strings.TrimPrefix(strings.TrimSpace(sc.Text()), "export ")
		for _, kv := range kvs {
			if strings.HasPrefix(line, kv[0]+"=") {
				return nil, fmt.Errorf("%s already sets %s: load it (set -a; . %s; set +a) and put ${%s} in config.yaml's matrix.registration.appservice so that it is reused, or remove the line",
					path, kv[0], shellQuote(path), kv[0])
			}
		}
	}
	text := string(old)
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	text += "# The application service tokens (hookroom appservice registration): matrix.registration.appservice.\n"
	for _, kv := range kvs {
		if err := envValueOK(kv[1]); err != nil {
			return nil, err
		}
		text += kv[0] + "=" + shellQuote(kv[1]) + "\n"
	}
	return []byte(text), nil
}
