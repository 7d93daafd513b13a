package matrixio

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/rs/zerolog"
	"gopkg.in/yaml.v3"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// Application service mode: the operator registers hookroom with the
// homeserver as an application service (a registration file naming a user
// namespace and two tokens); hookroom then creates its accounts with
// /register type m.login.application_service and logs them in with /login
// type m.login.application_service, both authenticated by the as_token. No
// password exists and no shared secret is needed. Each login is a real
// device with its own access token, which is stored like a password
// login's: every account still syncs on its own, and encryption works as in
// the other modes. hookroom receives no transactions from the homeserver
// (the registration's url is null).

// DefaultAppServiceID is the registration id NewAppServiceRegistration uses
// when none is given.
const DefaultAppServiceID = "hookroom"

// appServiceTokenBytes is the entropy of a generated as_token or hs_token.
const appServiceTokenBytes = 32

// ErrOutsideNamespace is wrapped by EnsureAccount's error when the
// homeserver refuses to let the application service register or log in
// an account (M_EXCLUSIVE): the account is not in the registration's user
// namespace, or another application service claims it.
var ErrOutsideNamespace = errors.New("the account is not in the application service's user namespace")

// AppServiceRegistration is an application service registration file, in
// the format Synapse (app_service_config_files) and Dendrite
// (app_service_api.config_files) read. It holds the as_token: write it with
// mode 0600 and never log it.
type AppServiceRegistration struct {
	// ID identifies the application service on the homeserver.
	ID string `yaml:"id"`
	// URL is where the homeserver would send transactions; nil (null)
	// sends none, which is what hookroom wants: its accounts sync.
	URL *string `yaml:"url"`
	// ASToken authenticates hookroom to the homeserver.
	ASToken string `yaml:"as_token"`
	// HSToken would authenticate the homeserver to hookroom; unused.
	HSToken string `yaml:"hs_token"`
	// SenderLocalpart is the application service's own user: the router.
	SenderLocalpart string `yaml:"sender_localpart"`
	// Namespaces claims hookroom's accounts.
	Namespaces AppServiceNamespaces `yaml:"namespaces"`
	// RateLimited is false: hookroom's accounts are not rate limited.
	RateLimited bool `yaml:"rate_limited"`
}

// AppServiceNamespaces are the namespaces of a registration. hookroom
// claims users only.
type AppServiceNamespaces struct {
	Users   []AppServiceNamespace `yaml:"users"`
	Aliases []AppServiceNamespace `yaml:"aliases"`
	Rooms   []AppServiceNamespace `yaml:"rooms"`
}

// AppServiceNamespace is one regular expression of a namespace.
type AppServiceNamespace struct {
	// Exclusive reserves the matching ids: nobody else may register them.
	Exclusive bool `yaml:"exclusive"`
	// Regex matches full ids (@localpart:server for users).
	Regex string `yaml:"regex"`
}

// AppServiceOptions describe the registration NewAppServiceRegistration
// builds. ServerName and SenderLocalpart are required.
type AppServiceOptions struct {
	// ID is the registration id. Default DefaultAppServiceID.
	ID string
	// ServerName is the homeserver's server name (the part after the colon
	// in user ids).
	ServerName string
	// SenderLocalpart is the application service's own user; hookroom uses
	// the router.
	SenderLocalpart string
	// Localparts are the accounts hookroom creates (the router and the
	// agents). Without UserPrefix the user namespace is exactly these and
	// the sender; with it, they must all start with the prefix.
	Localparts []string
	// UserPrefix, when set, makes the namespace every localpart that
	// starts with it, so that agents can be added without changing the
	// registration.
	UserPrefix string
	// ASToken and HSToken are reused when set (a registration generated
	// again stays the same); empty ones are generated.
	ASToken, HSToken string
}

// NewAppServiceRegistration builds the registration file of opts,
// generating the tokens opts does not give. The user namespace is
// exclusive and anchored: ^@(?:router|assistant):example\.org$ or, with a
// prefix, ^@hookroom_.*:example\.org$.
func NewAppServiceRegistration(opts AppServiceOptions) (*AppServiceRegistration, error) {
	if !id.ValidateServerName(opts.ServerName) {
		return nil, fmt.Errorf("%w: %q is not a valid server name", ErrInvalidConfig, opts.ServerName)
	}
	if opts.ID == "" {
		opts.ID = DefaultAppServiceID
	}
	locals := slices.Clone(opts.Localparts)
	locals = append(locals, opts.SenderLocalpart)
	for _, l := range locals {
		if err := id.ValidateUserLocalpart(l); err != nil {
			return nil, fmt.Errorf("%w: %q is not a valid localpart", ErrInvalidConfig, l)
		}
		if opts.UserPrefix != "" && !strings.HasPrefix(l, opts.UserPrefix) {
			return nil, fmt.Errorf("%w: localpart %q does not start with the user prefix %q", ErrInvalidConfig, l, opts.UserPrefix)
		}
	}
	server := regexp.QuoteMeta(opts.ServerName)
	var regex string
	if opts.UserPrefix != "" {
		regex = "^@" + regexp.QuoteMeta(opts.UserPrefix) + ".*:" + server + "$"
	} else {
		slices.Sort(locals)
		locals = slices.Compact(locals)
		quoted := make([]string, len(locals))
		for i, l := range locals {
			quoted[i] = regexp.QuoteMeta(l)
		}
		regex = "^@(?:" + strings.Join(quoted, "|") + "):" + server + "$"
	}
	r := &AppServiceRegistration{
		ID:              opts.ID,
		ASToken:         opts.ASToken,
		HSToken:         opts.HSToken,
		SenderLocalpart: opts.SenderLocalpart,
		Namespaces: AppServiceNamespaces{
			Users:   []AppServiceNamespace{{Exclusive: true, Regex: regex}},
			Aliases: []AppServiceNamespace{},
			Rooms:   []AppServiceNamespace{},
		},
	}
	var err error
	if r.ASToken == "" {
		if r.ASToken, err = GenerateAppServiceToken(); err != nil {
			return nil, err
		}
	}
	if r.HSToken == "" {
		if r.HSToken, err = GenerateAppServiceToken(); err != nil {
			return nil, err
		}
	}
	if r.ASToken == r.HSToken {
		return nil, fmt.Errorf("%w: the as_token and the hs_token must differ", ErrInvalidConfig)
	}
	return r, nil
}

