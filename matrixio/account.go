package matrixio

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/crypto/utils"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/synapseadmin"
)

// AccountSpec describes one Matrix account hookroom runs: the router or an
// agent.
type AccountSpec struct {
	// Localpart is the user id's local part ("router" for
	// "@router:example.org"). It is lower-cased, as Matrix requires.
	// Ignored when UserID is set.
	Localpart string
	// UserID is the full user id of an existing account; empty means
	// @Localpart:Config.ServerName.
	UserID id.UserID
	// DisplayName is set on the account's profile when it differs. Empty
	// leaves the display name alone.
	DisplayName string
	// Avatar is the account's profile picture; the zero value leaves it
	// alone.
	Avatar Avatar
	// AccessToken is a token of an existing login of the account (for
	// homeservers behind Matrix Authentication Service, where hookroom
	// cannot log in itself). It is checked with whoami, which must name
	// the account; it is preferred over everything else.
	AccessToken string
	// DeviceID is AccessToken's device, for homeservers whose whoami does
	// not return it.
	DeviceID id.DeviceID
	// Password is the password of an existing account that hookroom did not
	// create (for homeservers where registration is not available). Leave it
	// empty for accounts hookroom creates: it generates and stores a strong
	// random password for those. With AccessToken too, it is the fallback
	// when the token is rejected.
	Password string
}

var (
	// ErrNoRegistration is returned by EnsureAccount when an account has no
	// usable credentials and Config.Registration offers no way to create it.
	ErrNoRegistration = errors.New("account cannot be created: no registration method configured")
	// ErrAccountTaken is returned by EnsureAccount when the account exists on
	// the homeserver but hookroom has no password that logs in to it.
	ErrAccountTaken = errors.New("account exists on the homeserver but hookroom cannot log in to it")
	// ErrTokenRejected is returned by EnsureAccount when the configured
	// access token is not (or no longer) valid and no password is
	// configured to log in with instead. The error names the account,
	// never the token.
	ErrTokenRejected = errors.New("the homeserver rejected the configured access token")
	// ErrDeviceKeysUnknown is returned by EnsureAccount when the configured
	// access token's device already has encryption keys on the homeserver
	// that this database does not hold (the token belongs to a login made
	// elsewhere, or the database was lost): hookroom cannot use the device.
	ErrDeviceKeysUnknown = errors.New("the device already has encryption keys that hookroom does not hold")
	// ErrNotFound is wrapped by errors for things that do not exist: a room
	// alias that resolves to nothing, a state event that was never set.
	ErrNotFound = errors.New("not found")
)

// Manager owns the accounts of one hookroom process: it logs them in,
// creates missing ones and remembers their credentials in the Store.
type Manager struct {
	cfg   Config
	store *Store
	retry *retrier

	// ensureMu serialises EnsureAccount, which is a start-up and reload
	// operation; it guards nothing else.
	ensureMu sync.Mutex
	mu       sync.Mutex // guards accounts
	accounts map[id.UserID]*Account
	// shared holds the crypto pieces all accounts use; set by the first
	// EnsureAccount (under ensureMu).
	shared *cryptoShared
}

// NewManager returns a Manager for cfg whose credentials and sync positions
// live in store (already upgraded). It makes no requests.
func NewManager(cfg Config, store *Store) (*Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%w: store is nil", ErrInvalidConfig)
	}
	return &Manager{
		cfg:      cfg,
		store:    store,
		retry:    newRetrier(cfg.Retry),
		accounts: make(map[id.UserID]*Account),
	}, nil
}

// Config returns the effective configuration, defaults filled in.
func (m *Manager) Config() Config { return m.cfg }

// UserID returns the user id a localpart has on this homeserver.
func (m *Manager) UserID(localpart string) id.UserID {
	return id.NewUserID(strings.ToLower(localpart), m.cfg.ServerName)
}

// Account returns the account EnsureAccount set up for user, or nil.
func (m *Manager) Account(user id.UserID) *Account {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.accounts[user]
}

