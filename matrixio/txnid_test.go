package matrixio

import (
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// The derived values are pinned: changing the derivation would make a
// process that restarts onto a new hookroom version resend with different
// transaction ids, defeating the homeserver's deduplication.
func TestTxnKeyPinned(t *testing.T) {
	tests := []struct {
		name   string
		source id.EventID
		stage  string
		want   string
	}{
		{name: "reply", source: "$abc:example.org", stage: "reply", want: "6lT6qhi6_z6cZPMZXxf4xA"},
		{name: "first edit", source: "$abc:example.org", stage: "edit/1", want: "4K1M4rtY7Omv2nnBHHeZ9A"},
		{name: "empty stage", source: "$abc:example.org", stage: "", want: "pvy6_BHnoGOml1qH_GTKWA"},
		{name: "unicode stage", source: "$abc:example.org", stage: "react/👀", want: "Ini9-QU_QyzSGlout7M24g"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TxnKey(tt.source, tt.stage)
			if got != tt.want {
				t.Errorf("TxnKey(%q, %q) = %q, want %q", tt.source, tt.stage, got, tt.want)
			}
			if again := TxnKey(tt.source, tt.stage); again != got {
				t.Errorf("TxnKey is not deterministic: %q then %q", got, again)
			}
		})
	}
}

func TestTxnKeyDistinct(t *testing.T) {
	// Pairs that a naive concatenation would confuse must differ.
	pairs := []struct {
		name string
		a, b [2]string
	}{
		{name: "stage differs", a: [2]string{"$e", "reply"}, b: [2]string{"$e", "edit/1"}},
		{name: "source differs", a: [2]string{"$e1", "reply"}, b: [2]string{"$e2", "reply"}},
		{name: "boundary shift", a: [2]string{"$ab", "c"}, b: [2]string{"$a", "bc"}},
		{name: "separator injection", a: [2]string{"$a;1:b", ""}, b: [2]string{"$a", "b"}},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			ka := TxnKey(id.EventID(p.a[0]), p.a[1])
			kb := TxnKey(id.EventID(p.b[0]), p.b[1])
			if ka == kb {
				t.Errorf("TxnKey%v and TxnKey%v collide: %q", p.a, p.b, ka)
			}
		})
	}
}

func TestWireTxnID(t *testing.T) {
	key := TxnKey("$src:example.org", "reply")
	base := wireTxnID(key, "!room:example.org", event.EventMessage)
	if base != "hr1_BCc1tiiNrxOWLvHLEcDSBQ" {
		t.Errorf("pinned wire txn id changed: %q", base)
	}
	tests := []struct {
		name    string
		key     string
		room    id.RoomID
		evtType event.Type
		same    bool
	}{
		{name: "same inputs", key: key, room: "!room:example.org", evtType: event.EventMessage, same: true},
		{name: "other room", key: key, room: "!other:example.org", evtType: event.EventMessage},
		{name: "other type", key: key, room: "!room:example.org", evtType: event.EventReaction},
		{name: "other key", key: TxnKey("$src:example.org", "edit/1"), room: "!room:example.org", evtType: event.EventMessage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := wireTxnID(tt.key, tt.room, tt.evtType)
			if (got == base) != tt.same {
				t.Errorf("wireTxnID = %q, base %q, want same=%v", got, base, tt.same)
			}
		})
	}
}

func TestContentTxnKey(t *testing.T) {
	a, err := contentTxnKey(textContent("hello", SendOptions{}))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := contentTxnKey(textContent("hello", SendOptions{}))
	c, _ := contentTxnKey(textContent("hello!", SendOptions{}))
	d, _ := contentTxnKey(textContent("hello", SendOptions{ThreadRoot: "$root"}))
	if a != b {
		t.Errorf("same content gave different keys %q, %q", a, b)
	}
	if a == c || a == d {
		t.Errorf("different content gave the same key: %q %q %q", a, c, d)
	}
	if _, err := contentTxnKey(map[string]any{"bad": make(chan int)}); err == nil {
		t.Error("unmarshalable content gave no error")
	}
}
