package matrixio

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/backup"
	"maunium.net/go/mautrix/crypto/ssss"
	"maunium.net/go/mautrix/crypto/utils"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Server-side key backup, as Element does it: every account keeps its own
// secret storage (SSSS, in its account data), encrypted with the recovery
// key of Config.Encryption.RecoveryKey, which is the same for every
// account; the secret storage holds the account's megolm backup key; the
// backup (/room_keys) holds every room key the account's device has,
// encrypted with that backup key. A fresh database (or a new device) with
// the same recovery key reads the backup key from the secret storage and
// restores the room keys before the account syncs, so messages sent before
// the loss can be decrypted again. Logging in to an agent's account in
// Element and entering the recovery key gives the same access.

// ErrRecoveryKeyMismatch is wrapped by errors about an account whose secret
// storage is encrypted with another recovery key than the configured one.
var ErrRecoveryKeyMismatch = errors.New("the account's secret storage uses another recovery key")

// NewRecoveryKey returns a new random recovery key in Element's format
// (groups of four base58 characters), for Config.Encryption.RecoveryKey.
func NewRecoveryKey() (string, error) {
	key, err := ssss.NewKey("")
	if err != nil {
		return "", fmt.Errorf("failed to generate a recovery key: %w", err)
	}
	return key.RecoveryKey(), nil
}

// ValidRecoveryKey reports whether s is a well-formed recovery key (its
// prefix and parity byte check out; spaces are ignored).
func ValidRecoveryKey(s string) bool {
	return utils.DecodeBase58RecoveryKey(s) != nil
}

// backupUploadBatch is how many room keys one backup request carries.
const backupUploadBatch = 100

// backupCheckInterval is how often an idle sync loop looks for room keys
// that are not backed up yet.
const backupCheckInterval = time.Minute

// keyBackup is one account's key backup: the backup key and version it
// uploads to, and what it did last, for EncryptionStatus.
type keyBackup struct {
	mach    *crypto.OlmMachine
	store   *crypto.SQLCryptoStore
	key     *backup.MegolmBackupKey
	version id.KeyBackupVersion
	upload  bool // false: restore only

	mu        sync.Mutex // serialises uploads; guards the fields below
	lastCheck time.Time
	restored  int
	uploaded  int
	lastErr   error
}

// BackupStatus is an account's key backup as EncryptionStatus reports it.
type BackupStatus struct {
	// Enabled is false when no recovery key is configured or the backup
	// could not be set up (Error says why).
	Enabled bool
	// Version is the backup version the account uses.
	Version id.KeyBackupVersion
	// Keys is the number of room keys the homeserver holds in it (-1 when
	// the homeserver could not be asked).
	Keys int
	// Pending is the number of the device's room keys not backed up yet.
	Pending int
	// Restored is the number of room keys restored from the backup at
	// start-up; Uploaded the number backed up since.
	Restored, Uploaded int
	// Error is the last failure of setting up or uploading, "" if none.
	Error string
}

// EncryptionStatus is an account's end-to-end encryption state, for
// diagnostics (!e2ee).
type EncryptionStatus struct {
	UserID   id.UserID
	DeviceID id.DeviceID
	// CrossSigned reports whether the device is signed with the account's
	// self-signing key (clients then show it as verified by its owner).
	CrossSigned bool
	Backup      BackupStatus
}