// Accounts returns every account set up so far, sorted by user id.
func (m *Manager) Accounts() []*Account {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Account, 0, len(m.accounts))
	for _, a := range m.accounts {
		out = append(out, a)
	}
	slices.SortFunc(out, func(a, b *Account) int { return strings.Compare(string(a.userID), string(b.userID)) })
	return out
}

// Close releases idle HTTP connections. Stop the sync loops (cancel the
// contexts given to Run) first; Close does not wait for them.
func (m *Manager) Close() {
	m.cfg.HTTPClient.CloseIdleConnections()
}

// EnsureAccount makes spec's account usable and returns it. It is called at
// start-up (and on reload) for the router and every agent. Calling it
// again for the same spec returns the same *Account after checking its
// token again; that is also how to recover after Run returned an error
// wrapping mautrix.MUnknownToken (the token was revoked): the account logs
// in anew, on the same device, and Run can be started again.
//
// In order, it: uses spec.AccessToken if whoami accepts it for the
// account (on the device whoami names, else spec.DeviceID); reuses the
// stored access token if whoami still accepts it; else logs in with the
// configured or stored password, asking for the stored device id so the
// device (and with it the transaction-id scope) survives restarts; else,
// unless the spec configures a token or password (then the error wraps
// ErrTokenRejected or the login's error), creates the account with the
// configured registration method and a generated random password, which
// is stored before the account is created — or, with an application
// service token, registers it (an existing account is fine) and logs it
// in through the application service, with no password. A configured token whose device
// has keys this database does not hold fails with ErrDeviceKeysUnknown.
// Finally it sets the display name and avatar if they differ. Credentials
// are persisted; they are never logged.
func (m *Manager) EnsureAccount(ctx context.Context, spec AccountSpec) (*Account, error) {
	if spec.Localpart == "" && spec.UserID == "" {
		return nil, fmt.Errorf("%w: account localpart is empty", ErrInvalidConfig)
	}
	m.ensureMu.Lock()
	defer m.ensureMu.Unlock()

	userID := spec.UserID
	if userID == "" {
		userID = m.UserID(spec.Localpart)
	}
	log := zerolog.Ctx(ctx).With().Stringer("user_id", userID).Logger()
	ctx = log.WithContext(ctx)

	// Always log in on a fresh client (the fast path is one whoami with
	// the stored token) and swap it in, so a revoked token is replaced
	// without racing requests in flight on the old client.
	cli, err := m.newClient(ctx, userID)
	if err != nil {
		return nil, err
	}
	password, err := m.login(ctx, cli, spec)
	if err != nil {
		return nil, err
	}
	helper, err := m.initCrypto(ctx, cli, password)
	if errors.Is(err, errDeviceKeysForeign) && cli.AccessToken == spec.AccessToken {
		// A login made elsewhere (or before the database was lost): its
		// device cannot get new keys, and moving to another device on
		// every start would pile up devices.
		return nil, fmt.Errorf("failed to set up encryption for %s on device %s: %w (issue an access token of a new login for hookroom, or remove access_token and configure a password)",
			userID, cli.DeviceID, ErrDeviceKeysUnknown)
	}
	if errors.Is(err, errDeviceReset) || errors.Is(err, errDeviceKeysForeign) {
		if err := m.replaceDevice(ctx, cli, spec); err != nil {
			return nil, err
		}
		helper, err = m.initCrypto(ctx, cli, password)
	}
	if err != nil {
		return nil, err
	}
	acct := m.Account(userID)
	if acct == nil {
		acct = &Account{m: m, userID: userID, seen: newRecentSet(recentEventsRemembered)}
	}
	acct.mu.Lock()
	acct.client = cli
	acct.helper = helper
	acct.mu.Unlock()
	if err := acct.setProfile(ctx, Profile{DisplayName: spec.DisplayName, Avatar: spec.Avatar}); err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.accounts[userID] = acct
	m.mu.Unlock()
	return acct, nil
}

