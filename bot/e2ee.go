package bot

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/hookroom/hookroom/agents"
	"github.com/hookroom/hookroom/config"
	"github.com/hookroom/hookroom/hooks"
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
	return e2eeReport(statuses, recovery, b.mx.Undecryptable(time.Now().Add(-time.Hour))) + b.e2eeExtras(ctx, w) // verify.go
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

// threadSeedLimit is how many of a thread's newest events seedThreadHistory
// reads back from the room.
const threadSeedLimit = 50

// unreadableThreadNotice is what the room is told when a thread's earlier
// messages cannot be read back (docs/operations.md, "Key backup and
// recovery").
const unreadableThreadNotice = "I can't read the earlier messages of this thread: their encryption keys were lost with my database " +
	"and no key backup restored them. I'll answer from this message alone."

// seedThreadHistory gives agent the earlier messages of the thread rooted
// at root in room when hookroom holds no history of that conversation
// (its database was lost, or the thread began without the agent): it reads
// the thread back from the room (decrypting with the keys the key backup
// restored) and stores its messages before current as the conversation's
// history. Call it before a turn in a thread whose root is not current.
// It returns how many of those messages it could not decrypt; the caller
// then tells the room once (unreadableThreadNotice).
func (b *Bot) seedThreadHistory(ctx context.Context, w *world, agent hooks.AgentName, room id.RoomID, root, current id.EventID) (unreadable int, err error) {
	if root == "" || root == current {
		return 0, nil
	}
	scope := agents.NewScopeKey(room, root)
	if _, err := b.history.Session(ctx, scope); err == nil {
		return 0, nil
	} else if !errors.Is(err, agents.ErrNoSession) {
		return 0, err
	}
	acct := w.agents[agent]
	if acct == nil {
		return 0, fmt.Errorf("failed to read the thread back: agent %s has no account", agent)
	}
	events, err := acct.ThreadEvents(ctx, room, root, threadSeedLimit)
	if err != nil {
		return 0, err
	}
	msgs, unreadable := threadMessages(events, acct.UserID(), current)
	if len(msgs) == 0 {
		return unreadable, nil
	}
	if _, err := b.history.Append(ctx, scope, agent, msgs...); err != nil {
		return unreadable, err
	}
	zerolog.Ctx(ctx).Info().Int("messages", len(msgs)).Int("unreadable", unreadable).
		Msg("read a thread's earlier messages back from the room")
	return unreadable, nil
}

// readThreadBack runs before agent's turn for ev (in the turn's queue, so
// it is ordered with the thread's turns): when hookroom holds no history
// of ev's thread, it reads the thread's earlier messages back from the room
// (seedThreadHistory) and, when some cannot be decrypted, tells the room
// once with unreadableThreadNotice in the thread. Failures are logged; the
// turn goes on with what there is.
func (b *Bot) readThreadBack(ctx context.Context, w *world, ev *event.Event, env hooks.Envelope, agent hooks.AgentName) {
	root := env.ResolvedThreadID
	unreadable, err := b.seedThreadHistory(ctx, w, agent, env.RoomID, root, ev.ID)
	log := zerolog.Ctx(ctx)
	if err != nil {
		log.Warn().Err(err).Msg("failed to read the thread's earlier messages back from the room; answering without them")
		return
	}
	if unreadable == 0 {
		return
	}
	log.Warn().Int("unreadable", unreadable).Msg("cannot decrypt the thread's earlier messages; telling the room")
	opts := matrixio.SendOptions{TxnKey: matrixio.TxnKey(ev.ID, "unreadable-thread"), Notice: true, PlainText: true, ThreadRoot: root, ReplyTo: ev.ID}
	if _, err := w.agents[agent].SendText(ctx, env.RoomID, unreadableThreadNotice, opts); err != nil {
		log.Warn().Err(err).Msg("failed to tell the room that the thread's earlier messages cannot be read")
	}
}

// threadMessages turns a thread read back from the room into history: the
// agent's own messages as the assistant's, everyone else's as the user's,
// up to (not including) current; events still encrypted are counted.
func threadMessages(events []*event.Event, self id.UserID, current id.EventID) (msgs []agents.Message, unreadable int) {
	for _, ev := range events {
		if ev.ID == current {
			break
		}
		switch ev.Type {
		case event.EventEncrypted:
			unreadable++
		case event.EventMessage:
			body := ev.Content.AsMessage().Body
			if body == "" {
				continue
			}
			if ev.Sender == self {
				msgs = append(msgs, agents.Message{Role: agents.RoleAssistant, Content: body})
			} else {
				msgs = append(msgs, agents.Message{Role: agents.RoleUser, Content: body})
			}
		}
	}
	return msgs, unreadable
}