// setupBackup sets up the key backup of cli's account when a recovery key
// is configured: it opens (or creates) the account's secret storage with
// the recovery key, reads (or creates) the backup key in it, finds (or
// creates) the backup version of that key, restores the room keys of the
// backup the device has not restored yet, and uploads the device's room
// keys that are not in it. Called by initCrypto before the account syncs;
// an error leaves encryption working without a backup.
func (m *Manager) setupBackup(ctx context.Context, mach *crypto.OlmMachine, cli *mautrix.Client, store *crypto.SQLCryptoStore) (*keyBackup, error) {
	enc := m.cfg.Encryption
	log := zerolog.Ctx(ctx)
	var sskey *ssss.Key
	err := m.retry.do(ctx, "open secret storage", retryTransient, func(ctx context.Context) (err error) {
		sskey, err = secretStorageKey(ctx, mach, enc.RecoveryKey, !enc.RestoreOnly)
		return err
	})
	if err != nil {
		return nil, err
	}
	kb := &keyBackup{mach: mach, store: store, upload: !enc.RestoreOnly}
	if kb.upload {
		err := m.retry.do(ctx, "store cross-signing keys", retryTransient, func(ctx context.Context) error {
			return storeCrossSigningInSSSS(ctx, mach, sskey)
		})
		if err != nil {
			log.Warn().Err(err).Msg("Failed to store the cross-signing keys in secret storage; after a lost database the account publishes new ones")
		}
	}
	var info *mautrix.RespRoomKeysVersion[backup.MegolmAuthData]
	err = m.retry.do(ctx, "read key backup", retryTransient, func(ctx context.Context) (err error) {
		kb.key, err = backupKeyFromSSSS(ctx, mach, sskey)
		if err != nil {
			return err
		}
		info, err = cli.GetKeyBackupLatestVersion(ctx)
		if errors.Is(err, mautrix.MNotFound) {
			info, err = nil, nil
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	switch {
	case kb.key != nil && info != nil && info.Algorithm == id.KeyBackupAlgorithmMegolmBackupV1 && info.AuthData.PublicKey == backupPublicKey(kb.key):
		kb.version = info.Version
	case !kb.upload:
		if kb.key == nil {
			return nil, errors.New("the account's secret storage holds no backup key and backing up is off")
		}
		return nil, errors.New("the account's latest key backup is not the one whose key is in its secret storage, and backing up is off")
	default:
		if kb.key != nil && info != nil {
			log.Warn().Stringer("key_backup_version", info.Version).
				Msg("The account's latest key backup is not the one whose key is in its secret storage; starting a new backup")
		}
		if kb.key == nil {
			if kb.key, err = backup.NewMegolmBackupKey(); err != nil {
				return nil, fmt.Errorf("failed to generate a backup key: %w", err)
			}
			err = m.retry.do(ctx, "store backup key", retryTransient, func(ctx context.Context) error {
				return mach.SSSS.SetEncryptedAccountData(ctx, event.AccountDataMegolmBackupKey, kb.key.Bytes(), sskey)
			})
			if err != nil {
				return nil, fmt.Errorf("failed to store the backup key in secret storage: %w", err)
			}
		}
		auth, err := signedBackupAuth(mach, cli, kb.key)
		if err != nil {
			return nil, err
		}
		var created *mautrix.RespRoomKeysVersionCreate
		err = m.retry.do(ctx, "create key backup", retryTransient, func(ctx context.Context) (err error) {
			created, err = cli.CreateKeyBackupVersion(ctx, &mautrix.ReqRoomKeysVersionCreate[backup.MegolmAuthData]{
				Algorithm: id.KeyBackupAlgorithmMegolmBackupV1,
				AuthData:  auth,
			})
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("failed to create a key backup: %w", err)
		}
		kb.version = created.Version
		log.Info().Stringer("key_backup_version", kb.version).Msg("Created a key backup for the account's room keys")
	}
	if mach.KeyBackupVersion() != kb.version {
		err = m.retry.do(ctx, "restore key backup", retryTransient, func(ctx context.Context) (err error) {
			kb.restored, err = kb.restore(ctx, cli)
			return err
		})
		if err != nil {
			return nil, err
		}
		if err := mach.SetKeyBackupVersion(ctx, kb.version); err != nil {
			return nil, fmt.Errorf("failed to record the key backup version: %w", err)
		}
		if kb.restored > 0 {
			log.Info().Int("keys", kb.restored).Stringer("key_backup_version", kb.version).Msg("Restored room keys from the key backup")
		}
	}
	if kb.upload {
		err = m.retry.do(ctx, "back up room keys", retryTransient, func(ctx context.Context) error {
			_, err := kb.uploadPending(ctx, cli)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return kb, nil
}

// secretStorageKey returns the account's default secret storage key, which
// must be recoveryKey; when the account has no secret storage and create is
// set, it creates one with recoveryKey as its key.
func secretStorageKey(ctx context.Context, mach *crypto.OlmMachine, recoveryKey string, create bool) (*ssss.Key, error) {
	keyID, meta, err := mach.SSSS.GetDefaultKeyData(ctx)
	switch {
	case err == nil:
		key, err := meta.VerifyRecoveryKey(keyID, recoveryKey)
		if errors.Is(err, ssss.ErrIncorrectSSSSKey) || errors.Is(err, ssss.ErrInvalidRecoveryKey) {
			return nil, ErrRecoveryKeyMismatch
		} else if err != nil {
			return nil, fmt.Errorf("failed to check the recovery key against the secret storage: %w", err)
		}
		return key, nil
	case errors.Is(err, ssss.ErrNoDefaultKeyAccountDataEvent), errors.Is(err, mautrix.MNotFound):
	default:
		return nil, fmt.Errorf("failed to read the secret storage: %w", err)
	}
	if !create {
		return nil, errors.New("the account has no secret storage and backing up is off")
	}
	raw := utils.DecodeBase58RecoveryKey(recoveryKey)
	if raw == nil {
		return nil, errors.New("the recovery key is malformed")
	}
	key, err := ssss.WrapKey(raw, nil)
	if err != nil {
		return nil, fmt.Errorf("failed to set up secret storage: %w", err)
	}
	if err := mach.SSSS.SetKeyData(ctx, key.ID, key.Metadata); err != nil {
		return nil, fmt.Errorf("failed to store the secret storage key: %w", err)
	}
	if err := mach.SSSS.SetDefaultKeyID(ctx, key.ID); err != nil {
		return nil, fmt.Errorf("failed to make the secret storage key the default: %w", err)
	}
	zerolog.Ctx(ctx).Info().Msg("Created the account's secret storage with the recovery key")
	return key, nil
}

// backupKeyFromSSSS returns the megolm backup key in the account's secret
// storage, or nil if there is none.
func backupKeyFromSSSS(ctx context.Context, mach *crypto.OlmMachine, key *ssss.Key) (*backup.MegolmBackupKey, error) {
	raw, err := mach.SSSS.GetDecryptedAccountData(ctx, event.AccountDataMegolmBackupKey, key)
	if errors.Is(err, mautrix.MNotFound) || errors.Is(err, ssss.ErrNotEncryptedForKey) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("failed to read the backup key from secret storage: %w", err)
	}
	bk, err := backup.MegolmBackupKeyFromBytes(raw)
	if err != nil {
		return nil, fmt.Errorf("failed to read the backup key from secret storage: %w", err)
	}
	return bk, nil
}

// backupPublicKey is the public key of key as a backup's auth_data names it.
func backupPublicKey(key *backup.MegolmBackupKey) id.Ed25519 {
	return id.Ed25519(base64.RawStdEncoding.EncodeToString(key.PublicKey().Bytes()))
}

// signedBackupAuth returns the auth_data of a new backup of key, signed by
// the device and, when hookroom holds it, the account's master key, so
// clients (Element) trust the backup.
func signedBackupAuth(mach *crypto.OlmMachine, cli *mautrix.Client, key *backup.MegolmBackupKey) (backup.MegolmAuthData, error) {
	auth := backup.MegolmAuthData{PublicKey: backupPublicKey(key)}
	sig, err := mach.GetAccount().SignJSON(auth)
	if err != nil {
		return auth, fmt.Errorf("failed to sign the key backup: %w", err)
	}
	auth.Signatures = map[id.UserID]map[id.KeyID]string{
		cli.UserID: {id.NewKeyID(id.KeyAlgorithmEd25519, cli.DeviceID.String()): sig},
	}
	if xs := mach.CrossSigningKeys; xs != nil && xs.MasterKey != nil {
		master, err := xs.MasterKey.SignJSON(backup.MegolmAuthData{PublicKey: auth.PublicKey})
		if err != nil {
			return auth, fmt.Errorf("failed to sign the key backup with the master key: %w", err)
		}
		auth.Signatures[cli.UserID][id.NewKeyID(id.KeyAlgorithmEd25519, xs.MasterKey.PublicKey().String())] = master
	}
	return auth, nil
}

// restore imports the room keys of the backup the device does not have,
// and returns how many it imported. Keys that do not decrypt are skipped
// with a warning.
func (kb *keyBackup) restore(ctx context.Context, cli *mautrix.Client) (int, error) {
	keys, err := cli.GetKeyBackup(ctx, kb.version)
	if err != nil {
		return 0, fmt.Errorf("failed to download the key backup: %w", err)
	}
	log := zerolog.Ctx(ctx)
	imported := 0
	for room, rk := range keys.Rooms {
		for session, data := range rk.Sessions {
			if have, err := kb.store.GetGroupSession(ctx, room, session); err == nil && have != nil &&
				have.Internal.FirstKnownIndex() <= uint32(data.FirstMessageIndex) {
				continue
			}
			plain, err := data.SessionData.Decrypt(kb.key)
			if err != nil {
				log.Warn().Err(err).Stringer("room_id", room).Stringer("session_id", session).Msg("Skipped a room key of the key backup that does not decrypt")
				continue
			}
			if _, err := kb.mach.ImportRoomKeyFromBackup(ctx, kb.version, room, session, plain); err != nil {
				log.Warn().Err(err).Stringer("room_id", room).Stringer("session_id", session).Msg("Skipped a room key of the key backup that cannot be imported")
				continue
			}
			imported++
		}
	}
	return imported, nil
}

// uploadPending backs up the device's room keys that are not in the
// backup yet and returns how many it uploaded.
func (kb *keyBackup) uploadPending(ctx context.Context, cli *mautrix.Client) (int, error) {
	kb.mu.Lock()
	defer kb.mu.Unlock()
	kb.lastCheck = time.Now()
	n, err := kb.uploadLocked(ctx, cli)
	kb.uploaded += n
	kb.lastErr = err
	return n, err
}

func (kb *keyBackup) uploadLocked(ctx context.Context, cli *mautrix.Client) (int, error) {
	sessions, err := kb.store.GetGroupSessionsWithoutKeyBackupVersion(ctx, kb.version).AsList()
	if err != nil {
		return 0, fmt.Errorf("failed to list room keys to back up: %w", err)
	}
	total := 0
	for len(sessions) > 0 {
		batch := sessions[:min(len(sessions), backupUploadBatch)]
		sessions = sessions[len(batch):]
		req := &mautrix.ReqKeyBackup{Rooms: map[id.RoomID]mautrix.ReqRoomKeyBackup{}}
		for _, s := range batch {
			data, err := backupData(kb.key, s)
			if err != nil {
				return total, err
			}
			rk, ok := req.Rooms[s.RoomID]
			if !ok {
				rk = mautrix.ReqRoomKeyBackup{Sessions: map[id.SessionID]mautrix.ReqKeyBackupData{}}
				req.Rooms[s.RoomID] = rk
			}
			rk.Sessions[s.ID()] = data
		}
		if _, err := cli.PutKeysInBackup(ctx, kb.version, req); err != nil {
			return total, fmt.Errorf("failed to upload room keys to the key backup: %w", err)
		}
		for _, s := range batch {
			if err := kb.store.SetGroupSessionKeyBackupVersion(ctx, s.ID(), kb.version); err != nil {
				return total, fmt.Errorf("failed to mark a room key as backed up: %w", err)
			}
		}
		total += len(batch)
	}
	if total > 0 {
		zerolog.Ctx(ctx).Debug().Int("keys", total).Stringer("key_backup_version", kb.version).Msg("Backed up room keys")
	}
	return total, nil
}

// backupData is one room key as the backup stores it.
func backupData(key *backup.MegolmBackupKey, s *crypto.InboundGroupSession) (mautrix.ReqKeyBackupData, error) {
	first := s.Internal.FirstKnownIndex()
	exported, err := s.Internal.Export(first)
	if err != nil {
		return mautrix.ReqKeyBackupData{}, fmt.Errorf("failed to export a room key for the backup: %w", err)
	}
	chain := s.ForwardingChains
	if chain == nil {
		chain = []string{}
	}
	enc, err := backup.EncryptSessionData(key, backup.MegolmSessionData{
		Algorithm:          id.AlgorithmMegolmV1,
		ForwardingKeyChain: chain,
		SenderClaimedKeys:  backup.SenderClaimedKeys{Ed25519: s.SigningKey},
		SenderKey:          s.SenderKey,
		SessionKey:         string(exported),
		SharedHistory:      s.SharedHistory,
	})
	if err != nil {
		return mautrix.ReqKeyBackupData{}, fmt.Errorf("failed to encrypt a room key for the backup: %w", err)
	}
	raw, err := json.Marshal(enc)
	if err != nil {
		return mautrix.ReqKeyBackupData{}, fmt.Errorf("failed to encode a room key for the backup: %w", err)
	}
	return mautrix.ReqKeyBackupData{
		FirstMessageIndex: int(first),
		ForwardedCount:    len(s.ForwardingChains),
		SessionData:       raw,
	}, nil
}

// maybeBackUp uploads new room keys after a sync response that may have
// brought some (to-device messages: keys sent to the device; timeline
// events: the account's own messages, whose keys it made itself), or once
// in a while. Called by processCrypto; failures are logged and retried on
// a later sync.
func (kb *keyBackup) maybeBackUp(ctx context.Context, cli *mautrix.Client, resp *mautrix.RespSync) {
	if kb == nil || !kb.upload {
		return
	}
	busy := len(resp.ToDevice.Events) > 0
	for _, room := range resp.Rooms.Join {
		busy = busy || len(room.Timeline.Events) > 0
	}
	kb.mu.Lock()
	due := time.Since(kb.lastCheck) >= backupCheckInterval
	kb.mu.Unlock()
	if !busy && !due {
		return
	}
	if _, err := kb.uploadPending(ctx, cli); err != nil && ctx.Err() == nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("Failed to back up room keys; trying again after the next sync")
	}
}

// backupFor returns the key backup of user, or nil.
func (m *Manager) backupFor(user id.UserID) *keyBackup {
	if m.shared == nil {
		return nil
	}
	m.shared.mu.Lock()
	defer m.shared.mu.Unlock()
	return m.shared.backups[user]
}

// setBackup records user's key backup (nil: none) and why it failed.
func (m *Manager) setBackup(user id.UserID, kb *keyBackup, err error) {
	m.shared.mu.Lock()
	defer m.shared.mu.Unlock()
	if m.shared.backups == nil {
		m.shared.backups = map[id.UserID]*keyBackup{}
		m.shared.backupErrs = map[id.UserID]error{}
	}
	m.shared.backups[user] = kb
	m.shared.backupErrs[user] = err
}

// BackUpRoomKeys uploads the account's room keys that are not in its key
// backup yet, now, and returns how many it uploaded. It does nothing (0,
// nil) without a backup. The sync loop does this by itself after every
// response that may have brought keys; call it before a planned stop.
func (a *Account) BackUpRoomKeys(ctx context.Context) (int, error) {
	kb := a.m.backupFor(a.userID)
	if kb == nil || !kb.upload {
		return 0, nil
	}
	return kb.uploadPending(ctx, a.cli())
}

// EncryptionStatus reports the account's device, whether it is
// cross-signed and the state of its key backup, asking the homeserver for
// the backup's key count.
func (a *Account) EncryptionStatus(ctx context.Context) (EncryptionStatus, error) {
	cli := a.cli()
	st := EncryptionStatus{UserID: a.userID, DeviceID: cli.DeviceID, Backup: BackupStatus{Keys: -1}}
	rec, err := a.m.store.loadCrossSigning(ctx, a.userID)
	if err != nil {
		return st, err
	}
	st.CrossSigned = rec != nil && rec.SignedDevice == cli.DeviceID
	kb := a.m.backupFor(a.userID)
	if kb == nil {
		if a.m.shared != nil {
			a.m.shared.mu.Lock()
			if err := a.m.shared.backupErrs[a.userID]; err != nil {
				st.Backup.Error = err.Error()
			}
			a.m.shared.mu.Unlock()
		}
		return st, nil
	}
	kb.mu.Lock()
	st.Backup.Enabled = true
	st.Backup.Version = kb.version
	st.Backup.Restored, st.Backup.Uploaded = kb.restored, kb.uploaded
	if kb.lastErr != nil {
		st.Backup.Error = kb.lastErr.Error()
	}
	kb.mu.Unlock()
	pending, err := kb.store.GetGroupSessionsWithoutKeyBackupVersion(ctx, kb.version).AsList()
	if err != nil {
		return st, fmt.Errorf("failed to count room keys to back up: %w", err)
	}
	st.Backup.Pending = len(pending)
	if info, err := cli.GetKeyBackupVersion(ctx, kb.version); err == nil {
		st.Backup.Keys = info.Count
	} else if st.Backup.Error == "" {
		st.Backup.Error = strings.TrimSpace(fmt.Sprintf("failed to read the key backup: %v", err))
	}
	return st, nil
}

// crossSigningFromSSSS returns the account's cross-signing keys from its
// secret storage when they are there, the recovery key opens it and they
// are the keys the homeserver publishes for the account; the account then
// keeps its identity after a lost database (people's clients see no
// change). Failures only mean new keys are made; they are logged at debug.
func (m *Manager) crossSigningFromSSSS(ctx context.Context, mach *crypto.OlmMachine, cli *mautrix.Client) (crypto.CrossSigningSeeds, bool) {
	log := zerolog.Ctx(ctx)
	var seeds crypto.CrossSigningSeeds
	var published id.Ed25519
	err := m.retry.do(ctx, "read cross-signing keys from secret storage", retryTransient, func(ctx context.Context) error {
		key, err := secretStorageKey(ctx, mach, m.cfg.Encryption.RecoveryKey, false)
		if err != nil {
			return err
		}
		if err := mach.FetchCrossSigningKeysFromSSSS(ctx, key); err != nil {
			return err
		}
		resp, err := cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: map[id.UserID]mautrix.DeviceIDList{cli.UserID: {}}})
		if err != nil {
			return err
		}
		if mk, ok := resp.MasterKeys[cli.UserID]; ok {
			published = mk.FirstKey()
		}
		return nil
	})
	if err == nil && mach.CrossSigningKeys != nil {
		seeds = mach.CrossSigningKeys.Seeds()
		if published != "" && mach.CrossSigningKeys.MasterKey.PublicKey() == published {
			return seeds, true
		}
		err = errors.New("the master key in secret storage is not the published one")
	}
	mach.CrossSigningKeys = nil
	log.Debug().Err(err).Msg("No usable cross-signing keys in secret storage")
	return seeds, false
}

// storeCrossSigningInSSSS puts the account's cross-signing keys into its
// secret storage when they are not there yet, so a fresh database (or
// Element with the recovery key) can use them.
func storeCrossSigningInSSSS(ctx context.Context, mach *crypto.OlmMachine, key *ssss.Key) error {
	xs := mach.CrossSigningKeys
	if xs == nil {
		return nil
	}
	stored, err := mach.SSSS.GetDecryptedAccountData(ctx, event.AccountDataCrossSigningMaster, key)
	if err == nil && string(stored) == string(xs.MasterKey.Seed()) {
		return nil
	}
	if err := mach.UploadCrossSigningKeysToSSSS(ctx, key, xs); err != nil {
		return fmt.Errorf("failed to store the cross-signing keys in secret storage: %w", err)
	}
	zerolog.Ctx(ctx).Info().Msg("Stored the cross-signing keys in secret storage")
	return nil
}