// GenerateAppServiceToken returns a new random token (32 bytes, hex).
func GenerateAppServiceToken() (string, error) {
	b := make([]byte, appServiceTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to generate a token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Covers reports whether user is in the registration's user namespace (or
// is its sender).
func (r *AppServiceRegistration) Covers(user id.UserID) bool {
	if r.SenderLocalpart != "" && user.Localpart() == r.SenderLocalpart {
		return true
	}
	for _, ns := range r.Namespaces.Users {
		if re, err := regexp.Compile(ns.Regex); err == nil && re.MatchString(string(user)) {
			return true
		}
	}
	return false
}

// Marshal returns the registration as YAML, with a comment saying what it
// is.
func (r *AppServiceRegistration) Marshal() ([]byte, error) {
	var b bytes.Buffer
	b.WriteString("# hookroom's application service registration. Add this file to the homeserver:\n" +
		"#   Synapse:  app_service_config_files: [/path/to/this.yaml]   (homeserver.yaml)\n" +
		"#   Dendrite: app_service_api: {config_files: [/path/to/this.yaml]}   (dendrite.yaml)\n" +
		"# then restart it. It holds hookroom's token: keep it private (mode 0600).\n" +
		"# url is null: hookroom receives no transactions; each of its accounts syncs itself.\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(r); err != nil {
		return nil, fmt.Errorf("failed to encode the registration: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("failed to encode the registration: %w", err)
	}
	return b.Bytes(), nil
}

// appServiceClient returns a client for user that authenticates with the
// application service's token. Its requests carry the as_token: use it for
// /register and /login only, and never log its AccessToken.
func (m *Manager) appServiceClient(ctx context.Context, user id.UserID) (*mautrix.Client, error) {
	cli, err := m.newClient(ctx, user)
	if err != nil {
		return nil, err
	}
	cli.AccessToken = m.cfg.Registration.AppServiceToken
	return cli, nil
}

// appServiceLogin creates cli's account through the application service if
// it does not exist yet, then logs it in on creds.DeviceID (a new device if
// empty) and stores the token and device. creds.Registered is set when
// this call created the account.
func (m *Manager) appServiceLogin(ctx context.Context, cli *mautrix.Client, creds *credentials) error {
	as, err := m.appServiceClient(ctx, cli.UserID)
	if err != nil {
		return err
	}
	localpart := cli.UserID.Localpart()
	err = m.retry.do(ctx, "appservice registration", retryTransient, func(ctx context.Context) error {
		resp, _, err := as.Register(ctx, &mautrix.ReqRegister[any]{
			Type:         mautrix.AuthTypeAppservice,
			Username:     localpart,
			InhibitLogin: true,
		})
		if err == nil {
			m.dropRegistrationDevice(ctx, cli, resp.AccessToken)
		}
		return err
	})
	switch {
	case err == nil:
		zerolog.Ctx(ctx).Info().Str("method", m.cfg.Registration.String()).Msg("Registered account")
		creds.Registered = true
		if err := m.store.saveCredentials(ctx, creds); err != nil {
			return err
		}
	case errors.Is(err, mautrix.MUserInUse):
		// It exists (created earlier, or the application service's own
		// sender, which the homeserver creates): logging in is enough.
	case errors.Is(err, mautrix.MExclusive):
		return fmt.Errorf("failed to register %s through the application service: %w (run hookroom appservice registration again, replace the file on the homeserver and restart it): %w",
			cli.UserID, ErrOutsideNamespace, err)
	default:
		return fmt.Errorf("failed to register %s through the application service: %w", cli.UserID, err)
	}

	var resp *mautrix.RespLogin
	err = m.retry.do(ctx, "login", retryTransient, func(ctx context.Context) (err error) {
		resp, err = as.Login(ctx, &mautrix.ReqLogin{
			Type:                     mautrix.AuthTypeAppservice,
			Identifier:               mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: cli.UserID.String()},
			DeviceID:                 creds.DeviceID,
			InitialDeviceDisplayName: m.cfg.DeviceDisplayName,
		})
		return err
	})
	if errors.Is(err, mautrix.MExclusive) {
		return fmt.Errorf("failed to log in as %s through the application service: %w: %w", cli.UserID, ErrOutsideNamespace, err)
	} else if err != nil {
		return fmt.Errorf("failed to log in as %s through the application service: %w", cli.UserID, err)
	}
	return m.adoptLogin(ctx, cli, creds, resp)
}
