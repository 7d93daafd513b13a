package matrixio_test

import (
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/matrixio"
	"github.com/hookroom/hookroom/matrixio/hstest"

	"github.com/hookroom/hookroom/internal/testkit"
)

// FindSent finds the account's own message by its transaction key after a
// sync position, and only there.
func TestFindSent(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	bot := ensure(t, newManager(t, testConfig(srv), reopenDB(t, openDB(t))), matrixio.AccountSpec{Localpart: unique(t, "bot")})
	room, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{})
	if err != nil {
		t.Fatal(err)
	}
	position := func() string {
		t.Helper()
		resp, err := bot.Client().FullSyncRequest(ctx, mautrix.ReqSync{})
		if err != nil {
			t.Fatal(err)
		}
		return resp.NextBatch
	}
	before := matrixio.TxnKey("$q:example.org", "before")
	old, err := bot.SendText(ctx, room, "before the position", matrixio.SendOptions{TxnKey: before})
	if err != nil {
		t.Fatal(err)
	}
	// Dendrite's sync stream takes an event in a moment after its send
	// returned: wait until the position covers it.
	var since string
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		since = position()
		found, err := bot.FindSent(ctx, room, "", before)
		return err == nil && len(found) == 1 && found[0] == old, "the first message is not in the sync yet"
	})
	since = position()
	key := matrixio.TxnKey("$q:example.org", "placeholder")
	sent, err := bot.SendText(ctx, room, "…", matrixio.SendOptions{TxnKey: key, Notice: true})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		found, err := bot.FindSent(ctx, room, since, key)
		return err == nil && len(found) > 0, "not found yet"
	})
	tests := []struct {
		name  string
		since string
		key   string
		want  []id.EventID
	}{
		{"sent after the position", since, key, []id.EventID{sent}},
		{"from the start", "", key, []id.EventID{sent}},
		{"sent before the position", since, before, nil},
		{"never sent", since, matrixio.TxnKey("$q:example.org", "reply"), nil},
		{"another source", since, matrixio.TxnKey("$other:example.org", "placeholder"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := bot.FindSent(ctx, room, tt.since, tt.key)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("FindSent = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// losingTransport passes requests to the homeserver, but loses the answer
// of the first message send: the event is posted, the client sees a
// connection error. The send goes under the r0 path, which Dendrite's
// transaction cache (keyed by path) does not share with v3: the homeserver
// does not remember the transaction id, as when a client dies while
// Dendrite handles its request.
type losingTransport struct {
	lost atomic.Int32
	next http.RoundTripper
}

func (l *losingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPut || !strings.Contains(req.URL.Path, "/send/") || !l.lost.CompareAndSwap(0, 1) {
		return l.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.URL.Path = strings.Replace(r.URL.Path, "/v3/", "/r0/", 1)
	r.URL.RawPath = ""
	resp, err := l.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New("losingTransport: the send failed: " + resp.Status)
	}
	return nil, errors.New("losingTransport: connection reset after the request was sent")
}

// A send whose answer was lost is not posted again when retried: the retry
// finds the first attempt's event.
func TestSendRetryFindsLostAttempt(t *testing.T) {
	srv := hstest.Shared(t)
	ctx := t.Context()
	lossy := &losingTransport{next: http.DefaultTransport}
	lossy.lost.Store(1) // not while setting up
	cfg := testConfig(srv)
	cfg.HTTPClient = &http.Client{Transport: lossy, Timeout: time.Minute}
	bot := ensure(t, newManager(t, cfg, reopenDB(t, openDB(t))), matrixio.AccountSpec{Localpart: unique(t, "bot")})
	room, err := bot.CreateRoom(ctx, matrixio.CreateRoomOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lossy.lost.Store(0)
	key := matrixio.TxnKey("$q:example.org", "reply")
	got, err := bot.SendText(ctx, room, "only once", matrixio.SendOptions{TxnKey: key})
	if err != nil {
		t.Fatal(err)
	}
	if lossy.lost.Load() != 1 {
		t.Fatal("the first answer was not lost")
	}
	// The room then holds exactly that one message (a second send under
	// v3 would have posted another: Dendrite does not know the r0 one).
	var msgs []id.EventID
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		resp, err := bot.Client().Messages(ctx, room, "", "", mautrix.DirectionBackward, nil, 50)
		if err != nil {
			t.Fatal(err)
		}
		msgs = msgs[:0]
		for _, evt := range resp.Chunk {
			if evt.Type == event.EventMessage {
				msgs = append(msgs, evt.ID)
			}
		}
		return len(msgs) > 0, "no message in the room yet"
	})
	bar, err := bot.SendText(ctx, room, "barrier", matrixio.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Until(t, 10*time.Second, func() (bool, string) {
		resp, err := bot.Client().Messages(ctx, room, "", "", mautrix.DirectionBackward, nil, 50)
		if err != nil {
			t.Fatal(err)
		}
		msgs = msgs[:0]
		seenBarrier := false
		for _, evt := range resp.Chunk {
			if evt.ID == bar {
				seenBarrier = true
			} else if evt.Type == event.EventMessage {
				msgs = append(msgs, evt.ID)
			}
		}
		return seenBarrier, "barrier not seen yet"
	})
	if len(msgs) != 1 || msgs[0] != got {
		t.Errorf("room holds messages %v, want only %s (the send's result)", msgs, got)
	}
}
