package matrixio

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/crypto/cryptohelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/sqlstatestore"
)

// DeviceTrust says which devices of the people in an encrypted room receive
// the keys to read hookroom's messages.
type DeviceTrust string

const (
	// DevicesAll shares keys with every device of every joined member, as
	// Element does. The default.
	DevicesAll DeviceTrust = "all"
	// DevicesCrossSigned shares keys only with devices their owner signed
	// with their cross-signing key (verified by the owner, or trusted on
	// first use of the owner's identity). Unsigned devices see "unable to
	// decrypt" for hookroom's messages.
	DevicesCrossSigned DeviceTrust = "cross_signed"
)

func (t DeviceTrust) minTrust() id.TrustState {
	if t == DevicesCrossSigned {
		return id.TrustStateCrossSignedTOFU
	}
	return id.TrustStateUnset
}

// Encryption configures end-to-end encryption. Every account has its own
// device with its own keys; they live in the shared database (mautrix's
// crypto and state tables next to matrixio's own). The zero value is the
// default.
type Encryption struct {
	// ShareKeysWith picks the devices that receive room keys. Default
	// DevicesAll.
	ShareKeysWith DeviceTrust
	// KeyWait is how long Manager.Decrypt waits for the keys of a message
	// that arrived before them (keys are requested from the sender after a
	// few seconds). Default 30s.
	KeyWait time.Duration
	// RecoveryKey is the recovery key (Element's format, as NewRecoveryKey
	// makes) of every account's secret storage. When set, each account
	// backs up its room keys on the homeserver and a fresh database
	// restores them from there (see setupBackup). "" turns key backup off.
	RecoveryKey string
	// RestoreOnly, with RecoveryKey, restores room keys from an existing
	// backup but uploads none and creates no backup or secret storage.
	RestoreOnly bool
}

const (
	defaultKeyWait = 30 * time.Second
	// keyRequestAfter is how long Decrypt waits for late keys before it
	// asks the sender's devices for them.
	keyRequestAfter = 3 * time.Second
)

// ErrUndecryptable is wrapped by Manager.Decrypt when no account can
// decrypt an event: its keys never arrived, or it is malformed.
var ErrUndecryptable = errors.New("message cannot be decrypted")

// cryptoShared is what every account's crypto uses alike: the room state
// store (which rooms are encrypted, who is in them) and the pickle key that
// encrypts the stored olm/megolm secrets.
type cryptoShared struct {
	state     *sqlstatestore.SQLStateStore
	pickleKey []byte

	mu         sync.Mutex // guards the fields below
	backups    map[id.UserID]*keyBackup
	backupErrs map[id.UserID]error // why an account has no backup
	failed     []time.Time         // when Decrypt gave up on a message, oldest first
}

// cryptoSetup returns the shared crypto pieces, creating their tables and the
// pickle key on first use. Called by EnsureAccount (under ensureMu).
func (m *Manager) cryptoSetup(ctx context.Context) (*cryptoShared, error) {
	if m.shared != nil {
		return m.shared, nil
	}
	log := zerolog.Ctx(ctx).With().Str("component", "crypto").Logger()
	state := sqlstatestore.NewSQLStateStore(m.store.root, dbutil.ZeroLogger(log.With().Str("db_section", "matrix_state").Logger()), false)
	if err := state.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("failed to upgrade the room state store: %w", err)
	}
	key, err := m.store.pickleKey(ctx)
	if err != nil {
		return nil, err
	}
	// The crypto tables are shared too; upgrading them once is enough.
	probe := crypto.NewSQLCryptoStore(m.store.root, dbutil.ZeroLogger(log), "", "", key)
	if err := probe.DB.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("failed to upgrade the crypto store: %w", err)
	}
	m.shared = &cryptoShared{state: state, pickleKey: key}
	return m.shared, nil
}

// cryptoAccountID keys an account's secrets in the crypto store. The device
// is part of it: a new device (after a lost token) starts with fresh keys
// instead of colliding with the old device's identity.
func cryptoAccountID(user id.UserID, device id.DeviceID) string {
	return string(user) + "/" + string(device)
}