func (m *Manager) newClient(ctx context.Context, userID id.UserID) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(m.cfg.HomeserverURL, userID, "")
	if err != nil {
		return nil, fmt.Errorf("failed to create client for %s: %w", userID, err)
	}
	cli.Client = m.cfg.HTTPClient
	cli.Log = *zerolog.Ctx(ctx)
	cli.UserAgent = "hookroom " + mautrix.DefaultUserAgent
	cli.DefaultHTTPRetries = 0 // our retrier is the only retry layer
	return cli, nil
}

// login gives cli (a fresh client for one user) a working access token,
// following EnsureAccount's order, and returns the account's password (""
// if none is known).
func (m *Manager) login(ctx context.Context, cli *mautrix.Client, spec AccountSpec) (string, error) {
	if err := m.authenticate(ctx, cli, spec); err != nil {
		return "", err
	}
	if spec.Password != "" {
		return spec.Password, nil
	}
	creds, err := m.store.loadCredentials(ctx, cli.UserID)
	if err != nil || creds == nil {
		return "", err
	}
	return creds.Password, nil
}

// replaceDevice moves cli to a new device: its current one was deleted on
// the homeserver and recreated without the keys hookroom holds for it. The
// recreated device is logged out, and the account logs in anew without
// asking for the old device id.
func (m *Manager) replaceDevice(ctx context.Context, cli *mautrix.Client, spec AccountSpec) error {
	zerolog.Ctx(ctx).Warn().Stringer("device_id", cli.DeviceID).
		Msg("The device was deleted on the homeserver (logged out elsewhere); logging in on a new device with new encryption keys")
	if _, err := cli.Logout(ctx); err != nil {
		zerolog.Ctx(ctx).Debug().Err(err).Msg("Failed to log out the recreated device")
	}
	creds, err := m.store.loadCredentials(ctx, cli.UserID)
	if err != nil {
		return err
	}
	if creds != nil {
		creds.DeviceID, creds.AccessToken = "", ""
		if err := m.store.saveCredentials(ctx, creds); err != nil {
			return err
		}
	}
	cli.AccessToken, cli.DeviceID = "", ""
	spec.AccessToken = "" // its device is the one being left
	if err := m.authenticate(ctx, cli, spec); err != nil {
		return fmt.Errorf("failed to log in on a new device: %w", err)
	}
	return nil
}

