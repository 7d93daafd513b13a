package tracking

import (
	"context"
	"testing"
)

func TestDelivery(t *testing.T) {
	s := newStore(t)
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
}