// initCrypto gives cli (logged in) its olm machine: it loads or creates the
// device's identity and one-time keys, uploads them if the homeserver does
// not have them yet, and bootstraps cross-signing so the owner vouches for
// the device. password is the account's password ("" if unknown), needed
// once to publish cross-signing keys.
func (m *Manager) initCrypto(ctx context.Context, cli *mautrix.Client, password string) (*cryptohelper.CryptoHelper, error) {
	shared, err := m.cryptoSetup(ctx)
	if err != nil {
		return nil, err
	}
	log := zerolog.Ctx(ctx).With().Str("component", "crypto").Logger()
	cli.StateStore = shared.state
	store := crypto.NewSQLCryptoStore(m.store.root, dbutil.ZeroLogger(log), cryptoAccountID(cli.UserID, cli.DeviceID), cli.DeviceID, shared.pickleKey)
	if err := m.checkDeviceKeys(ctx, cli, store); err != nil {
		return nil, err
	}
	helper, err := cryptohelper.NewCryptoHelper(cli, shared.pickleKey, store)
	if err != nil {
		return nil, fmt.Errorf("failed to set up encryption for %s: %w", cli.UserID, err)
	}
	err = m.retry.do(ctx, "initialise encryption", retryTransient, func(ctx context.Context) error {
		return helper.Init(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("failed to set up encryption for %s: %w", cli.UserID, err)
	}
	cli.Crypto = helper // SendMessageEvent encrypts through it
	mach := helper.Machine()
	mach.SendKeysMinTrust = m.cfg.Encryption.ShareKeysWith.minTrust()
	if err := m.ensureCrossSigning(ctx, mach, cli, password); errors.Is(err, errNoPassword) {
		// An account configured by access token alone: expected.
		log.Info().Msg("Cross-signing is not set up: no password is configured for the account; the device works but clients show it as not verified by its owner")
	} else if err != nil {
		// Encryption works without it; clients only show the device as
		// not verified by its owner.
		log.Warn().Err(err).Msg("Failed to set up cross-signing; the device works but is not signed by its owner")
	}
	if m.cfg.Encryption.RecoveryKey != "" {
		kb, err := m.setupBackup(ctx, mach, cli, store)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			// Encryption works without it; a lost database then loses
			// the keys of earlier messages.
			log.Error().Err(err).Msg("Failed to set up the key backup; room keys are not backed up")
		}
		m.setBackup(cli.UserID, kb, err)
	}
	return helper, nil
}

// errDeviceReset is returned by initCrypto when the device's keys are gone
// from the homeserver although this database uploaded them: the device was
// deleted (logged out elsewhere) and a login recreated it under the same id.
// Clients refuse new keys for a device id they know, so the account needs a
// new device.
var errDeviceReset = errors.New("the device's encryption keys are gone from the homeserver")

// errDeviceKeysForeign is returned by initCrypto when the homeserver has
// encryption keys for cli's device but store holds no identity for it: the
// device was set up by another client (or by hookroom with a database that
// is gone). New keys for it would be refused.
var errDeviceKeysForeign = errors.New("the device has encryption keys this database does not hold")

// checkDeviceKeys returns errDeviceReset when store holds an identity that
// was uploaded for cli's device but the homeserver no longer has it, and
// errDeviceKeysForeign when store holds none but the homeserver has keys.
func (m *Manager) checkDeviceKeys(ctx context.Context, cli *mautrix.Client, store *crypto.SQLCryptoStore) error {
	acc, err := store.GetAccount(ctx)
	if err != nil {
		return fmt.Errorf("failed to load the encryption identity of %s: %w", cli.UserID, err)
	}
	if acc != nil && !acc.Shared {
		return nil
	}
	var resp *mautrix.RespQueryKeys
	err = m.retry.do(ctx, "query own device keys", retryTransient, func(ctx context.Context) (err error) {
		resp, err = cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{
			DeviceKeys: map[id.UserID]mautrix.DeviceIDList{cli.UserID: {cli.DeviceID}},
		})
		return err
	})
	if err != nil {
		return fmt.Errorf("failed to query the device keys of %s: %w", cli.UserID, err)
	}
	dev, ok := resp.DeviceKeys[cli.UserID][cli.DeviceID]
	hasKeys := ok && len(dev.Keys) > 0
	switch {
	case acc == nil && hasKeys:
		return errDeviceKeysForeign
	case acc != nil && !hasKeys:
		return errDeviceReset
	}
	return nil
}

// errNoPassword is returned by ensureCrossSigning when cross-signing keys
// would have to be published but no password is known for the account.
var errNoPassword = errors.New("no password is known for the account, which publishing cross-signing keys requires")

