package matrixio

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
)

// retryMode says which failures may be retried for one request.
type retryMode int

const (
	// retryTransient retries rate limits, server errors and network errors.
	// Only for requests that are safe to repeat (reads, PUTs with a
	// transaction id, joins, state puts).
	retryTransient retryMode = iota
	// retryRejected retries only when the server said it rejected the
	// request without acting on it (rate limiting). For requests that must
	// not run twice, such as creating a room without an alias.
	retryRejected
)

// retrier runs requests under a RetryPolicy. mautrix's own retries are off
// (DefaultHTTPRetries is 0); this is the only retry layer, so it is the one
// place that reads retry_after_ms, which mautrix ignores.
type retrier struct {
	policy RetryPolicy
	// sleep waits for d or until ctx is done. Tests replace it to record the
	// waits instead of taking them.
	sleep func(ctx context.Context, d time.Duration) error
}

func newRetrier(p RetryPolicy) *retrier {
	return &retrier{policy: p.withDefaults(), sleep: sleepCtx}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// do calls fn until it succeeds, fails permanently, runs out of attempts or
// ctx is done. It returns fn's last error unchanged (callers wrap it), or
// ctx's error if ctx ended while waiting. op names the request in logs.
func (r *retrier) do(ctx context.Context, op string, mode retryMode, fn func(context.Context) error) error {
	backoff := r.policy.InitialBackoff
	for attempt := 1; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		wait, named, ok := r.retryDelay(err, backoff, mode)
		if !ok || attempt >= r.policy.MaxAttempts {
			return err
		}
		if o := r.policy.Observer; o != nil {
			o.Retrying(ctx, Retry{Request: op, Attempt: attempt, Wait: wait, RateLimited: isRateLimit(err)})
		}
		zerolog.Ctx(ctx).Warn().Err(err).
			Str("request", op).
			Int("attempt", attempt).
			Dur("retry_in", wait).
			Msg("Homeserver request failed, retrying")
		if serr := r.sleep(ctx, wait); serr != nil {
			return serr
		}
		if !named {
			backoff = min(backoff*2, r.policy.MaxBackoff)
		}
	}
}

// isRateLimit reports whether err is the homeserver rate-limiting a request.
func isRateLimit(err error) bool {
	var httpErr mautrix.HTTPError
	return errors.As(err, &httpErr) && (errors.Is(err, mautrix.MLimitExceeded) ||
		httpErr.Response != nil && httpErr.Response.StatusCode == http.StatusTooManyRequests)
}

// retryDelay classifies err. It returns how long to wait before the next
// attempt, whether the server named that wait, and whether there should be
// another attempt at all. backoff is the current exponential wait, used
// when the server names no delay.
func (r *retrier) retryDelay(err error, backoff time.Duration, mode retryMode) (wait time.Duration, named, ok bool) {
	var httpErr mautrix.HTTPError
	if errors.As(err, &httpErr) && httpErr.Response != nil {
		status := httpErr.Response.StatusCode
		switch {
		case status == http.StatusTooManyRequests || errors.Is(err, mautrix.MLimitExceeded):
			wait, named := RetryAfter(err)
			if !named {
				return backoff, false, true
			}
			return wait, true, wait <= r.policy.MaxRetryAfter
		case status >= 500 && status != http.StatusNotImplemented && status != http.StatusHTTPVersionNotSupported:
			return backoff, false, mode == retryTransient
		default:
			return 0, false, false
		}
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return backoff, false, mode == retryTransient
	}
	return 0, false, false
}

// RetryAfter reports how long the homeserver asked the client to wait before
// retrying, from the error body's retry_after_ms (M_LIMIT_EXCEEDED) or else
// the Retry-After header. ok is false when err names no delay.
func RetryAfter(err error) (wait time.Duration, ok bool) {
	var httpErr mautrix.HTTPError
	if !errors.As(err, &httpErr) {
		return 0, false
	}
	if httpErr.RespError != nil {
		switch v := httpErr.RespError.ExtraData["retry_after_ms"].(type) {
		case float64:
			if v >= 0 {
				return time.Duration(v) * time.Millisecond, true
			}
		case string:
			if ms, perr := strconv.ParseInt(v, 10, 64); perr == nil && ms >= 0 {
				return time.Duration(ms) * time.Millisecond, true
			}
		}
	}
	if httpErr.Response != nil {
		h := httpErr.Response.Header.Get("Retry-After")
		if h == "" {
			return 0, false
		}
		if secs, perr := strconv.Atoi(h); perr == nil && secs >= 0 {
			return time.Duration(secs) * time.Second, true
		}
		if t, perr := http.ParseTime(h); perr == nil {
			return max(time.Until(t), 0), true
		}
	}
	return 0, false
}
