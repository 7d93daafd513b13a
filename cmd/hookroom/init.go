package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/synapseadmin"

	"github.com/hookroom/hookroom/bot"
	"github.com/hookroom/hookroom/config"
)

// The environment variables a configuration written by hookroom init reads
// its secrets from; their values are in hookroom.env next to it.
const (
	envSharedSecret      = "HOOKROOM_SHARED_SECRET"
	envRegistrationToken = "HOOKROOM_REGISTRATION_TOKEN"
	envAdminToken        = "HOOKROOM_ADMIN_TOKEN"
	initEnvFile          = "hookroom.env"
	initRegistrationFile = "hookroom-registration.yaml"
	initCheckTimeout     = 15 * time.Second
)

// initModels are the --model choices: the models section each writes and
// the environment variable holding its API key ("" for none).
var initModels = map[string]struct{ yaml, keyEnv string }{
	"echo": {yaml: "  default:\n    provider: echo\n"},
	"openai": {yaml: "  default:\n    provider: openai\n    base_url: https://api.openai.com/v1\n" +
		"    api_key: ${OPENAI_API_KEY}\n    model: gpt-4o-mini\n", keyEnv: "OPENAI_API_KEY"},
	"anthropic": {yaml: "  default:\n    provider: anthropic\n    api_key: ${ANTHROPIC_API_KEY}\n" +
		"    model: claude-sonnet-4-5\n", keyEnv: "ANTHROPIC_API_KEY"},
}

// initIO is what hookroom init reads and writes besides files: run passes
// the process's; tests their own.
type initIO struct {
	stdin       io.Reader
	interactive bool // stdin is a terminal: missing required values are asked for
	lookupEnv   func(string) (string, bool)
	stdout      io.Writer
	stderr      io.Writer
}

// initOptions are hookroom init's flags.
type initOptions struct {
	homeserver, serverName                   string
	accounts, sharedSecret, token, secretEnv string
	agent, router, room, invite, model       string
	listen, configPath, dataDir              string
	force                                    bool
}

const initUsage = `Usage: hookroom init --homeserver URL [flags]

Writes a working config.yaml for an existing homeserver, and its secrets to
hookroom.env next to it (mode 0600). Creates no account: hookroom run does.
With --accounts appservice it also writes hookroom-registration.yaml, the
application service registration to add to the homeserver (no password and
no shared secret: hookroom registers its accounts through the service).

Required: --homeserver, and for --accounts shared-secret (the default)
--shared-secret or --secret-env, for registration-token --registration-token
or --secret-env; appservice needs no secret.

`

// stdinIsTerminal reports whether the process's standard input is a terminal.
func stdinIsTerminal() bool {
	return isatty.IsTerminal(os.Stdin.Fd())
}

// runInit is hookroom init. It returns the process exit code.
func runInit(ctx context.Context, args []string, sys initIO) int {
	fs := flag.NewFlagSet("init", flag.ContinueOnError)
	fs.SetOutput(sys.stderr)
	fs.Usage = func() {
		fmt.Fprint(sys.stderr, initUsage)
		fs.PrintDefaults()
	}
	var o initOptions
	fs.StringVar(&o.homeserver, "homeserver", "", "the homeserver's client API URL, e.g. https://matrix.example.org (required)")
	fs.StringVar(&o.serverName, "server-name", "", "the server part of user ids (default: asked from the homeserver, else the URL's host)")
	fs.StringVar(&o.accounts, "accounts", "shared-secret", "how hookroom run creates its accounts: shared-secret | registration-token | appservice")
	fs.StringVar(&o.sharedSecret, "shared-secret", "", "the homeserver's registration shared secret (prefer --secret-env: arguments show in ps)")
	fs.StringVar(&o.token, "registration-token", "", "a registration token (prefer --secret-env)")
	fs.StringVar(&o.secretEnv, "secret-env", "", "read the shared secret or registration token from this environment variable")
	fs.StringVar(&o.agent, "agent", "assistant", "the agent's name (and Matrix username)")
	fs.StringVar(&o.router, "router", "router", "the router account's Matrix username")
	fs.StringVar(&o.room, "room", "lobby", "the alias of the room hookroom creates (a localpart or #alias:server)")
	fs.StringVar(&o.invite, "invite", "", "your Matrix user id (@you:server): invited to the room and allowed everywhere")
	fs.StringVar(&o.model, "model", "echo", "the model: echo (offline, no key) | openai | anthropic")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "the address of the console, /metrics and the admin API")
	fs.StringVar(&o.configPath, "config", "config.yaml", "where to write the configuration")
	fs.StringVar(&o.dataDir, "data-dir", "./data", "data_dir: where hookroom run keeps the database (accounts, devices, encryption keys) and plugin state; "+
		"relative to the config's directory (the .deb and the container: /var/lib/hookroom)")
	fs.BoolVar(&o.force, "force", false, "overwrite an existing configuration and "+initEnvFile)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(sys.stderr, "hookroom init: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if err := initConfig(ctx, o, sys); err != nil {
		fmt.Fprintf(sys.stderr, "hookroom init: %v\n", err)
		return 1
	}
	return 0
}