// ensureCrossSigning makes sure the account has cross-signing keys whose
// private parts hookroom holds, and that the current device is signed with
// them. The first run publishes new keys (user-interactive auth with the
// password; none for an application service's account); later runs only
// sign a new device.
func (m *Manager) ensureCrossSigning(ctx context.Context, mach *crypto.OlmMachine, cli *mautrix.Client, password string) error {
	rec, err := m.store.loadCrossSigning(ctx, cli.UserID)
	if err != nil {
		return err
	}
	if rec == nil && m.cfg.Encryption.RecoveryKey != "" {
		// A fresh database: the keys may be in the secret storage.
		if seeds, ok := m.crossSigningFromSSSS(ctx, mach, cli); ok {
			rec = &crossSigning{Seeds: seeds}
			if err := m.store.saveCrossSigning(ctx, cli.UserID, rec); err != nil {
				return err
			}
			zerolog.Ctx(ctx).Info().Msg("Restored the cross-signing keys from secret storage")
		}
	}
	if rec != nil {
		if err := mach.ImportCrossSigningKeys(rec.Seeds); err != nil {
			return fmt.Errorf("failed to load stored cross-signing keys: %w", err)
		}
	} else {
		auth := passwordAuth(cli.UserID, password)
		switch {
		case password != "":
		case m.cfg.Registration.AppServiceToken != "":
			// An application service's account has no password; a first
			// upload needs no user-interactive auth (Matrix 1.11), so the
			// homeserver's challenge, if any, is not answered.
			auth = func(*mautrix.RespUserInteractive) any { return nil }
		default:
			return errNoPassword
		}
		keys, err := mach.GenerateCrossSigningKeys()
		if err != nil {
			return fmt.Errorf("failed to generate cross-signing keys: %w", err)
		}
		rec = &crossSigning{Seeds: keys.Seeds()}
		// Stored first: a crash right after publishing still leaves the
		// private keys that match what the server has.
		if err := m.store.saveCrossSigning(ctx, cli.UserID, rec); err != nil {
			return err
		}
		err = m.retry.do(ctx, "publish cross-signing keys", retryTransient, func(ctx context.Context) error {
			return mach.PublishCrossSigningKeys(ctx, keys, auth)
		})
		if err != nil {
			_ = m.store.deleteCrossSigning(ctx, cli.UserID)
			return fmt.Errorf("failed to publish cross-signing keys: %w", err)
		}
		zerolog.Ctx(ctx).Info().Msg("Published cross-signing keys")
	}
	if rec.SignedDevice == cli.DeviceID {
		return nil
	}
	err = m.retry.do(ctx, "sign own device", retryTransient, func(ctx context.Context) error {
		return mach.SignOwnDevice(ctx, mach.OwnIdentity())
	})
	if err != nil {
		return fmt.Errorf("failed to sign the device with the self-signing key: %w", err)
	}
	rec.SignedDevice = cli.DeviceID
	if err := m.store.saveCrossSigning(ctx, cli.UserID, rec); err != nil {
		return err
	}
	zerolog.Ctx(ctx).Info().Stringer("device_id", cli.DeviceID).Msg("Signed the device with the account's cross-signing key")
	return nil
}

// passwordAuth answers a user-interactive auth challenge with the password.
func passwordAuth(user id.UserID, password string) mautrix.UIACallback {
	return func(uia *mautrix.RespUserInteractive) any {
		return &mautrix.ReqUIAuthLogin{
			BaseAuthData: mautrix.BaseAuthData{Type: mautrix.AuthTypePassword, Session: uia.Session},
			User:         user.String(),
			Password:     password,
		}
	}
}

