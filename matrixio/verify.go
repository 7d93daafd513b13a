package matrixio

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto/verificationhelper"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// VerifyDecision is a Verification policy's answer to a request.
type VerifyDecision int

const (
	// VerifyAccept answers the request with SAS (emoji) verification.
	VerifyAccept VerifyDecision = iota
	// VerifyRefuse cancels the request with the decision's reason.
	VerifyRefuse
)

// Verification lets every account answer interactive verification
// requests (Element's "Verify user": SAS emoji, in a room or to-device)
// from the people the policy admits. The account has no human to compare
// the emoji, so it posts them into the room the request came from (to-device
// requests: the log only) and confirms on its side; the requester compares
// and confirms in their client, which then signs the account's master key
// with their user-signing key. The account signs the requester's master key
// with its own.
type Verification struct {
	// Decide is called on the account's sync goroutine for every request
	// with the requesting user; it returns whether to accept and, when
	// refusing, the reason sent with the cancellation (shown by the
	// requester's client). It must be quick and must not block.
	Decide func(from id.UserID) (VerifyDecision, string)
}

// SetVerification turns interactive verification on (v non-nil) or off
// (nil) for every account. Call it before the accounts' sync loops start;
// a change reaches a running account at its next sync response.
func (m *Manager) SetVerification(v *Verification) {
	verifyPolicies.Store(m, v)
}

// verifyPolicies holds each Manager's Verification; verifiers each
// Account's verification state. Kept beside the structs (which other code
// owns) rather than in them.
var (
	verifyPolicies sync.Map // *Manager → *Verification
	verifiers      sync.Map // *Account → *verifier
)

func (m *Manager) verification() *Verification {
	v, _ := verifyPolicies.Load(m)
	p, _ := v.(*Verification)
	return p
}

// verifier is one account's verification helper and what it remembers.
type verifier struct {
	a      *Account
	policy *Verification
	logger zerolog.Logger  // hookroom's log for the account; the helper's own chatter goes to a quieter copy
	cli    *mautrix.Client // the account's client the helper was made for
	syncer *mautrix.DefaultSyncer
	helper *verificationhelper.VerificationHelper

	mu         sync.Mutex
	rooms      map[id.VerificationTransactionID]id.RoomID // in-room requests: where to post the emoji
	from       map[id.VerificationTransactionID]id.UserID
	verifiedBy []id.UserID // who completed a verification with this account since start
}

// VerifiedBy returns the users who completed an interactive verification
// with the account since hookroom started (their client signed the
// account's master key), oldest first.
func (a *Account) VerifiedBy() []id.UserID {
	v, ok := verifiers.Load(a)
	if !ok {
		return nil
	}
	vf := v.(*verifier)
	vf.mu.Lock()
	defer vf.mu.Unlock()
	return slices.Clone(vf.verifiedBy)
}

// isVerificationRequest reports whether evt is an in-room verification
// request (an m.room.message with msgtype m.key.verification.request).
func isVerificationRequest(evt *event.Event) bool {
	if evt.Type != event.EventMessage {
		return false
	}
	msg, ok := evt.Content.Parsed.(*event.MessageEventContent)
	return ok && msg.MsgType == event.MsgVerificationRequest
}

// isVerificationEvent reports whether evt belongs to a verification flow
// (request, ready, start, accept, key, mac, done, cancel).
func isVerificationEvent(evt *event.Event) bool {
	return isVerificationRequest(evt) || strings.HasPrefix(evt.Type.Type, "m.key.verification.")
}