// authenticate does login's work.
func (m *Manager) authenticate(ctx context.Context, cli *mautrix.Client, spec AccountSpec) error {
	log := zerolog.Ctx(ctx)
	creds, err := m.store.loadCredentials(ctx, cli.UserID)
	if err != nil {
		return err
	}
	if creds == nil {
		creds = &credentials{UserID: cli.UserID}
	}

	// 0. The configured access token.
	tokenRejected := false
	if spec.AccessToken != "" {
		ok, err := m.checkConfiguredToken(ctx, cli, creds, spec)
		if err != nil || ok {
			return err
		}
		tokenRejected = true
		if creds.AccessToken == spec.AccessToken {
			creds.AccessToken = ""
		}
		if spec.Password == "" && creds.AccessToken == "" {
			return fmt.Errorf("failed to log in as %s: %w (M_UNKNOWN_TOKEN: it expired or was revoked; issue a new one, or configure a password)", cli.UserID, ErrTokenRejected)
		}
		log.Warn().Msg("The homeserver rejected the configured access token; trying the stored credentials and the configured password")
	}

	// 1. The stored access token.
	if creds.AccessToken != "" {
		ok, err := m.checkToken(ctx, cli, creds)
		if err != nil {
			return err
		} else if ok {
			log.Debug().Stringer("device_id", cli.DeviceID).Msg("Reusing stored access token")
			return nil
		}
		log.Info().Msg("Stored access token is no longer valid, logging in again")
		creds.AccessToken = ""
	}

	// 2. Password login on the stored device.
	password := creds.Password
	if spec.Password != "" {
		password = spec.Password
	}
	var loginErr error
	if password != "" {
		loginErr = m.passwordLogin(ctx, cli, creds, password)
		if loginErr == nil {
			return nil
		}
		if !errors.Is(loginErr, mautrix.MForbidden) {
			return fmt.Errorf("failed to log in as %s: %w", cli.UserID, loginErr)
		}
		if spec.Password != "" {
			return fmt.Errorf("failed to log in as %s with the configured password: %w", cli.UserID, loginErr)
		}
		// A generated password was refused: the account may never have been
		// created (a crash between storing the password and registering).
	}

	// 3. Create the account, unless it is configured as an existing one.
	if tokenRejected {
		return fmt.Errorf("failed to log in as %s: %w (M_UNKNOWN_TOKEN: it expired or was revoked; issue a new one)", cli.UserID, ErrTokenRejected)
	}
	if m.cfg.Registration.SharedSecret == "" && m.cfg.Registration.Token == "" && m.cfg.Registration.AppServiceToken == "" {
		if loginErr != nil {
			return fmt.Errorf("failed to log in as %s (%w): %w", cli.UserID, ErrNoRegistration, loginErr)
		}
		return fmt.Errorf("failed to set up %s: %w", cli.UserID, ErrNoRegistration)
	}
	if m.cfg.Registration.AppServiceToken != "" {
		// No password: the application service's token creates the
		// account and logs it in (appservice.go).
		return m.appServiceLogin(ctx, cli, creds)
	}
	if creds.Password == "" {
		if creds.Password, err = m.newPassword(cli.UserID); err != nil {
			return err
		}
		// Store the password before the account exists, so a crash right
		// after registering still leaves us a way to log in.
		if err = m.store.saveCredentials(ctx, creds); err != nil {
			return err
		}
	}
	regErr := m.register(ctx, cli, creds.Password)
	if errors.Is(regErr, mautrix.MUserInUse) {
		if loginErr == nil {
			// The registration may have been applied by an earlier attempt
			// whose response was lost; our password then works.
			if err := m.passwordLogin(ctx, cli, creds, creds.Password); err == nil {
				creds.Registered = true
				return m.store.saveCredentials(ctx, creds)
			}
		}
		return fmt.Errorf("failed to set up %s: %w", cli.UserID, ErrAccountTaken)
	} else if regErr != nil {
		return fmt.Errorf("failed to register %s: %w", cli.UserID, regErr)
	}
	log.Info().Str("method", m.cfg.Registration.String()).Msg("Registered account")
	creds.Registered = true
	if err := m.passwordLogin(ctx, cli, creds, creds.Password); err != nil {
		return fmt.Errorf("failed to log in as %s after registering: %w", cli.UserID, err)
	}
	return nil
}

// checkConfiguredToken checks spec's access token with whoami and adopts it
// into cli and creds (stored) if the homeserver accepts it for cli's user.
// It reports false if the homeserver rejects the token.
func (m *Manager) checkConfiguredToken(ctx context.Context, cli *mautrix.Client, creds *credentials, spec AccountSpec) (bool, error) {
	cli.AccessToken, cli.DeviceID = spec.AccessToken, ""
	resp, err := m.whoami(ctx, cli)
	if resp == nil || err != nil {
		cli.AccessToken = ""
	}
	if err != nil {
		return false, fmt.Errorf("failed to check the configured access token of %s: %w", cli.UserID, err)
	} else if resp == nil {
		return false, nil
	}
	if resp.UserID != cli.UserID {
		cli.AccessToken = ""
		return false, fmt.Errorf("the configured access token of %s belongs to %s", cli.UserID, resp.UserID)
	}
	device := resp.DeviceID
	switch {
	case device == "" && spec.DeviceID == "":
		cli.AccessToken = ""
		return false, fmt.Errorf("the homeserver does not say which device the configured access token of %s belongs to: configure its device_id", cli.UserID)
	case device == "":
		device = spec.DeviceID
	case spec.DeviceID != "" && spec.DeviceID != device:
		zerolog.Ctx(ctx).Warn().Stringer("configured_device_id", spec.DeviceID).Stringer("device_id", device).
			Msg("The configured access token belongs to another device than the configured device_id; using the token's")
	}
	cli.DeviceID = device
	if creds.AccessToken != spec.AccessToken || creds.DeviceID != device {
		creds.AccessToken, creds.DeviceID = spec.AccessToken, device
		if err := m.store.saveCredentials(ctx, creds); err != nil {
			return false, err
		}
	}
	zerolog.Ctx(ctx).Debug().Stringer("device_id", device).Msg("Using the configured access token")
	return true, nil
}