// processCrypto feeds one sync response to the account's olm machine
// before its events are handed to the sink: room state into the state store
// (which rooms are encrypted, who is in them), to-device messages (room
// keys arrive here), device-list changes and one-time-key counts, then
// membership changes (which retire the outbound session of a room). Called
// by Run for every response.
func (a *Account) processCrypto(ctx context.Context, helper *cryptohelper.CryptoHelper, resp *mautrix.RespSync, since string) {
	state := a.cli().StateStore
	var members []*event.Event
	track := func(roomID id.RoomID, events []*event.Event, source event.Source) {
		for _, evt := range prepareEvents(roomID, events, source) {
			if evt.StateKey == nil {
				continue
			}
			mautrix.UpdateStateStore(ctx, state, evt)
			if evt.Type == event.StateMember {
				members = append(members, evt)
			}
		}
	}
	for roomID, room := range resp.Rooms.Join {
		track(roomID, room.State.Events, event.SourceJoin|event.SourceState)
		track(roomID, room.Timeline.Events, event.SourceJoin|event.SourceTimeline)
	}
	for roomID, room := range resp.Rooms.Leave {
		track(roomID, room.State.Events, event.SourceLeave|event.SourceState)
		track(roomID, room.Timeline.Events, event.SourceLeave|event.SourceTimeline)
	}
	for roomID, room := range resp.Rooms.Invite {
		track(roomID, room.State.Events, event.SourceInvite|event.SourceState)
	}
	mach := helper.Machine()
	mach.ProcessSyncResponse(ctx, resp, since)
	// People's device lists are stored once for all accounts (the crypto
	// tables share them), so only the account that fetched a change first
	// would notice a new device and stop using room keys the device lacks.
	// Every account retires its sessions with a changed user itself.
	for _, user := range resp.DeviceLists.Changed {
		mach.OnDevicesChanged(ctx, user)
	}
	for _, evt := range members {
		mach.HandleMemberEvent(ctx, evt)
	}
	a.m.backupFor(a.userID).maybeBackUp(ctx, a.cli(), resp)
}

// decryptEvents replaces the encrypted events of events with their
// plaintext where the keys are at hand. The others stay m.room.encrypted:
// the sink records them like any event and may wait for their keys with
// Manager.Decrypt.
func (a *Account) decryptEvents(ctx context.Context, helper *cryptohelper.CryptoHelper, events []*event.Event) {
	for i, evt := range events {
		if evt.Type != event.EventEncrypted {
			continue
		}
		dec, err := helper.Decrypt(ctx, evt)
		if err != nil {
			zerolog.Ctx(ctx).Debug().Err(err).Stringer("event_id", evt.ID).Stringer("room_id", evt.RoomID).
				Msg("Encrypted event not decrypted at sync; its keys may still arrive")
			continue
		}
		dec.Mautrix.EventSource = evt.Mautrix.EventSource | event.SourceDecrypted
		events[i] = dec
	}
}

// Decrypt decrypts an m.room.encrypted event that no account could decrypt
// when it was synced, for the pipeline to handle it late. It tries every
// account's keys, then waits up to Config.Encryption.KeyWait for the
// room key to arrive, asking the sender's devices (and the accounts' other
// devices) for it after a few seconds. It returns an error wrapping
// ErrUndecryptable when the keys did not come or the event is malformed,
// and ctx's error when ctx ends first. Safe for concurrent use. Every
// message given up on is counted for Undecryptable.
func (m *Manager) Decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	dec, err := m.decrypt(ctx, evt)
	if errors.Is(err, ErrUndecryptable) {
		m.noteUndecryptable(time.Now())
	}
	return dec, err
}

// undecryptableKept is how long Undecryptable remembers a failure.
const undecryptableKept = time.Hour

// noteUndecryptable records a message Decrypt gave up on at t.
func (m *Manager) noteUndecryptable(t time.Time) {
	if m.shared == nil {
		return
	}
	m.shared.mu.Lock()
	defer m.shared.mu.Unlock()
	m.shared.failed = append(m.shared.failed, t)
	drop := 0
	for drop < len(m.shared.failed) && t.Sub(m.shared.failed[drop]) > undecryptableKept {
		drop++
	}
	m.shared.failed = m.shared.failed[drop:]
}

// Undecryptable returns how many messages Decrypt gave up on since since
// (at most an hour back): the messages no account could read.
func (m *Manager) Undecryptable(since time.Time) int {
	if m.shared == nil {
		return 0
	}
	m.shared.mu.Lock()
	defer m.shared.mu.Unlock()
	n := 0
	for _, t := range m.shared.failed {
		if !t.Before(since) {
			n++
		}
	}
	return n
}

