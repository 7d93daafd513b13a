package tracking

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hookroom/hookroom/internal/dbtest"
)

func TestDelivery(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		s := newStore(t, d)
		ctx := context.Background()
		if got, err := s.Delivery(ctx, "$q"); err != nil || got != "" {
			t.Fatalf("no delivery yet: %q, %v", got, err)
		}
		if err := s.RecordDelivery(ctx, "!r:hs", "$q", "$reply1"); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordDelivery(ctx, "!r:hs", "$q", "$reply2"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Delivery(ctx, "$q"); err != nil || got != "$reply1" {
			t.Errorf("delivery = %q, %v; want the first reply recorded", got, err)
		}
	})
}

// A database made before the delivery table existed gets it on upgrade.
func TestUpgradeFromV1AddsDeliveries(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		// The v1 schema: everything but the delivery table, at version 1.
		s := upgradedFrom(t, d,
			`CREATE TABLE tracking_version (version INTEGER, compat INTEGER)`,
			`INSERT INTO tracking_version (version, compat) VALUES (1, 1)`,
		)
		if err := s.RecordDelivery(ctx, "!r:hs", "$q", "$a"); err != nil {
			t.Fatalf("delivery table missing after upgrade: %v", err)
		}
	})
}

func TestReplies(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		s := newStore(t, d)
		ctx := context.Background()
		if got, err := s.Replies(ctx, "$q"); err != nil || len(got) != 0 {
			t.Fatalf("no replies yet: %v, %v", got, err)
		}
		for _, r := range []Reply{
			{Part: 2, EventID: "$c", Sender: "@helper:hs"},
			{Part: 0, EventID: "$a", Sender: "@helper:hs"},
			{Part: 1, EventID: "$b", Sender: "@helper:hs"},
			{Part: 1, EventID: "$b2", Sender: "@helper:hs"}, // the first recorded wins
		} {
			if err := s.RecordReply(ctx, "!r:hs", "$q", r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.Replies(ctx, "$q")
		if err != nil {
			t.Fatal(err)
		}
		want := []Reply{{Part: 0, EventID: "$a", Sender: "@helper:hs"}, {Part: 1, EventID: "$b", Sender: "@helper:hs"}, {Part: 2, EventID: "$c", Sender: "@helper:hs"}}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("replies = %v, want %v", got, want)
		}
		if first, err := s.Delivery(ctx, "$q"); err != nil || first != "$a" {
			t.Errorf("Delivery = %q, %v; want part 0", first, err)
		}
	})
}

// A v2 database keeps its delivery records, as part 0 without a sender.
func TestUpgradeFromV2KeepsDeliveries(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		ctx := context.Background()
		s := upgradedFrom(t, d,
			`CREATE TABLE tracking_version (version INTEGER, compat INTEGER)`,
			`INSERT INTO tracking_version (version, compat) VALUES (2, 2)`,
			`CREATE TABLE tracking_delivery (source_event_id TEXT PRIMARY KEY, room_id TEXT NOT NULL, reply_event_id TEXT NOT NULL, created_at BIGINT NOT NULL)`,
			`INSERT INTO tracking_delivery VALUES ('$q', '!r:hs', '$old', 1)`,
		)
		got, err := s.Replies(ctx, "$q")
		if err != nil || fmt.Sprint(got) != fmt.Sprint([]Reply{{Part: 0, EventID: "$old", Sender: ""}}) {
			t.Errorf("replies after upgrade = %v, %v", got, err)
		}
	})
}

// An intent stays until its reply is recorded under the same key and run
// or it is forgotten; recording it twice keeps the first sync position;
// another run's intent under the same key is another intent.
func TestDeliveryIntents(t *testing.T) {
	dbtest.ForDialects(t, func(t *testing.T, d dbtest.Dialect) {
		s := newStore(t, d)
		ctx := context.Background()
		placeholder := Intent{Room: "!r:hs", Part: 0, TxnKey: "k-placeholder", Run: "run1", Sender: "@a:hs", Since: "s1"}
		part1 := Intent{Room: "!r:hs", Part: 1, TxnKey: "k-reply-1", Run: "run1", Sender: "@a:hs", Since: "s2"}
		again := Intent{Room: "!r:hs", Part: 0, TxnKey: "k-placeholder", Run: "run2", Sender: "@a:hs", Since: "s3"}
		for _, in := range []Intent{placeholder, part1, {Room: "!r:hs", TxnKey: "k-placeholder", Run: "run1", Sender: "@a:hs", Since: "s9"}, again} {
			if err := s.IntendReply(ctx, "$q", in); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.IntendReply(ctx, "$other", Intent{Room: "!r:hs", TxnKey: "k", Run: "run1", Sender: "@a:hs"}); err != nil {
			t.Fatal(err)
		}
		got, err := s.Intents(ctx, "$q")
		if err != nil {
			t.Fatal(err)
		}
		// Oldest first; recorded within a millisecond, any order.
		slices.SortFunc(got, func(a, b Intent) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		if want := []Intent{placeholder, again, part1}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("intents = %+v, want %+v", got, want)
		}

		// The second run's placeholder is confirmed: the first run's stays.
		if err := s.RecordReply(ctx, "!r:hs", "$q", Reply{EventID: "$p", Sender: "@a:hs", TxnKey: "k-placeholder", Run: "run2"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Intents(ctx, "$q"); fmt.Sprint(got) != fmt.Sprint([]Intent{placeholder, part1}) {
			t.Errorf("after RecordReply: %+v, want the first run's", got)
		}
		if r, _ := s.Replies(ctx, "$q"); len(r) != 1 || r[0].EventID != "$p" {
			t.Errorf("replies = %+v", r)
		}
		for _, in := range []Intent{placeholder, part1} {
			if err := s.ForgetIntent(ctx, "$q", in); err != nil {
				t.Fatal(err)
			}
		}
		if got, _ := s.Intents(ctx, "$q"); len(got) != 0 {
			t.Errorf("after ForgetIntent: %+v", got)
		}
		if got, _ := s.Intents(ctx, "$other"); len(got) != 1 {
			t.Errorf("another source's intent: %+v", got)
		}
	})
}