// whoami asks the homeserver whom cli's access token belongs to, retrying
// transient failures. It returns nil and no error when the homeserver
// rejects the token (unknown or missing).
func (m *Manager) whoami(ctx context.Context, cli *mautrix.Client) (*mautrix.RespWhoami, error) {
	var resp *mautrix.RespWhoami
	err := m.retry.do(ctx, "whoami", retryTransient, func(ctx context.Context) (err error) {
		resp, err = cli.Whoami(ctx)
		return err
	})
	if errors.Is(err, mautrix.MUnknownToken) || errors.Is(err, mautrix.MMissingToken) {
		return nil, nil
	}
	return resp, err
}

// checkToken reports whether creds' access token still works, and adopts it
// into cli if so.
func (m *Manager) checkToken(ctx context.Context, cli *mautrix.Client, creds *credentials) (bool, error) {
	cli.AccessToken = creds.AccessToken
	cli.DeviceID = creds.DeviceID
	resp, err := m.whoami(ctx, cli)
	if err != nil {
		return false, fmt.Errorf("failed to check stored access token of %s: %w", cli.UserID, err)
	} else if resp == nil {
		cli.AccessToken = ""
		return false, nil
	}
	if resp.UserID != cli.UserID {
		return false, fmt.Errorf("stored access token of %s belongs to %s", cli.UserID, resp.UserID)
	}
	if resp.DeviceID != "" && resp.DeviceID != creds.DeviceID {
		creds.DeviceID = resp.DeviceID
		if err := m.store.saveCredentials(ctx, creds); err != nil {
			return false, err
		}
	}
	cli.DeviceID = creds.DeviceID
	return true, nil
}

// passwordLogin logs in on creds.DeviceID (a new device if empty) and
// stores the resulting token and device id.
func (m *Manager) passwordLogin(ctx context.Context, cli *mautrix.Client, creds *credentials, password string) error {
	var resp *mautrix.RespLogin
	err := m.retry.do(ctx, "login", retryTransient, func(ctx context.Context) (err error) {
		resp, err = cli.Login(ctx, &mautrix.ReqLogin{
			Type: mautrix.AuthTypePassword,
			Identifier: mautrix.UserIdentifier{
				Type: mautrix.IdentifierTypeUser,
				User: cli.UserID.String(),
			},
			Password:                 password,
			DeviceID:                 creds.DeviceID,
			InitialDeviceDisplayName: m.cfg.DeviceDisplayName,
		})
		return err
	})
	if err != nil {
		return err
	}
	return m.adoptLogin(ctx, cli, creds, resp)
}

// adoptLogin checks a login's response and makes its token and device
// cli's and creds' (stored).
func (m *Manager) adoptLogin(ctx context.Context, cli *mautrix.Client, creds *credentials, resp *mautrix.RespLogin) error {
	if resp.UserID != "" && resp.UserID != cli.UserID {
		return fmt.Errorf("logged in as %s instead of %s", resp.UserID, cli.UserID)
	}
	if creds.DeviceID != "" && resp.DeviceID != creds.DeviceID {
		zerolog.Ctx(ctx).Warn().
			Stringer("stored_device_id", creds.DeviceID).
			Stringer("device_id", resp.DeviceID).
			Msg("Homeserver assigned a different device than the stored one")
	}
	creds.DeviceID = resp.DeviceID
	creds.AccessToken = resp.AccessToken
	if err := m.store.saveCredentials(ctx, creds); err != nil {
		return err
	}
	cli.AccessToken = resp.AccessToken
	cli.DeviceID = resp.DeviceID
	zerolog.Ctx(ctx).Info().Stringer("device_id", resp.DeviceID).Msg("Logged in")
	return nil
}