// handleVerification hands the verification events of one sync response
// (to-device and in-room, after decryption) to the account's verification
// helper, when verification is on. In-room verification requests are taken
// out of batch: they are not messages for the agents to answer. Called by
// Run for every response before the batch goes to the sink.
func (a *Account) handleVerification(ctx context.Context, resp *mautrix.RespSync, batch *SyncBatch) {
	policy := a.m.verification()
	if policy == nil {
		return
	}
	var events []*event.Event
	for _, evt := range resp.ToDevice.Events {
		if evt.Type.Class == event.ToDeviceEventType && strings.HasPrefix(evt.Type.Type, "m.key.verification.") {
			events = append(events, evt)
		}
	}
	for i := range batch.Rooms {
		re := &batch.Rooms[i]
		var kept []*event.Event
		dropped := false
		for _, evt := range re.Timeline {
			if !isVerificationEvent(evt) {
				kept = append(kept, evt)
				continue
			}
			if evt.Sender != a.userID {
				events = append(events, evt)
			}
			if isVerificationRequest(evt) {
				dropped = true
			} else {
				kept = append(kept, evt)
			}
		}
		if dropped {
			re.Timeline = kept
		}
	}
	var known func(id.VerificationTransactionID) bool
	if v, ok := verifiers.Load(a); ok {
		known = v.(*verifier).knows
	}
	events = verificationEventsFor(a.userID, events, known)
	if len(events) == 0 {
		return
	}
	vf, err := a.verifier(ctx, policy)
	if err != nil {
		zerolog.Ctx(ctx).Warn().Err(err).Msg("Failed to set up interactive verification; a verification request goes unanswered")
		return
	}
	// The helper logs every step at info level: only its warnings and
	// errors go to hookroom's log; this file logs the outcomes.
	quiet := vf.logger.Level(max(zerolog.WarnLevel, vf.logger.GetLevel())).WithContext(ctx)
	for _, evt := range events {
		if isVerificationRequest(evt) {
			vf.mu.Lock()
			vf.rooms[id.VerificationTransactionID(evt.ID)] = evt.RoomID
			vf.mu.Unlock()
		}
		vf.syncer.Dispatch(quiet, inRoomTransaction(evt))
	}
}

// verificationEventsFor picks the verification events that are self's
// business: to-device events (sent to its device), in-room requests
// addressed to self, and in-room follow-ups of a transaction known says
// self takes part in (nil: none). Every account of a room sees every
// verification event there; one that answered another account's
// transaction would cancel it as unknown.
func verificationEventsFor(self id.UserID, events []*event.Event, known func(id.VerificationTransactionID) bool) []*event.Event {
	var out []*event.Event
	for _, evt := range events {
		switch {
		case evt.RoomID == "":
			out = append(out, evt)
		case isVerificationRequest(evt):
			if msg, _ := evt.Content.Parsed.(*event.MessageEventContent); msg != nil && msg.To == self {
				out = append(out, evt)
			}
		case known != nil && known(id.VerificationTransactionID(inRoomTransaction(evt).ID)):
			out = append(out, evt)
		}
	}
	return out
}

// knows reports whether txn is an in-room request vf is answering.
func (vf *verifier) knows(txn id.VerificationTransactionID) bool {
	vf.mu.Lock()
	defer vf.mu.Unlock()
	_, ok := vf.rooms[txn]
	return ok
}

// inRoomTransaction returns evt as the helper expects it: the helper
// takes an in-room event's id for its transaction id, which is the id of
// the request the event relates to (m.relates_to), so a follow-up event is
// handed over as a copy carrying that id.
func inRoomTransaction(evt *event.Event) *event.Event {
	if evt.RoomID == "" || isVerificationRequest(evt) {
		return evt
	}
	rel, ok := evt.Content.Parsed.(interface{ OptionalGetRelatesTo() *event.RelatesTo })
	if !ok || rel.OptionalGetRelatesTo() == nil || rel.OptionalGetRelatesTo().EventID == "" {
		return evt
	}
	cp := *evt
	cp.ID = rel.OptionalGetRelatesTo().EventID
	return &cp
}

