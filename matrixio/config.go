package matrixio

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// Config says which homeserver matrixio talks to and how. The bot maps its
// config.yaml onto it. The zero value of every field except HomeserverURL and
// ServerName is a sensible default.
type Config struct {
	// HomeserverURL is the base URL of the client-server API, e.g.
	// "https://matrix.example.org" or "http://127.0.0.1:8008". Required.
	HomeserverURL string
	// ServerName is the homeserver's server name, the part after the colon
	// in user ids ("example.org"). Required: account localparts become
	// "@localpart:ServerName" and room alias localparts "#alias:ServerName".
	ServerName string

	// Registration says how missing accounts are created. With neither a
	// shared secret nor a token, EnsureAccount can only use accounts whose
	// credentials are already stored or whose password is configured.
	Registration Registration

	// DeviceDisplayName is the display name of the devices hookroom logs in.
	// Default "hookroom".
	DeviceDisplayName string

	// TimelineLimit is the per-room timeline limit of the sync filter.
	// Default 1000. A burst larger than this between two syncs is filled by
	// syncing the same range again with a limit of BackfillLimit.
	TimelineLimit int
	// BackfillLimit is the per-room timeline limit of the re-sync that
	// fills a limited timeline, and the cap of the /messages fallback.
	// Default 10000. A room with more events in the range gets
	// RoomEvents.Gap set (and a warning in the log).
	BackfillLimit int
	// SyncTimeout is the long-poll timeout of /sync. Default 30s.
	SyncTimeout time.Duration

	// Retry is the retry policy for requests to the homeserver.
	Retry RetryPolicy

	// Encryption configures end-to-end encryption, which every account
	// always supports.
	Encryption Encryption

	// HTTPClient is used for every request if set. Default: a client with a
	// timeout of SyncTimeout plus two minutes.
	HTTPClient *http.Client
}

// Registration holds the means to create missing accounts. At most one is
// used: the application service token wins over the shared secret, which
// wins over the token. Its String method never shows the secrets, so it is
// safe to log.
type Registration struct {
	// AppServiceToken is the as_token of the application service hookroom
	// is registered as (AppServiceRegistration). Accounts are created and
	// logged in with it (m.login.application_service): no password is
	// generated or needed. The accounts must be in the registration's user
	// namespace.
	AppServiceToken string
	// SharedSecret is the homeserver's registration shared secret
	// (Synapse registration_shared_secret, Dendrite
	// client_api.registration_shared_secret). Accounts are created through
	// /_synapse/admin/v1/register, which both homeservers serve.
	SharedSecret string
	// Token is a registration token for the m.login.registration_token
	// user-interactive flow of /register.
	Token string
}

// String reports which registration method is configured, without secrets.
func (r Registration) String() string {
	switch {
	case r.AppServiceToken != "":
		return "appservice"
	case r.SharedSecret != "":
		return "shared-secret"
	case r.Token != "":
		return "registration-token"
	default:
		return "none"
	}
}

// RetryPolicy controls how requests are retried after rate limiting
// (M_LIMIT_EXCEEDED, HTTP 429), gateway and server errors (5xx) and network
// errors. The zero value is the default.
type RetryPolicy struct {
	// MaxAttempts is the number of tries per request, the first included.
	// Default 8. A negative value means one try and no retries.
	MaxAttempts int
	// InitialBackoff is the wait after the first failure; it doubles after
	// each further failure. Default 500ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the exponential wait. Default 30s.
	MaxBackoff time.Duration
	// MaxRetryAfter caps how long a server-requested wait (retry_after_ms or
	// Retry-After) is honoured; a longer request fails immediately with the
	// rate-limit error. Default 5 minutes.
	MaxRetryAfter time.Duration
	// Observer, when set, is told about every retry before its wait
	// (metrics count retries and rate-limit waits with it).
	Observer RetryObserver
}

// RetryObserver is told about each retry of a homeserver request, before
// the wait. It is called on the requesting goroutine and must return
// quickly.
type RetryObserver interface {
	Retrying(ctx context.Context, r Retry)
}

// Retry describes one retry of a homeserver request.
type Retry struct {
	// Request names the request ("send m.room.message", "join", "login"…);
	// a small fixed set, fit for a metric label.
	Request string
	// Attempt is the number of the attempt that failed (1 for the first).
	Attempt int
	// Wait is how long the retrier waits before the next attempt.
	Wait time.Duration
	// RateLimited is set when the homeserver rate-limited the request
	// (M_LIMIT_EXCEEDED or HTTP 429).
	RateLimited bool
}

const (
	defaultTimelineLimit     = 1000
	defaultBackfillLimit     = 10000
	defaultSyncTimeout       = 30 * time.Second
	defaultDeviceDisplayName = "hookroom"

	defaultMaxAttempts    = 8
	defaultInitialBackoff = 500 * time.Millisecond
	defaultMaxBackoff     = 30 * time.Second
	defaultMaxRetryAfter  = 5 * time.Minute
)

// ErrInvalidConfig is wrapped by the errors NewManager returns for a bad Config.
var ErrInvalidConfig = errors.New("invalid matrixio config")

// withDefaults returns a copy of cfg with zero values replaced by defaults,
// or an error if a required field is missing or malformed.
func (cfg Config) withDefaults() (Config, error) {
	if cfg.HomeserverURL == "" {
		return cfg, fmt.Errorf("%w: homeserver URL is empty", ErrInvalidConfig)
	}
	if u, err := url.Parse(cfg.HomeserverURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cfg, fmt.Errorf("%w: homeserver URL %q is not an http(s) URL", ErrInvalidConfig, cfg.HomeserverURL)
	}
	if cfg.ServerName == "" {
		return cfg, fmt.Errorf("%w: server name is empty", ErrInvalidConfig)
	}
	if cfg.DeviceDisplayName == "" {
		cfg.DeviceDisplayName = defaultDeviceDisplayName
	}
	if cfg.TimelineLimit <= 0 {
		cfg.TimelineLimit = defaultTimelineLimit
	}
	if cfg.BackfillLimit <= 0 {
		cfg.BackfillLimit = defaultBackfillLimit
	}
	if cfg.SyncTimeout <= 0 {
		cfg.SyncTimeout = defaultSyncTimeout
	}
	cfg.Retry = cfg.Retry.withDefaults()
	switch cfg.Encryption.ShareKeysWith {
	case "":
		cfg.Encryption.ShareKeysWith = DevicesAll
	case DevicesAll, DevicesCrossSigned:
	default:
		return cfg, fmt.Errorf("%w: unknown device trust %q (want %q or %q)", ErrInvalidConfig, cfg.Encryption.ShareKeysWith, DevicesAll, DevicesCrossSigned)
	}
	if cfg.Encryption.KeyWait <= 0 {
		cfg.Encryption.KeyWait = defaultKeyWait
	}
	if cfg.Encryption.RecoveryKey != "" && !ValidRecoveryKey(cfg.Encryption.RecoveryKey) {
		return cfg, fmt.Errorf("%w: the recovery key is malformed (want 48 base58 characters, as NewRecoveryKey makes)", ErrInvalidConfig)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: cfg.SyncTimeout + 2*time.Minute}
	}
	return cfg, nil
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	switch {
	case p.MaxAttempts == 0:
		p.MaxAttempts = defaultMaxAttempts
	case p.MaxAttempts < 0:
		p.MaxAttempts = 1
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = defaultInitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = defaultMaxBackoff
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = defaultMaxRetryAfter
	}
	return p
}