// register creates cli's account with the configured method. It does not
// log in: the caller logs in with the password afterwards, so every account
// gets a device named Config.DeviceDisplayName.
func (m *Manager) register(ctx context.Context, cli *mautrix.Client, password string) error {
	localpart := cli.UserID.Localpart()
	if secret := m.cfg.Registration.SharedSecret; secret != "" {
		return m.sharedSecretRegister(ctx, cli, localpart, password, secret)
	}
	return m.tokenRegister(ctx, cli, localpart, password, m.cfg.Registration.Token)
}

// sharedSecretRegister uses /_synapse/admin/v1/register. mautrix's
// synapseadmin.Client.SharedSecretRegister would log the request body (the
// password) at debug level, so the signed request is sent here with the
// body marked sensitive.
func (m *Manager) sharedSecretRegister(ctx context.Context, cli *mautrix.Client, localpart, password, secret string) error {
	admin := synapseadmin.Client{Client: cli}
	var resp mautrix.RespRegister
	err := m.retry.do(ctx, "shared-secret registration", retryTransient, func(ctx context.Context) error {
		nonce, err := admin.GetRegisterNonce(ctx)
		if err != nil {
			return err
		}
		req := synapseadmin.ReqSharedSecretRegister{
			Username:     localpart,
			Password:     password,
			InhibitLogin: true,
			Nonce:        nonce,
		}
		req.SHA1Checksum = req.Sign(secret)
		_, err = cli.MakeFullRequest(ctx, mautrix.FullRequest{
			Method:           http.MethodPost,
			URL:              admin.BuildAdminURL("v1", "register"),
			RequestJSON:      &req,
			ResponseJSON:     &resp,
			SensitiveContent: true,
		})
		return err
	})
	if err != nil {
		return err
	}
	m.dropRegistrationDevice(ctx, cli, resp.AccessToken)
	return nil
}

// tokenRegister completes /register's user-interactive auth with the
// m.login.registration_token stage (and m.login.dummy if a flow needs it).
func (m *Manager) tokenRegister(ctx context.Context, cli *mautrix.Client, localpart, password, token string) error {
	const authTypeRegistrationToken mautrix.AuthType = "m.login.registration_token"
	req := &mautrix.ReqRegister[any]{
		Username:     localpart,
		Password:     password,
		InhibitLogin: true,
	}
	// Each round answers the next stage the server asks for; a flow has at
	// most a handful of stages.
	for range 5 {
		var (
			resp *mautrix.RespRegister
			uia  *mautrix.RespUserInteractive
		)
		err := m.retry.do(ctx, "token registration", retryTransient, func(ctx context.Context) (err error) {
			resp, uia, err = cli.Register(ctx, req)
			if uia != nil {
				return nil
			}
			return err
		})
		if err != nil {
			return err
		}
		if uia == nil {
			m.dropRegistrationDevice(ctx, cli, resp.AccessToken)
			return nil
		}
		next, ok := nextStage(uia, authTypeRegistrationToken)
		if !ok {
			return fmt.Errorf("homeserver offers no registration flow with only %s and %s stages", authTypeRegistrationToken, mautrix.AuthTypeDummy)
		}
		switch next {
		case authTypeRegistrationToken:
			req.Auth = map[string]any{"type": next, "token": token, "session": uia.Session}
		default:
			req.Auth = mautrix.BaseAuthData{Type: next, Session: uia.Session}
		}
	}
	return errors.New("registration did not complete after 5 user-interactive stages")
}

