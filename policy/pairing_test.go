package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/internal/dbtest"
	"github.com/hookroom/hookroom/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestPairing(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, db *dbutil.Database, s *Store) {
		ctx := t.Context()
		now := time.UnixMilli(1_700_000_000_000)
		o := PairingOptions{} // defaults: 1h, 100 codes
		req := CodeRequest{Agent: "coder", Person: "@zed:example.org", Room: dm}

		c, fresh, err := s.Issue(ctx, now, req, o)
		if err != nil {
			t.Fatal(err)
		}
		if !fresh || len(c.Code) != CodeLength || c.Agent != "coder" || c.Person != req.Person || c.Room != dm ||
			!c.ExpiresAt.Equal(now.Add(time.Hour)) || !c.CreatedAt.Equal(now) {
			t.Fatalf("Issue = %+v, fresh %v", c, fresh)
		}
		if _, ok := NormalizeCode(c.Code); !ok {
			t.Errorf("issued code %q does not normalize", c.Code)
		}
		// Asking again returns the same code, not fresh: one live code
		// per person and agent.
		again, fresh, err := s.Issue(ctx, now.Add(30*time.Minute), req, o)
		if err != nil || fresh || again.Code != c.Code || !again.ExpiresAt.Equal(c.ExpiresAt) {
			t.Errorf("second Issue = %+v, fresh %v, %v; want the same code", again, fresh, err)
		}
		// Another agent, another code.
		other, fresh, err := s.Issue(ctx, now, CodeRequest{Agent: "pairer", Person: req.Person, Room: dm}, o)
		if err != nil || !fresh || other.Code == c.Code {
			t.Errorf("Issue for another agent = %+v, %v, %v", other, fresh, err)
		}
		pending, err := s.PendingCodes(ctx, now)
		if err != nil || len(pending) != 2 {
			t.Fatalf("PendingCodes = %+v, %v", pending, err)
		}
		if s.IsPaired("coder", req.Person) {
			t.Fatal("paired before any confirmation")
		}

		// An administrator confirms, typing the code loosely.
		loose := strings.ToLower(c.Code[:4]) + "-" + c.Code[4:]
		p, err := s.Confirm(ctx, now.Add(time.Minute), loose, "@admin:example.org")
		if err != nil {
			t.Fatal(err)
		}
		if p.Agent != "coder" || p.Person != req.Person || p.PairedBy != "@admin:example.org" || p.Code != c.Code ||
			p.Room != dm || !p.PairedAt.Equal(now.Add(time.Minute)) {
			t.Errorf("Confirm = %+v", p)
		}
		if !s.IsPaired("coder", req.Person) || s.IsPaired("pairer", req.Person) {
			t.Error("IsPaired after Confirm is wrong")
		}
		// Single use.
		if _, err := s.Confirm(ctx, now.Add(time.Minute), c.Code, "@admin:example.org"); !errors.Is(err, ErrUnknownCode) {
			t.Errorf("second Confirm = %v, want ErrUnknownCode", err)
		}
		for _, bad := range []string{"", "short", "OOOOOOOO", "ABCDEFG1"} {
			if _, err := s.Confirm(ctx, now, bad, "@admin:example.org"); !errors.Is(err, ErrUnknownCode) {
				t.Errorf("Confirm(%q) = %v, want ErrUnknownCode", bad, err)
			}
		}

		// Expiry: the other code is dead after an hour, once.
		if _, err := s.Confirm(ctx, now.Add(time.Hour), other.Code, "@admin:example.org"); !errors.Is(err, ErrCodeExpired) {
			t.Errorf("Confirm of an expired code = %v, want ErrCodeExpired", err)
		}
		if _, err := s.Confirm(ctx, now.Add(time.Hour), other.Code, "@admin:example.org"); !errors.Is(err, ErrUnknownCode) {
			t.Errorf("Confirm of an expired code again = %v, want ErrUnknownCode", err)
		}
		if s.IsPaired("pairer", req.Person) {
			t.Error("an expired code paired")
		}
		// After expiry, asking again gives a new code.
		renewed, fresh, err := s.Issue(ctx, now.Add(2*time.Hour), CodeRequest{Agent: "pairer", Person: req.Person, Room: dm}, o)
		if err != nil || !fresh || renewed.Code == other.Code {
			t.Errorf("Issue after expiry = %+v, %v, %v", renewed, fresh, err)
		}
		if pending, _ := s.PendingCodes(ctx, now.Add(2*time.Hour)); len(pending) != 1 || pending[0].Code != renewed.Code {
			t.Errorf("PendingCodes = %+v", pending)
		}

		// The pairing survives a restart (a new Store on the database).
		restarted := NewStore(db)
		if err := restarted.Upgrade(ctx); err != nil {
			t.Fatal(err)
		}
		if !restarted.IsPaired("coder", req.Person) {
			t.Error("the pairing did not survive a restart")
		}
		list, err := restarted.Pairings(ctx, "")
		if err != nil || len(list) != 1 || list[0].Person != req.Person || list[0].PairedBy != "@admin:example.org" {
			t.Errorf("Pairings = %+v, %v", list, err)
		}
		if list, err := restarted.Pairings(ctx, "pairer"); err != nil || len(list) != 0 {
			t.Errorf("Pairings(pairer) = %+v, %v", list, err)
		}

		// Unpair revokes it, and the person's live code.
		if ok, err := restarted.Unpair(ctx, "coder", req.Person); err != nil || !ok {
			t.Errorf("Unpair = %v, %v", ok, err)
		}
		if ok, err := restarted.Unpair(ctx, "coder", req.Person); err != nil || ok {
			t.Errorf("second Unpair = %v, %v; want false", ok, err)
		}
		if ok, _ := restarted.Unpair(ctx, "pairer", req.Person); ok {
			t.Error("Unpair of someone only holding a code reported a pairing")
		}
		if pending, _ := restarted.PendingCodes(ctx, now.Add(2*time.Hour)); len(pending) != 0 {
			t.Errorf("codes after Unpair: %+v", pending)
		}
		if restarted.IsPaired("coder", req.Person) {
			t.Error("still paired after Unpair")
		}
		if _, _, err := s.Issue(ctx, now, CodeRequest{Agent: "coder"}, o); err == nil {
			t.Error("Issue without a person succeeded")
		}
	})
}