// verifier returns the account's verification helper, making it on first
// use and again when the account logged in anew (a new client).
func (a *Account) verifier(ctx context.Context, policy *Verification) (*verifier, error) {
	cli, helper := a.cli(), a.cryptoHelper()
	if helper == nil {
		return nil, fmt.Errorf("failed to set up verification for %s: the account has no encryption", a.userID)
	}
	if v, ok := verifiers.Load(a); ok {
		if vf := v.(*verifier); vf.cli == cli {
			vf.policy = policy
			return vf, nil
		}
	}
	// A client of its own: the helper registers its handlers on the
	// client's syncer, which hookroom's sync loop does not use otherwise.
	vcli, err := mautrix.NewClient(cli.HomeserverURL.String(), cli.UserID, cli.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("failed to set up verification for %s: %w", a.userID, err)
	}
	vcli.DeviceID = cli.DeviceID
	vcli.Client = cli.Client
	vcli.UserAgent = cli.UserAgent
	vcli.StateStore = cli.StateStore
	vcli.Crypto = cli.Crypto
	vcli.Log = cli.Log
	vcli.SetAppServiceUserID = cli.SetAppServiceUserID
	vcli.SetAppServiceDeviceID = cli.SetAppServiceDeviceID
	vcli.RequestHook = cli.RequestHook
	vcli.ResponseHook = cli.ResponseHook
	syncer := mautrix.NewDefaultSyncer()
	vcli.Syncer = syncer
	vf := &verifier{
		a: a, policy: policy, cli: cli, syncer: syncer,
		logger: zerolog.Ctx(ctx).With().Str("component", "verification").Logger(),
		rooms:  map[id.VerificationTransactionID]id.RoomID{},
		from:   map[id.VerificationTransactionID]id.UserID{},
	}
	if old, ok := verifiers.Load(a); ok {
		vf.verifiedBy = old.(*verifier).VerifiedByCopy()
	}
	vf.helper = verificationhelper.NewVerificationHelper(vcli, helper.Machine(), nil, vf, false, false, true)
	if err := vf.helper.Init(ctx); err != nil {
		return nil, fmt.Errorf("failed to set up verification for %s: %w", a.userID, err)
	}
	verifiers.Store(a, vf)
	return vf, nil
}

// VerifiedByCopy returns a copy of the users who verified the account.
func (vf *verifier) VerifiedByCopy() []id.UserID {
	vf.mu.Lock()
	defer vf.mu.Unlock()
	return slices.Clone(vf.verifiedBy)
}

// verifyTimeout bounds the requests one verification step makes outside
// the sync goroutine.
const verifyTimeout = 30 * time.Second

// log is vf's logger for one transaction.
func (vf *verifier) log(_ context.Context, txn id.VerificationTransactionID) zerolog.Logger {
	vf.mu.Lock()
	from, room := vf.from[txn], vf.rooms[txn]
	vf.mu.Unlock()
	return vf.logger.With().Str("transaction_id", string(txn)).Stringer("requester", from).Stringer("room_id", room).Logger()
}

// VerificationRequested is called by the helper (sync goroutine, no lock
// held) for every request: it accepts or refuses as the policy says.
func (vf *verifier) VerificationRequested(ctx context.Context, txn id.VerificationTransactionID, from id.UserID, fromDevice id.DeviceID) {
	vf.mu.Lock()
	vf.from[txn] = from
	vf.mu.Unlock()
	log := vf.log(ctx, txn)
	decision, reason := vf.policy.Decide(from)
	if decision != VerifyAccept {
		log.Info().Str("reason", reason).Msg("Refused a verification request")
		if err := vf.helper.CancelVerification(ctx, txn, event.VerificationCancelCodeUser, reason); err != nil {
			log.Warn().Err(err).Msg("Failed to cancel a refused verification request")
		}
		return
	}
	if err := vf.helper.AcceptVerification(ctx, txn); err != nil {
		log.Warn().Err(err).Msg("Failed to accept a verification request")
		return
	}
	log.Info().Stringer("device_id", fromDevice).Msg("Accepted a verification request; waiting for the requester to start emoji verification")
}

// VerificationReady is called when the account accepted a request; the
// requester's client starts SAS.
func (vf *verifier) VerificationReady(context.Context, id.VerificationTransactionID, id.DeviceID, bool, bool, *verificationhelper.QRCode) {
}

