package bot

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"

	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/matrixio"
)

const e2eeHelp = "`!e2ee` shows each account's encryption: its device, whether it is cross-signed, its key backup, and how many messages no account could decrypt in the last hour (administrators)."

// e2eeStatusTimeout bounds the homeserver requests of one !e2ee.
const e2eeStatusTimeout = 20 * time.Second

// matrixEncryption maps matrix.encryption onto matrixio's options.
func matrixEncryption(enc config.Encryption) matrixio.Encryption {
	return matrixio.Encryption{
		ShareKeysWith: matrixio.DeviceTrust(enc.ShareKeysWith),
		KeyWait:       enc.DecryptGrace(),
		RecoveryKey:   enc.RecoveryKey.Reveal(),
		RestoreOnly:   !enc.BackupUpload(),
	}
}

// e2eeCommand answers !e2ee (global users only): per account its device,
// whether the device is cross-signed and the state of its key backup, then
// the messages no account could decrypt in the last hour. It asks the
// homeserver for each backup's key count.
func (b *Bot) e2eeCommand(ctx context.Context, w *world, ev *event.Event, admin bool) string {
	if !admin {
		return "Only hookroom's administrators (authorization.global_users) may see the encryption state. " + e2eeHelp
	}
	ctx, cancel := context.WithTimeout(ctx, e2eeStatusTimeout)
	defer cancel()
	var statuses []matrixio.EncryptionStatus
	for _, acct := range b.mx.Accounts() {
		st, err := acct.EncryptionStatus(ctx)
		if err != nil {
			zerolog.Ctx(ctx).Warn().Err(err).Stringer("user_id", acct.UserID()).Msg("failed to read an account's encryption state for !e2ee")
			st.Backup.Error = "failed to read the encryption state"
		}
		statuses = append(statuses, st)
	}
	recovery := w.cfg.Matrix.Encryption.RecoveryKey != ""
	return e2eeReport(statuses, recovery, b.mx.Undecryptable(time.Now().Add(-time.Hour)))
}

// e2eeReport renders !e2ee's answer.
func e2eeReport(statuses []matrixio.EncryptionStatus, recovery bool, undecryptable int) string {
	var s strings.Builder
	s.WriteString("**Encryption**\n\n")
	for _, st := range statuses {
		signed := "not cross-signed"
		if st.CrossSigned {
			signed = "cross-signed"
		}
		fmt.Fprintf(&s, "- %s — device `%s`, %s, %s\n", st.UserID, st.DeviceID, signed, backupLine(st.Backup, recovery))
	}
	fmt.Fprintf(&s, "\nMessages no account could decrypt in the last hour: %d", undecryptable)
	if !recovery {
		s.WriteString("\n\nWithout a key backup, a lost database loses the keys of every earlier message: set matrix.encryption.recovery_key (`hookroom e2ee recovery-key`).")
	}
	return s.String()
}

// backupLine describes one account's key backup.
func backupLine(b matrixio.BackupStatus, recovery bool) string {
	switch {
	case b.Enabled:
		keys := "key count unknown"
		if b.Keys >= 0 {
			keys = fmt.Sprintf("%d keys", b.Keys)
		}
		line := fmt.Sprintf("key backup %s: %s, %d not backed up yet", b.Version, keys, b.Pending)
		if b.Restored > 0 {
			line += fmt.Sprintf(", %d restored at start", b.Restored)
		}
		if b.Error != "" {
			line += " (last upload failed: " + b.Error + ")"
		}
		return line
	case !recovery:
		return "no key backup (no recovery key)"
	case b.Error != "":
		return "key backup off: " + b.Error
	}
	return "key backup off"
}