func (m *Manager) decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	content, ok := evt.Content.Parsed.(*event.EncryptedEventContent)
	if !ok {
		if err := evt.Content.ParseRaw(event.EventEncrypted); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrUndecryptable, err)
		}
		content = evt.Content.AsEncrypted()
	}
	var helpers []*cryptohelper.CryptoHelper
	for _, a := range m.Accounts() {
		if h := a.cryptoHelper(); h != nil {
			helpers = append(helpers, h)
		}
	}
	if len(helpers) == 0 {
		return nil, fmt.Errorf("%w: no account has encryption set up", ErrUndecryptable)
	}
	attempt := func() (*event.Event, error) {
		var last error
		for _, h := range helpers {
			dec, err := h.Decrypt(ctx, evt)
			if err == nil {
				dec.Mautrix.EventSource = evt.Mautrix.EventSource | event.SourceDecrypted
				return dec, nil
			}
			last = err
		}
		return nil, last
	}
	dec, err := attempt()
	if err == nil {
		return dec, nil
	} else if !errors.Is(err, crypto.ErrNoSessionFound) {
		return nil, fmt.Errorf("%w: %w", ErrUndecryptable, err)
	}
	wait := m.cfg.Encryption.KeyWait
	first := min(keyRequestAfter, wait)
	if !waitForSession(ctx, helpers, evt.RoomID, content, first) && ctx.Err() == nil && wait > first {
		for _, h := range helpers {
			h.RequestSession(context.WithoutCancel(ctx), evt.RoomID, content.SenderKey, content.SessionID, evt.Sender, content.DeviceID)
		}
		waitForSession(ctx, helpers, evt.RoomID, content, wait-first)
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if dec, err = attempt(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecryptable, err)
	}
	return dec, nil
}

// sessionPollInterval is how often waitForSession looks into the store:
// mautrix notifies waiters of room keys sent to the device, but not of
// keys forwarded in answer to a key request.
const sessionPollInterval = time.Second

// waitForSession waits until any of helpers has the megolm session of
// content, for at most d.
func waitForSession(ctx context.Context, helpers []*cryptohelper.CryptoHelper, room id.RoomID, content *event.EncryptedEventContent, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		step := min(time.Until(deadline), sessionPollInterval)
		if step <= 0 || ctx.Err() != nil {
			return false
		}
		if waitForSessionOnce(ctx, helpers, room, content, step) {
			return true
		}
	}
}

// waitForSessionOnce is one step of waitForSession.
func waitForSessionOnce(ctx context.Context, helpers []*cryptohelper.CryptoHelper, room id.RoomID, content *event.EncryptedEventContent, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	found := make(chan bool, len(helpers))
	var wg sync.WaitGroup
	for _, h := range helpers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			found <- h.WaitForSession(ctx, room, content.SenderKey, content.SessionID, d)
		}()
	}
	defer wg.Wait()
	for range helpers {
		if <-found {
			cancel()
			return true
		}
	}
	return false
}

// prepareEncryptedRoom makes sure the state store knows, before the first
// message into room, whether the room is encrypted and who is in it, also
// for rooms joined before this database tracked room state. Once a room's
// members were fetched the sync keeps them current, so this costs a request
// only the first time.
func (a *Account) prepareEncryptedRoom(ctx context.Context, room id.RoomID) error {
	state, ok := a.cli().StateStore.(*sqlstatestore.SQLStateStore)
	if !ok {
		return nil
	}
	fetched, err := state.HasFetchedMembers(ctx, room)
	if err != nil {
		return fmt.Errorf("failed to read the state of %s: %w", room, err)
	}
	if fetched {
		return nil
	}
	var enc event.EncryptionEventContent
	switch err := a.GetState(ctx, room, event.StateEncryption, "", &enc); {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return err
	default:
		if err := state.SetEncryptionEvent(ctx, room, &enc); err != nil {
			return fmt.Errorf("failed to record the encryption of %s: %w", room, err)
		}
	}
	// Members replaces the cached member list and marks it fetched.
	if _, err := a.Members(ctx, room); err != nil {
		return err
	}
	return nil
}

// IsEncrypted reports whether room is end-to-end encrypted, as far as the
// account's room state knows.
func (a *Account) IsEncrypted(ctx context.Context, room id.RoomID) (bool, error) {
	state := a.cli().StateStore
	if state == nil {
		return false, nil
	}
	return state.IsEncrypted(ctx, room)
}

// encryptIfNeeded encrypts content for room when the room is encrypted and
// mautrix would not do it itself (it leaves reactions in the clear). It
// returns the type and content to send.
func (a *Account) encryptIfNeeded(ctx context.Context, helper *cryptohelper.CryptoHelper, room id.RoomID, evtType event.Type, content any) (event.Type, any, error) {
	if evtType != event.EventReaction {
		return evtType, content, nil
	}
	encrypted, err := a.IsEncrypted(ctx, room)
	if err != nil || !encrypted {
		return evtType, content, err
	}
	enc, err := helper.Encrypt(ctx, room, evtType, content)
	if err != nil {
		return evtType, content, fmt.Errorf("failed to encrypt %s: %w", evtType.Type, err)
	}
	return event.EventEncrypted, enc, nil
}