// nextStage picks the first flow made only of stages we can complete
// (registration token, dummy) and returns its first uncompleted stage.
func nextStage(uia *mautrix.RespUserInteractive, tokenStage mautrix.AuthType) (mautrix.AuthType, bool) {
	for _, flow := range uia.Flows {
		usable := slices.ContainsFunc(flow.Stages, func(s mautrix.AuthType) bool { return s == tokenStage }) &&
			!slices.ContainsFunc(flow.Stages, func(s mautrix.AuthType) bool { return s != tokenStage && s != mautrix.AuthTypeDummy })
		if !usable {
			continue
		}
		for _, stage := range flow.Stages {
			if !slices.Contains(uia.Completed, string(stage)) {
				return stage, true
			}
		}
	}
	return "", false
}

// dropRegistrationDevice logs out the device some homeservers create on
// registration despite inhibit_login (Dendrite's shared-secret endpoint
// always does), so accounts keep a single device. Best effort.
func (m *Manager) dropRegistrationDevice(ctx context.Context, cli *mautrix.Client, accessToken string) {
	if accessToken == "" {
		return
	}
	tmp, err := m.newClient(ctx, cli.UserID)
	if err != nil {
		return
	}
	tmp.AccessToken = accessToken
	if _, err := tmp.Logout(ctx); err != nil {
		zerolog.Ctx(ctx).Debug().Err(err).Msg("Failed to log out the device created by registration")
	}
}

// DerivedPassword is the password hookroom gives an account it registers
// while recoveryKey is configured: an HMAC-SHA256 of the user id keyed by
// the recovery key's bytes. It is "" for a malformed or empty key.
func DerivedPassword(recoveryKey string, user id.UserID) string {
	raw := utils.DecodeBase58RecoveryKey(recoveryKey)
	if raw == nil {
		return ""
	}
	mac := hmac.New(sha256.New, raw)
	mac.Write([]byte("hookroom account password\x00"))
	mac.Write([]byte(user))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// newPassword is the password of an account hookroom is about to register.
// Without a recovery key it is random, and lives only in the database.
// With one (Config.Encryption.RecoveryKey) it is derived from the key and
// the user id, so that the recovery key alone logs the account in again
// after the database is lost (and restores its room keys, backup.go): the
// registration then answers M_USER_IN_USE and the derived password works.
// Accounts registered before a recovery key was configured keep their
// random passwords.
func (m *Manager) newPassword(user id.UserID) (string, error) {
	if p := DerivedPassword(m.cfg.Encryption.RecoveryKey, user); p != "" {
		return p, nil
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("failed to generate password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Account is one logged-in Matrix user: the router or an agent. Its methods
// are safe for concurrent use, also while Run is syncing.
type Account struct {
	m      *Manager
	userID id.UserID

	mu     sync.RWMutex               // guards client and helper
	client *mautrix.Client            // replaced as a whole when EnsureAccount logs in again
	helper *cryptohelper.CryptoHelper // the device's encryption, bound to client

	running  atomic.Bool            // Run is active
	position atomic.Pointer[string] // the sync position last saved (SyncPosition)
	seen     *recentSet             // event ids recently handed to the sink, to stop backfill
}

// UserID returns the account's user id.
func (a *Account) UserID() id.UserID { return a.userID }

// DeviceID returns the device the account is logged in on. It stays the
// same across restarts as long as the stored credentials survive.
func (a *Account) DeviceID() id.DeviceID { return a.cli().DeviceID }

// Client returns the underlying mautrix client, for requests matrixio does
// not wrap. Requests made through it bypass matrixio's retry policy.
func (a *Account) Client() *mautrix.Client { return a.cli() }

func (a *Account) cli() *mautrix.Client {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.client
}

func (a *Account) cryptoHelper() *cryptohelper.CryptoHelper {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.helper
}

func (a *Account) do(ctx context.Context, op string, mode retryMode, fn func(context.Context) error) error {
	return a.m.retry.do(ctx, op, mode, fn)
}
