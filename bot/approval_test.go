package bot

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/hookroom/hookroom/approval"
)

func TestApprovalCardTexts(t *testing.T) {
	long := `{"text":"` + strings.Repeat("x", 400) + "`" + `"}`
	if got := summarizeArgs(json.RawMessage(long)); !strings.HasSuffix(got, "…") || len([]rune(got)) != cardArgsLimit+1 || strings.Contains(got, "`") {
		t.Errorf("summarizeArgs = %q", got)
	}
	if got := summarizeArgs(json.RawMessage("{ \"b\": 1,\n \"a\": 2 }")); got != `{"a":2,"b":1}` {
		t.Errorf("summarizeArgs = %q", got)
	}
	a := approval.Approval{Agent: "helper", Tool: "shell", Arguments: json.RawMessage(`{"cmd":"ls"}`), Requester: "@alice:x",
		Reason: "ops rule", ExpiresAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	card := cardText(a)
	for _, w := range []string{"helper", "`shell`", `{"cmd":"ls"}`, "@alice:x", "Why: ops rule", "03:04:05 UTC", "✅", "❌"} {
		if !strings.Contains(card, w) {
			t.Errorf("card %q lacks %q", card, w)
		}
	}
	cases := []struct {
		status   approval.Status
		by       string
		reason   string
		text     string
		approved bool
		model    string
	}{
		{approval.Approved, "@alice:x", "", "✅ Approved by @alice:x.", true, ""},
		{approval.Denied, "@alice:x", "not today", "❌ Denied by @alice:x: not today.", false, "@alice:x denied it: not today"},
		{approval.Denied, "", "policy", "❌ Denied: policy.", false, "it was denied: policy"},
		{approval.Expired, "", "", "⌛ Expired: nobody answered by 03:04:05 UTC", false, "nobody approved it before the deadline (03:04:05 UTC)"},
		{approval.Cancelled, "", "the turn was stopped", "🚫 Cancelled: the turn was stopped.", false, "the approval was cancelled"},
	}
	for _, c := range cases {
		a.Status, a.DecidedBy, a.DecisionReason = c.status, "", c.reason
		if c.by != "" {
			a.DecidedBy = "@alice:x"
		}
		if got := outcomeText(a); !strings.HasPrefix(got, c.text) {
			t.Errorf("%s: outcome %q, want it to start with %q", c.status, got, c.text)
		}
	}
}