// crossSigning is an account's stored cross-signing state.
type crossSigning struct {
	Seeds crypto.CrossSigningSeeds `json:"seeds"`
	// SignedDevice is the device last signed with the self-signing key.
	SignedDevice id.DeviceID `json:"signed_device"`
}

// pickleKey returns the key that encrypts the stored crypto secrets,
// creating it on first use.
func (s *Store) pickleKey(ctx context.Context) ([]byte, error) {
	fresh := make([]byte, 32)
	if _, err := rand.Read(fresh); err != nil {
		return nil, fmt.Errorf("failed to generate pickle key: %w", err)
	}
	_, err := s.db.Exec(ctx, `INSERT INTO matrixio_secret (name, value) VALUES ('pickle_key', $1) ON CONFLICT (name) DO NOTHING`,
		base64.StdEncoding.EncodeToString(fresh))
	if err != nil {
		return nil, fmt.Errorf("failed to store pickle key: %w", err)
	}
	var stored string
	if err := s.db.QueryRow(ctx, `SELECT value FROM matrixio_secret WHERE name='pickle_key'`).Scan(&stored); err != nil {
		return nil, fmt.Errorf("failed to load pickle key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(stored)
	if err != nil || len(key) != 32 {
		return nil, errors.New("failed to load pickle key: stored value is malformed")
	}
	return key, nil
}

// sealer encrypts secrets stored outside mautrix's own (pickled) tables
// with a key derived from the pickle key, so they never sit in the
// database in the clear.
func (s *Store) sealer(ctx context.Context) (cipher.AEAD, error) {
	key, err := s.pickleKey(ctx)
	if err != nil {
		return nil, err
	}
	derived := sha256.Sum256(append([]byte("hookroom cross-signing v1\x00"), key...))
	block, err := aes.NewCipher(derived[:])
	if err != nil {
		return nil, fmt.Errorf("failed to set up secret encryption: %w", err)
	}
	return cipher.NewGCM(block)
}

func (s *Store) saveCrossSigning(ctx context.Context, user id.UserID, rec *crossSigning) error {
	aead, err := s.sealer(ctx)
	if err != nil {
		return err
	}
	plain, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("failed to encode cross-signing keys: %w", err)
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return fmt.Errorf("failed to encrypt cross-signing keys: %w", err)
	}
	sealed := aead.Seal(nonce, nonce, plain, []byte(user))
	_, err = s.db.Exec(ctx, `
		INSERT INTO matrixio_cross_signing (user_id, sealed) VALUES ($1, $2)
		ON CONFLICT (user_id) DO UPDATE SET sealed=excluded.sealed`,
		user, base64.StdEncoding.EncodeToString(sealed))
	if err != nil {
		return fmt.Errorf("failed to store cross-signing keys of %s: %w", user, err)
	}
	return nil
}

func (s *Store) loadCrossSigning(ctx context.Context, user id.UserID) (*crossSigning, error) {
	var stored string
	err := s.db.QueryRow(ctx, `SELECT sealed FROM matrixio_cross_signing WHERE user_id=$1`, user).Scan(&stored)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("failed to load cross-signing keys of %s: %w", user, err)
	}
	aead, err := s.sealer(ctx)
	if err != nil {
		return nil, err
	}
	sealed, err := base64.StdEncoding.DecodeString(stored)
	if err != nil || len(sealed) < aead.NonceSize() {
		return nil, fmt.Errorf("failed to load cross-signing keys of %s: stored value is malformed", user)
	}
	plain, err := aead.Open(nil, sealed[:aead.NonceSize()], sealed[aead.NonceSize():], []byte(user))
	if err != nil {
		return nil, fmt.Errorf("failed to decrypt cross-signing keys of %s (was the pickle key replaced?): %w", user, err)
	}
	var rec crossSigning
	if err := json.Unmarshal(plain, &rec); err != nil {
		return nil, fmt.Errorf("failed to decode cross-signing keys of %s: %w", user, err)
	}
	return &rec, nil
}

func (s *Store) deleteCrossSigning(ctx context.Context, user id.UserID) error {
	_, err := s.db.Exec(ctx, `DELETE FROM matrixio_cross_signing WHERE user_id=$1`, user)
	return err
}