// VerificationCancelled is called when either side cancelled.
func (vf *verifier) VerificationCancelled(ctx context.Context, txn id.VerificationTransactionID, code event.VerificationCancelCode, reason string) {
	log := vf.log(ctx, txn)
	log.Info().Str("code", string(code)).Str("reason", reason).Msg("Verification cancelled")
	vf.forget(txn)
}

// VerificationDone is called when both sides confirmed: the account has
// signed the requester's master key, the requester's client the account's.
func (vf *verifier) VerificationDone(ctx context.Context, txn id.VerificationTransactionID, method event.VerificationMethod) {
	log := vf.log(ctx, txn)
	vf.mu.Lock()
	from, room := vf.from[txn], vf.rooms[txn]
	if from != "" && !slices.Contains(vf.verifiedBy, from) {
		vf.verifiedBy = append(vf.verifiedBy, from)
	}
	vf.mu.Unlock()
	vf.forget(txn)
	log.Info().Str("method", string(method)).Msg("Verification completed: the requester's client now shows this account as verified")
	if room != "" {
		text := fmt.Sprintf("✅ Verified with %s: their client now shows %s as verified.", from, vf.a.userID)
		vf.post(context.WithoutCancel(ctx), log, room, txn, "done", text)
	}
}

// ShowSAS is called by the helper (holding its lock) once both sides'
// keys are exchanged. It posts the emoji and numbers into the request's
// room (or logs them) and confirms on the account's side, in a goroutine:
// confirming takes the helper's lock.
func (vf *verifier) ShowSAS(ctx context.Context, txn id.VerificationTransactionID, emojis []rune, descriptions []string, decimals []int) {
	log := vf.log(ctx, txn)
	sas := FormatSAS(emojis, descriptions, decimals)
	vf.mu.Lock()
	room := vf.rooms[txn]
	vf.mu.Unlock()
	log.Info().Str("sas", sas).Msg("Verification emoji ready; confirming on the account's side")
	go func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), verifyTimeout)
		defer cancel()
		if room != "" {
			vf.post(ctx, log, room, txn, "sas", "🔐 Verification: my side shows "+sas+". If your client shows the same, confirm there.")
		}
		if err := vf.helper.ConfirmSAS(ctx, txn); err != nil {
			log.Warn().Err(err).Msg("Failed to confirm the verification emoji")
		}
	}()
}

func (vf *verifier) post(ctx context.Context, log zerolog.Logger, room id.RoomID, txn id.VerificationTransactionID, step, text string) {
	opts := SendOptions{TxnKey: TxnKey(id.EventID(txn), "verify-"+step), Notice: true, PlainText: true}
	if _, err := vf.a.SendText(ctx, room, text, opts); err != nil {
		log.Warn().Err(err).Msg("Failed to post a verification message into the room")
	}
}

func (vf *verifier) forget(txn id.VerificationTransactionID) {
	vf.mu.Lock()
	defer vf.mu.Unlock()
	delete(vf.rooms, txn)
	delete(vf.from, txn)
}

// FormatSAS renders a short authentication string for people: the emoji
// with their names, and the decimals when there are any.
func FormatSAS(emojis []rune, descriptions []string, decimals []int) string {
	var parts []string
	for i, e := range emojis {
		name := ""
		if i < len(descriptions) {
			name = " " + descriptions[i]
		}
		parts = append(parts, string(e)+name)
	}
	var s strings.Builder
	if len(parts) > 0 {
		s.WriteString("emoji " + strings.Join(parts, ", "))
	}
	if len(decimals) > 0 {
		if s.Len() > 0 {
			s.WriteString("; ")
		}
		nums := make([]string, len(decimals))
		for i, d := range decimals {
			nums[i] = fmt.Sprint(d)
		}
		s.WriteString("numbers " + strings.Join(nums, " "))
	}
	return s.String()
}