// initConfig checks o and the homeserver, then writes the configuration
// and its env file.
func initConfig(ctx context.Context, o initOptions, sys initIO) error {
	in := bufio.NewReader(sys.stdin)
	ask := func(dst *string, question string) error {
		if *dst != "" || !sys.interactive {
			return nil
		}
		fmt.Fprintf(sys.stdout, "%s: ", question)
		line, err := in.ReadString('\n')
		if err != nil && line == "" {
			return fmt.Errorf("reading the answer: %w", err)
		}
		*dst = strings.TrimSpace(line)
		return nil
	}
	if err := ask(&o.homeserver, "Homeserver URL (e.g. https://matrix.example.org)"); err != nil {
		return err
	}
	if o.homeserver == "" {
		return errors.New("--homeserver is required (e.g. --homeserver https://matrix.example.org); " +
			"also give --shared-secret or --secret-env (or --accounts registration-token with --registration-token, or --accounts appservice), " +
			"and --invite @you:server; hookroom init -h lists every flag")
	}
	if err := ask(&o.invite, "Your Matrix user id, invited to the room and allowed everywhere (@you:server, empty: nobody yet)"); err != nil {
		return err
	}

	// The flags, before anything is asked of the homeserver.
	hs, err := url.Parse(strings.TrimRight(o.homeserver, "/"))
	if err != nil || (hs.Scheme != "http" && hs.Scheme != "https") || hs.Host == "" {
		return fmt.Errorf("--homeserver %q is not an http:// or https:// URL", o.homeserver)
	}
	o.homeserver = hs.String()
	if strings.TrimSpace(o.dataDir) == "" {
		return errors.New("--data-dir is empty: give the directory for the database, e.g. --data-dir /var/lib/hookroom")
	}
	if strings.ContainsAny(o.dataDir, "\x00\n\r") {
		return fmt.Errorf("--data-dir %q is not a usable path", o.dataDir)
	}
	model, ok := initModels[o.model]
	if !ok {
		return fmt.Errorf("--model %q: want echo, openai or anthropic", o.model)
	}
	if o.invite != "" {
		if _, _, err := id.UserID(o.invite).Parse(); err != nil || !strings.HasPrefix(o.invite, "@") {
			return fmt.Errorf("--invite %q is not a Matrix user id (@you:server)", o.invite)
		}
	}
	var secretKey, secret string
	switch o.accounts {
	case "shared-secret":
		secretKey, secret = envSharedSecret, o.sharedSecret
		if o.token != "" {
			return errors.New("--registration-token needs --accounts registration-token")
		}
	case "registration-token":
		secretKey, secret = envRegistrationToken, o.token
		if o.sharedSecret != "" {
			return errors.New("--shared-secret needs --accounts shared-secret")
		}
	case "appservice":
		// The tokens are made here; nothing to give.
		if o.sharedSecret != "" || o.token != "" || o.secretEnv != "" {
			return errors.New("--accounts appservice needs no secret: hookroom init generates the application service's tokens " +
				"(drop --shared-secret, --registration-token and --secret-env)")
		}
	case "access-token":
		return errors.New("--accounts access-token is not supported by hookroom init yet: " +
			"write the account blocks by hand (docs/operations.md, existing accounts)")
	default:
		return fmt.Errorf("--accounts %q: want shared-secret, registration-token or appservice", o.accounts)
	}
	if o.secretEnv != "" {
		if secret != "" {
			return fmt.Errorf("give the secret either as a flag or with --secret-env %s, not both", o.secretEnv)
		}
		v, ok := sys.lookupEnv(o.secretEnv)
		if !ok || v == "" {
			return fmt.Errorf("--secret-env %s: the environment variable is not set", o.secretEnv)
		}
		secret = v
	}
	if secret == "" && o.accounts != "appservice" {
		if o.accounts == "shared-secret" {
			return errors.New("--accounts shared-secret needs the homeserver's registration shared secret: " +
				"--secret-env NAME (the variable holding it) or --shared-secret VALUE")
		}
		return errors.New("--accounts registration-token needs a token: --secret-env NAME or --registration-token VALUE")
	}
	if err := envValueOK(secret); err != nil {
		return fmt.Errorf("the %s: %w", strings.ReplaceAll(o.accounts, "-", " "), err)
	}

	cfgPath := o.configPath
	envPath := filepath.Join(filepath.Dir(cfgPath), initEnvFile)
	regPath := filepath.Join(filepath.Dir(cfgPath), initRegistrationFile)
	files := []string{cfgPath, envPath}
	if o.accounts == "appservice" {
		files = append(files, regPath)
	}
	if !o.force {
		for _, p := range files {
			if _, err := os.Lstat(p); err == nil {
				return fmt.Errorf("%s exists: hookroom init does not overwrite it without --force", p)
			} else if !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}

	// The homeserver.
	ctx, cancel := context.WithTimeout(ctx, initCheckTimeout)
	defer cancel()
	cli, err := mautrix.NewClient(o.homeserver, "", "")
	if err != nil {
		return fmt.Errorf("--homeserver %s: %w", o.homeserver, err)
	}
	cli.Client = &http.Client{Timeout: initCheckTimeout}
	versions, err := cli.Versions(ctx)
	if err != nil {
		return fmt.Errorf("the homeserver at %s does not answer %s: %w", o.homeserver,
			"/_matrix/client/versions (is the URL right and the homeserver running?)", err)
	}
	serverNameFrom := "--server-name"
	if o.serverName == "" {
		o.serverName, serverNameFrom = discoverServerName(ctx, cli, hs)
	}
	if !id.ValidateServerName(o.serverName) {
		return fmt.Errorf("server name %q (%s) is not a valid server name", o.serverName, serverNameFrom)
	}
	if o.accounts == "shared-secret" {
		nonce, err := (&synapseadmin.Client{Client: cli}).GetRegisterNonce(ctx)
		if err == nil && nonce == "" {
			err = errors.New("no nonce in the answer")
		}
		if err != nil {
			return fmt.Errorf("the homeserver at %s does not answer shared-secret registration "+
				"(GET /_synapse/admin/v1/register: %w); is its registration shared secret set? "+
				"Else use --accounts registration-token", o.homeserver, err)
		}
	}

	// The files.
	adminToken := make([]byte, 32)
	if _, err := rand.Read(adminToken); err != nil {
		return err
	}
	env := map[string]string{envAdminToken: hex.EncodeToString(adminToken)}
	secretKeys := []string{secretKey}
	if o.accounts == "appservice" {
		secretKeys = []string{envASToken, envHSToken}
		for _, k := range secretKeys {
			tok := make([]byte, 32)
			if _, err := rand.Read(tok); err != nil {
				return err
			}
			env[k] = hex.EncodeToString(tok)
		}
	} else {
		env[secretKey] = secret
	}
	cfgText := initConfigText(o, model.yaml, secretKey)
	envText := initEnvText(o, secretKeys, env, model.keyEnv)
	lookup := func(name string) (string, bool) {
		if v, ok := env[name]; ok {
			return v, true
		}
		if name == model.keyEnv {
			return "init-validation-placeholder", true
		}
		return "", false
	}
	// Valid by construction: a failure here is a bug in hookroom init.
	if _, err := config.Parse([]byte(cfgText), cfgPath, config.WithLookupEnv(lookup)); err != nil {
		return fmt.Errorf("bug: the configuration hookroom init generated does not load, nothing written: %w", err)
	}
	if err := writeFileAtomic(envPath, []byte(envText), 0o600); err != nil {
		return err
	}
	if err := writeFileAtomic(cfgPath, []byte(cfgText), 0o644); err != nil {
		return err
	}
	cfg, err := config.Load(ctx, cfgPath, config.WithLookupEnv(lookup))
	if err == nil {
		err = bot.CheckAccounts(cfg)
	}
	if err != nil {
		return fmt.Errorf("bug: %s as written does not load: %w", cfgPath, err)
	}
	if o.accounts == "appservice" {
		// The registration of the accounts just configured, with the
		// tokens of the env file (none generated: config.yaml has both).
		reg, generated, err := registrationFor(cfg)
		if err == nil && len(generated) > 0 {
			err = errors.New("tokens missing from the configuration")
		}
		var data []byte
		if err == nil {
			data, err = reg.Marshal()
		}
		if err != nil {
			return fmt.Errorf("bug: the application service registration of %s: %w", cfgPath, err)
		}
		if err := writeFileAtomic(regPath, data, 0o600); err != nil {
			return err
		}
	}

	w := sys.stdout
	fmt.Fprintf(w, "The homeserver at %s answers (Matrix %s); server name %s (%s).\n",
		o.homeserver, latestVersion(versions), o.serverName, serverNameFrom)
	fmt.Fprintf(w, "Wrote %s and %s (its secrets, mode 0600).\n", cfgPath, envPath)
	if o.accounts == "appservice" {
		fmt.Fprintf(w, "Wrote %s (the application service registration, mode 0600: it holds hookroom's token).\n", regPath)
	}
	fmt.Fprintf(w, "hookroom run keeps its database in %s (data_dir: --data-dir): the user it runs as must be able to write there.\n\n",
		cfg.DataDir)
	if model.keyEnv != "" {
		fmt.Fprintf(w, "Put your API key in %s first (the line %s=...).\n", envPath, model.keyEnv)
	}
	if o.invite == "" {
		fmt.Fprintln(w, "Nobody may talk to the agent yet: add your user id to authorization.global_users and rooms.lobby.invite.")
	}
	fmt.Fprintf(w, "Next steps:\n")
	if o.accounts == "appservice" {
		fmt.Fprintf(w, "  Copy %s to the homeserver's machine, list it in its configuration and restart it:\n"+
			"    Synapse  (homeserver.yaml): app_service_config_files: [/path/to/%s]\n"+
			"    Dendrite (dendrite.yaml):   app_service_api: {config_files: [/path/to/%s]}\n",
			regPath, initRegistrationFile, initRegistrationFile)
	}
	fmt.Fprintf(w, "  set -a; . %s; set +a\n  hookroom check --config %s\n  hookroom run --config %s\n",
		shellQuote(envPath), shellQuote(cfgPath), shellQuote(cfgPath))
	fmt.Fprintf(w, "hookroom run creates the accounts and the room")
	if o.invite != "" {
		fmt.Fprintf(w, " and invites %s", o.invite)
	}
	fmt.Fprintf(w, ".\nConsole: %s (sign in with %s from %s).\n", consoleURL(o.listen), envAdminToken, envPath)
	return nil
}

// discoverServerName asks the homeserver for its server name (the signing
// keys at /_matrix/key/v2/server name it; Dendrite and a Synapse serving
// federation on the client port answer), else takes the URL's host. It
// returns the name and where it came from.
func discoverServerName(ctx context.Context, cli *mautrix.Client, hs *url.URL) (string, string) {
	var keys struct {
		ServerName string `json:"server_name"`
	}
	_, err := cli.MakeRequest(ctx, http.MethodGet, cli.BuildURL(mautrix.BaseURLPath{"_matrix", "key", "v2", "server"}), nil, &keys)
	if err == nil && keys.ServerName != "" && id.ValidateServerName(keys.ServerName) {
		return keys.ServerName, "from the homeserver's /_matrix/key/v2/server"
	}
	return hs.Hostname(), "the URL's host: set --server-name if user ids end in something else"
}

// latestVersion is the newest spec version in v, for the summary line.
func latestVersion(v *mautrix.RespVersions) string {
	if v == nil || len(v.Versions) == 0 {
		return "version unknown"
	}
	latest := v.Versions[0]
	for _, s := range v.Versions[1:] {
		if s.GreaterThan(latest) {
			latest = s
		}
	}
	return latest.String()
}

// consoleURL is the console's address for http.listen.
func consoleURL(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		host, port = "127.0.0.1", strings.TrimPrefix(listen, ":")
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	if port == "0" {
		return "http://" + net.JoinHostPort(host, "PORT") + "/ (the port is picked at start: see the log)"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// yamlString quotes s as a YAML double-quoted scalar, with "${" escaped so
// that config's ${VAR} substitution leaves it as it is.
func yamlString(s string) string {
	return strconv.Quote(strings.ReplaceAll(s, "${", "$${"))
}

// yamlPath writes a path as a plain YAML scalar when it plainly is one
// (./data, /var/lib/hookroom; a "/" keeps it from reading as true, null or
// a number), else quoted by yamlString.
func yamlPath(p string) string {
	if strings.Contains(p, "/") && plainPath.MatchString(p) {
		return p
	}
	return yamlString(p)
}

var plainPath = regexp.MustCompile(`^[A-Za-z0-9._/][A-Za-z0-9._/+@-]*$`)

// initConfigText is the configuration hookroom init writes (the shape of
// scripts/demo.sh's).
func initConfigText(o initOptions, models, secretKey string) string {
	var b strings.Builder
	b.WriteString(`# Written by hookroom init. hookroom reloads this file when it is saved; see
# config.example.yaml for every key and docs/operations.md for running hookroom.
# The secrets are in ` + initEnvFile + ` next to this file: load it before hookroom
# check or run (set -a; . ./` + initEnvFile + `; set +a, or systemd's EnvironmentFile=).
`)
	fmt.Fprintf(&b, "data_dir: %s\n", yamlPath(o.dataDir))
	b.WriteString(`log:
  level: info
  format: console
matrix:
`)
	fmt.Fprintf(&b, "  homeserver: %s\n  server_name: %s\n  registration:\n", yamlString(o.homeserver), yamlString(o.serverName))
	switch {
	case o.accounts == "appservice":
		fmt.Fprintf(&b, "    appservice:\n      as_token: ${%s}\n      hs_token: ${%s}\n", envASToken, envHSToken)
	case secretKey == envSharedSecret:
		fmt.Fprintf(&b, "    shared_secret: ${%s}\n", secretKey)
	default:
		fmt.Fprintf(&b, "    token: ${%s}\n", secretKey)
	}
	fmt.Fprintf(&b, "  router:\n    username: %s\n    display_name: Router\n", yamlString(o.router))
	b.WriteString("models:\n" + models)
	invite := "[]"
	if o.invite != "" {
		invite = "[" + yamlString(o.invite) + "]"
	}
	display := o.agent
	if display != "" {
		display = strings.ToUpper(display[:1]) + display[1:]
	}
	fmt.Fprintf(&b, `rooms:
  lobby:
    alias: %s
    name: hookroom lobby
    topic: %s
    invite: %s
agents:
  %s:
    display_name: %s
    role: A friendly general helper.
    rooms: [lobby]
authorization:
  global_users: %s
http:
  listen: %s
  admin_token: ${%s}
`, yamlString(o.room), yamlString("Talk to the agents here. Mention one (@"+o.agent+") or just ask."), invite,
		yamlString(o.agent), yamlString(display), invite, yamlString(o.listen), envAdminToken)
	return b.String()
}

// initEnvText is hookroom.env: KEY=value lines (shell and systemd
// EnvironmentFile= read them), the API key's as a commented placeholder.
func initEnvText(o initOptions, secretKeys []string, env map[string]string, keyEnv string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by hookroom init: the secrets %s reads. Keep it private.\n", filepath.Base(o.configPath))
	b.WriteString("# Load it with: set -a; . ./" + initEnvFile + "; set +a   (or systemd's EnvironmentFile=)\n")
	if o.accounts == "appservice" {
		b.WriteString("# The application service's tokens, also in " + initRegistrationFile + " (the homeserver's copy).\n")
	}
	for _, k := range secretKeys {
		fmt.Fprintf(&b, "%s=%s\n", k, shellQuote(env[k]))
	}
	b.WriteString("# The bearer token of the admin API and the console's sign-in.\n")
	fmt.Fprintf(&b, "%s=%s\n", envAdminToken, env[envAdminToken])
	if keyEnv != "" {
		fmt.Fprintf(&b, "# The model's API key: uncomment and fill in (or set it in the environment).\n# %s=\n", keyEnv)
	}
	return b.String()
}

// envValueOK reports whether v can be written as a KEY=value line (single
// quoted when it needs it) that a shell and systemd read back unchanged.
func envValueOK(v string) error {
	for _, r := range v {
		if r < ' ' || r == 0x7f || r == '\'' {
			return fmt.Errorf("contains %q, which %s cannot hold", r, initEnvFile)
		}
	}
	return nil
}

// shellQuote quotes s for a shell command line when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+:@=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// writeFileAtomic writes data to path with mode perm through a temporary
// file in the same directory, renamed over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = f.Chmod(perm)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
