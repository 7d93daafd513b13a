package matrixio

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// TxnKey derives the transaction key for something sent because of the
// event source, at the given stage of handling it ("reply", "edit/3",
// "react/👀", …). Handling the same event again after a crash derives the
// same key, so the resend collapses on the homeserver into the event that
// was already sent. Pass it as SendOptions.TxnKey.
func TxnKey(source id.EventID, stage string) string {
	return hashParts("hookroom.txnkey.v1", string(source), stage)
}

// wireTxnID is the transaction id put in the request path: the caller's key
// mixed with the room and event type, so one key reused for another room or
// event type can never be answered with an unrelated earlier event.
// Homeservers scope transaction ids per device, which is why the device id
// of each account is persisted and reused.
func wireTxnID(key string, room id.RoomID, evtType event.Type) string {
	return "hr1_" + hashParts("hookroom.txnid.v1", key, string(room), evtType.Type)
}

// contentTxnKey derives a key from the content itself, for sends without a
// caller-supplied key: the same content sent twice within the homeserver's
// transaction window collapses to one event.
func contentTxnKey(content any) (string, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return "", fmt.Errorf("failed to marshal content for transaction id: %w", err)
	}
	return hashParts("hookroom.content.v1", string(raw)), nil
}

// hashParts hashes the parts unambiguously (length-prefixed) and returns
// 128 bits of the digest in unpadded URL-safe base64 (22 characters).
func hashParts(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		fmt.Fprintf(h, "%d:%s;", len(p), p)
	}
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}
