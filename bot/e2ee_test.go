package bot

import (
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/matrixio"
)

func TestE2EEReport(t *testing.T) {
	statuses := []matrixio.EncryptionStatus{
		{UserID: "@router:x", DeviceID: "RDEV", CrossSigned: true,
			Backup: matrixio.BackupStatus{Enabled: true, Version: "3", Keys: 12, Pending: 1, Restored: 5}},
		{UserID: "@helper:x", DeviceID: "HDEV",
			Backup: matrixio.BackupStatus{Error: matrixio.ErrRecoveryKeyMismatch.Error(), Keys: -1}},
		{UserID: "@other:x", DeviceID: "ODEV", CrossSigned: true,
			Backup: matrixio.BackupStatus{Enabled: true, Version: "4", Keys: -1, Error: "failed to upload"}},
	}
	tests := []struct {
		name     string
		recovery bool
		want     []string
		notWant  []string
	}{{
		name:     "with a recovery key",
		recovery: true,
		want: []string{
			"- @router:x — device `RDEV`, cross-signed, key backup 3: 12 keys, 1 not backed up yet, 5 restored at start\n",
			"- @helper:x — device `HDEV`, not cross-signed, key backup off: the account's secret storage uses another recovery key\n",
			"- @other:x — device `ODEV`, cross-signed, key backup 4: key count unknown, 0 not backed up yet (last upload failed: failed to upload)\n",
			"Messages no account could decrypt in the last hour: 2",
		},
		notWant: []string{"set matrix.encryption.recovery_key"},
	}, {
		name: "without",
		want: []string{"not cross-signed, no key backup (no recovery key)", "set matrix.encryption.recovery_key"},
	}}
	for _, tt := range tests {
		st := statuses
		if !tt.recovery {
			st = []matrixio.EncryptionStatus{{UserID: "@helper:x", DeviceID: "HDEV", Backup: matrixio.BackupStatus{Keys: -1}}}
		}
		got := e2eeReport(st, tt.recovery, 2)
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: report lacks %q:\n%s", tt.name, w, got)
			}
		}
		for _, w := range tt.notWant {
			if strings.Contains(got, w) {
				t.Errorf("%s: report has %q:\n%s", tt.name, w, got)
			}
		}
	}
}

func TestMatrixEncryption(t *testing.T) {
	off := false
	got := matrixEncryption(config.Encryption{ShareKeysWith: "cross_signed", DecryptGraceMS: 1500, RecoveryKey: "EsSz", KeyBackup: &off})
	if got.ShareKeysWith != matrixio.DevicesCrossSigned || got.KeyWait.Milliseconds() != 1500 || got.RecoveryKey != "EsSz" || !got.RestoreOnly {
		t.Errorf("matrixEncryption = %+v", got)
	}
	if matrixEncryption(config.Encryption{RecoveryKey: "EsSz"}).RestoreOnly {
		t.Error("key_backup unset must upload")
	}
}

func TestThreadMessages(t *testing.T) {
	msg := func(id_ id.EventID, sender id.UserID, body string) *event.Event {
		return &event.Event{ID: id_, Sender: sender, Type: event.EventMessage,
			Content: event.Content{Parsed: &event.MessageEventContent{MsgType: event.MsgText, Body: body}}}
	}
	enc := &event.Event{ID: "$enc", Sender: "@alice:x", Type: event.EventEncrypted}
	events := []*event.Event{
		msg("$root", "@alice:x", "what is the plan?"),
		enc,
		msg("$answer", "@helper:x", "ship on Friday"),
		{ID: "$state", Type: event.StateTopic},
		msg("$now", "@alice:x", "still Friday?"),
		msg("$later", "@alice:x", "after the current one"),
	}
	got, unreadable := threadMessages(events, "@helper:x", "$now")
	want := []agents.Message{
		{Role: agents.RoleUser, Content: "what is the plan?"},
		{Role: agents.RoleAssistant, Content: "ship on Friday"},
	}
	if unreadable != 1 || len(got) != len(want) {
		t.Fatalf("threadMessages = %+v, %d unreadable; want %+v, 1", got, unreadable, want)
	}
	for i := range want {
		if got[i].Role != want[i].Role || got[i].Content != want[i].Content {
			t.Errorf("message %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
