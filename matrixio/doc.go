// Package matrixio is everything that talks to the Matrix homeserver: account
// login and registration with persisted credentials, one sync loop per account,
// sending with deterministic transaction ids, threads, edits, reactions,
// typing, room state, room provisioning, the admin facade and rate-limit
// back-off. It knows nothing of hooks, agents or plugins.
//
// # Pieces
//
// A [Store] keeps credentials and sync positions in the shared database
// (its own tables, versioned in matrixio_version). A [Manager] built from a
// [Config] and the Store turns [AccountSpec]s into logged-in [Account]s with
// [Manager.EnsureAccount]: stored token, else password login on the stored
// device, else registration (shared secret or registration token) with a
// generated password — or, with an application service's token
// ([Registration].AppServiceToken), registration and login through the
// service, with no password ([NewAppServiceRegistration] writes the
// registration file the homeserver loads). The device id survives restarts, and with it the
// homeserver's transaction-id deduplication.
//
// [Account.Run] is the sync loop of one account. It hands each response to
// an [EventSink] as a [SyncBatch] — limited timelines already filled from
// /messages — and saves the sync token only after the sink accepted the
// batch, so nothing is acknowledged before it is stored. The very first
// batch of an account is marked Initial: what it shows was there before
// hookroom looked.
//
// Sending ([Account.SendText], [Account.Edit], [Account.React],
// [Account.Redact], [Account.SendEvent]) uses transaction ids derived from
// the caller's key ([TxnKey] of the triggering event and a stage) or the
// content, so a resend collapses on a homeserver that still remembers the
// id. Homeservers do not always (Dendrite forgets the id of a request whose
// client went away), so [Account.FindSent] finds the account's own
// messages by transaction id in a sync from a position taken before the
// send ([Account.SyncPosition]). Every request is retried under
// [RetryPolicy]: M_LIMIT_EXCEEDED waits the server's retry_after_ms
// (mautrix does not read it), server and network errors back off
// exponentially (a send first looks for its earlier attempt with
// FindSent), and context cancellation ends the wait.
// A text too long for one event is cut with [SplitText] (or [FirstPart]
// while it streams) into parts of at most [MaxContentBytes] of content.
//
// Rooms are provisioned with [Account.EnsureRoom] (resolve the alias or
// create it, then invite and join the members; idempotent across restarts),
// and the admin facade covers aliases, invites, joins, spaces, state and
// member lists.
//
// # End-to-end encryption
//
// Every account is an encrypting device (mautrix's crypto, built pure Go
// with -tags goolm). EnsureAccount loads or creates the device's keys in
// the shared database, uploads them, and bootstraps cross-signing so the
// owner vouches for the device; a device that was deleted on the
// homeserver is replaced by a new one. Run feeds each sync response to the
// account's olm machine (room state, to-device keys, device lists) before
// building the batch, and decrypts timeline events in place, so the sink
// sees plaintext. Events whose keys have not arrived stay m.room.encrypted;
// [Manager.Decrypt] waits for their keys (and requests them). Sending
// encrypts in encrypted rooms, reactions included ([Config.Encryption]
// picks the devices that receive keys).
//
// # Media
//
// [Account.Download] fetches a message's file through the authenticated
// media API, size-limited, decrypting encrypted attachments.
//
// Never log what [Account.Client] exposes (access tokens), nor
// [Registration] secrets; matrixio itself logs neither.
package matrixio