// At most max_pending_codes codes wait at once; expired ones free their
// place.
func TestPairingMaxPending(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		now := time.UnixMilli(1_700_000_000_000)
		o := PairingOptions{CodeTTL: time.Minute, MaxPendingCodes: 2}
		for _, person := range []id.UserID{"@a:x.org", "@b:x.org"} {
			if _, _, err := s.Issue(ctx, now, CodeRequest{Agent: "coder", Person: person}, o); err != nil {
				t.Fatal(err)
			}
		}
		if _, _, err := s.Issue(ctx, now, CodeRequest{Agent: "coder", Person: "@c:x.org"}, o); !errors.Is(err, ErrTooManyCodes) {
			t.Errorf("third code = %v, want ErrTooManyCodes", err)
		}
		// A person holding a code still gets it back.
		if _, fresh, err := s.Issue(ctx, now, CodeRequest{Agent: "coder", Person: "@a:x.org"}, o); err != nil || fresh {
			t.Errorf("a holder asking again: %v, %v", fresh, err)
		}
		if _, fresh, err := s.Issue(ctx, now.Add(time.Minute), CodeRequest{Agent: "coder", Person: "@c:x.org"}, o); err != nil || !fresh {
			t.Errorf("after expiry: %v, %v", fresh, err)
		}
	})
}

// Of concurrent confirmations of one code, exactly one wins; concurrent
// requests of one person get one code.
func TestPairingRaces(t *testing.T) {
	dbtest.ForStores(t, NewStore, func(t *testing.T, _ *dbutil.Database, s *Store) {
		ctx := t.Context()
		now := time.UnixMilli(1_700_000_000_000)
		req := CodeRequest{Agent: "coder", Person: "@zed:example.org"}
		codes := make([]string, 8)
		wins, errs := dbtest.Race(8, func(i int) (bool, error) {
			c, fresh, err := s.Issue(ctx, now, req, PairingOptions{})
			codes[i] = c.Code
			return fresh, err
		})
		if len(errs) > 0 || wins != 1 {
			t.Fatalf("concurrent Issue: %d fresh, errors %v", wins, errs)
		}
		for _, c := range codes {
			if c != codes[0] {
				t.Fatalf("concurrent Issue gave different codes: %q", codes)
			}
		}
		wins, errs = dbtest.Race(8, func(int) (bool, error) {
			_, err := s.Confirm(ctx, now, codes[0], "@admin:example.org")
			if errors.Is(err, ErrUnknownCode) {
				return false, nil
			}
			return err == nil, err
		})
		if len(errs) > 0 || wins != 1 {
			t.Errorf("concurrent Confirm: %d wins, errors %v", wins, errs)
		}
	})
}

func TestNormalizeCode(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"ABCD2345", "ABCD2345", true},
		{"abcd-2345", "ABCD2345", true},
		{" ab cd 23 45 ", "ABCD2345", true},
		{"ABCD234", "", false},
		{"ABCD23456", "", false},
		{"ABCD2340", "", false}, // 0 is not in the alphabet
		{"ABCDI234", "", false}, // nor I
		{"ÄBCD2345", "", false},
	}
	for _, tt := range tests {
		if got, ok := NormalizeCode(tt.in); got != tt.want || ok != tt.ok {
			t.Errorf("NormalizeCode(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	seen := map[string]bool{}
	for range 1000 {
		c := newCode()
		if _, ok := NormalizeCode(c); !ok || seen[c] {
			t.Fatalf("newCode gave %q (valid %v, seen before %v)", c, ok, seen[c])
		}
		seen[c] = true
	}
}
