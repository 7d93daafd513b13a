"""An end-to-end encrypted Matrix test client built on Debian's python3-matrix-nio and python3-olm.

hstest.StartClient runs it with /usr/bin/python3 and drives it over stdin/stdout, one JSON object
per line (the protocol is described in matrixio/hstest/client.go and spoken by jsclient/client.mjs
too). Nothing but protocol lines goes to stdout; diagnostics go to stderr, never a password or an
access token.

Request:  {"id": 1, "cmd": "send", "room_id": "!r:localhost", "body": "hi"}
Response: {"id": 1, "ok": true, "result": {"event_id": "$e"}}
          {"id": 1, "ok": false, "error": "what went wrong"}

After login a background task long-polls /sync and keeps the crypto state up to date (key
upload, device-list queries, one-time key claims, to-device messages). Every m.room.message it
sees is kept in arrival order, decrypted where possible; m.replace edits are folded into the
message they edit and redactions mark their target. An event that cannot be decrypted is kept
with undecryptable set and retried after every sync, so a late room key still decrypts it.
Reactions (m.reaction, m.annotation) are kept apart, for wait_reaction.

The store directory keeps the olm account, sessions, sync token and the session (user, device,
access token), so a new process with the same directory is the same device.
"""
import asyncio
import base64
import io
import json
import logging
import os
import re
import sys
import time
import traceback

from nio import (
    AsyncClient,
    AsyncClientConfig,
    DownloadResponse,
    JoinResponse,
    LoginResponse,
    MegolmEvent,
    RedactionEvent,
    RoomCreateResponse,
    RoomInviteResponse,
    RoomMessage,
    RoomPreset,
    RoomRedactResponse,
    RoomSendResponse,
    SyncResponse,
    UploadResponse,
)
from nio.crypto.attachments import decrypt_attachment
from nio.exceptions import EncryptionError, LocalProtocolError

SESSION_FILE = "hstest-session.json"
SYNC_TIMEOUT_MS = 10000
# How long an undecryptable event may wait for its room key before wait_message reports it.
UNDECRYPTABLE_GRACE = 3.0
# A large timeline limit: a burst between two syncs must not come back "limited" with gaps.
SYNC_FILTER = {"room": {"timeline": {"limit": 500}}}
MEGOLM = "m.megolm.v1.aes-sha2"


class Client(AsyncClient):
    """nio's AsyncClient, except that an encrypted event keeps its m.relates_to in the clear as
    the spec asks (nio 0.20 only puts it inside the ciphertext), so servers and other clients see
    edits, threads and replies of encrypted messages."""

    def encrypt(self, room_id, event_type, content):
        msg_type, encrypted = super().encrypt(room_id, event_type, content)
        if "m.relates_to" in content:
            encrypted["m.relates_to"] = content["m.relates_to"]
        return msg_type, encrypted


SECRETS = set()  # the password and access token: never written out


def scrub(text):
    """text with every known secret, and any access_token= query value, blanked out."""
    text = re.sub(r"(access_token=)[^&\s'\"]+", r"\1<redacted>", str(text))
    for secret in SECRETS:
        text = text.replace(secret, "<redacted>")
    return text


class ScrubbingStderr:
    """sys.stderr for everything in this process (nio's logging, tracebacks): scrubbed."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text):
        return self.stream.write(scrub(text))

    def flush(self):
        self.stream.flush()


def log(msg):
    print(f"e2ee_client.py: {msg}", file=sys.stderr, flush=True)


def why(resp):
    """What a nio error response says: its type, HTTP status, errcode and message."""
    if isinstance(resp, Exception):
        return f"{type(resp).__name__}: {resp}"
    parts = [type(resp).__name__ + ":"]
    for attr in ("status_code", "message"):
        v = getattr(resp, attr, None)
        if v:
            parts.append(str(v))
    return " ".join(parts)


class CommandError(Exception):
    """A failure reported to the Go side as {"ok": false, "error": ...}."""


class Message:
    """One m.room.message as this client saw it."""

    def __init__(self, room_id, event_id, sender, ts, history):
        self.room_id = room_id
        self.event_id = event_id
        self.sender = sender
        self.ts = ts
        self.history = history
        self.seq = 0
        self.seen_at = time.monotonic()
        self.encrypted = False
        self.undecryptable = False
        self.decrypt_error = ""
        self.megolm = None  # the MegolmEvent while undecryptable
        self.content = {}
        self.relates_to = {}
        self.edits = []  # (event_id, new body) in arrival order
        self.undecryptable_edits = 0
        self.redacted = False

    def redact(self):
        """What a redaction leaves: no content, no edits, nothing left to decrypt."""
        self.redacted = True
        self.content = {}
        self.edits = []
        self.undecryptable = False
        self.megolm = None
        self.decrypt_error = ""

    @property
    def body(self):
        return self.content.get("body", "")

    @property
    def final_body(self):
        return self.edits[-1][1] if self.edits else self.body

    @property
    def thread_root(self):
        rel = self.relates_to
        return rel.get("event_id", "") if rel.get("rel_type") == "m.thread" else ""

    @property
    def reply_to(self):
        return (self.relates_to.get("m.in_reply_to") or {}).get("event_id", "")

    def as_json(self):
        out = {
            "room_id": self.room_id,
            "event_id": self.event_id,
            "sender": self.sender,
            "origin_server_ts": self.ts,
            "msgtype": self.content.get("msgtype", ""),
            "body": self.body,
            "final_body": self.final_body,
            "encrypted": self.encrypted,
            "undecryptable": self.undecryptable,
            "decrypt_error": self.decrypt_error,
            "thread_root": self.thread_root,
            "reply_to": self.reply_to,
            "edits": len(self.edits),
            "last_edit_id": self.edits[-1][0] if self.edits else "",
            "undecryptable_edits": self.undecryptable_edits,
            "redacted": self.redacted,
            "history": self.history,
        }
        if "formatted_body" in self.content:
            out["formatted_body"] = self.content["formatted_body"]
        media = self.content.get("file") or {}
        if media.get("url") or self.content.get("url"):
            out["media_url"] = media.get("url") or self.content.get("url")
            out["media_encrypted"] = bool(media)
        return out


class Reaction:
    """One m.reaction (an m.annotation of another event) as this client saw it."""

    def __init__(self, room_id, event_id, sender, seq, relates_to, encrypted):
        self.room_id = room_id
        self.event_id = event_id
        self.sender = sender
        self.seq = seq
        self.target = relates_to.get("event_id", "")
        self.key = relates_to.get("key", "")
        self.encrypted = encrypted

    def as_json(self):
        return {"room_id": self.room_id, "event_id": self.event_id, "sender": self.sender,
                "target": self.target, "key": self.key, "encrypted": self.encrypted}


class E2EEClient:
    def __init__(self):
        self.client = None
        self.store_dir = ""
        self.login_ts = 0  # ms; events older than this predate the device ("history")
        self.messages = []
        self.reactions = []  # Reaction in arrival order
        self.by_id = {}  # event id -> Message
        self.seq_of = {}  # event id -> arrival order, for every timeline event seen
        self.pending_edits = {}  # target event id -> [(sender, event_id, body or None)]
        self.pending_redactions = set()
        self.stuck_edits = []  # (MegolmEvent, target Message) of edits not decrypted yet
        self.policy = "tofu"
        self.changed = asyncio.Condition()
        self.sync_task = None
        self.syncs = 0
        self.sync_error = ""
        self.key_lock = asyncio.Lock()

    # ---- the sync loop -------------------------------------------------------------------

    async def sync_loop(self):
        failures = 0
        while True:
            try:
                resp = await self.client.sync(timeout=SYNC_TIMEOUT_MS, sync_filter=SYNC_FILTER)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - keep syncing, report through waits
                resp = e
            if not isinstance(resp, SyncResponse):
                failures += 1
                self.sync_error = f"sync failed ({failures} in a row): {why(resp)}"
                log(self.sync_error)
                await asyncio.sleep(min(2.0, 0.1 * failures))
                continue
            failures = 0
            self.sync_error = ""
            try:
                self.take_sync(resp)
                await self.maintain_keys()
                self.retry_undecryptable()
            except Exception:  # noqa: BLE001
                self.sync_error = "processing a sync failed: " + traceback.format_exc()
                log(self.sync_error)
            self.syncs += 1
            async with self.changed:
                self.changed.notify_all()

    async def maintain_keys(self):
        c = self.client
        async with self.key_lock:
            if c.should_upload_keys:
                await c.keys_upload()
            if c.should_query_keys:
                await c.keys_query()
            if c.should_claim_keys:
                await c.keys_claim(c.get_users_for_key_claiming())
            self.apply_trust()
            await c.send_to_device_messages()

    def apply_trust(self):
        """With the "tofu" policy every device of every other user is trusted as first seen."""
        if self.policy != "tofu":
            return
        c = self.client
        for user_id in list(c.device_store.users):
            if user_id == c.user_id:
                continue
            for device in c.device_store.active_user_devices(user_id):
                if not c.olm.is_device_verified(device):
                    c.verify_device(device)

    def take_sync(self, resp):
        for room_id, room in resp.rooms.join.items():
            for ev in room.timeline.events:
                self.take_event(room_id, ev)

    def take_event(self, room_id, ev):
        src = ev.source or {}
        event_id = src.get("event_id") or getattr(ev, "event_id", "")
        if not event_id or event_id in self.seq_of:
            return
        self.seq_of[event_id] = len(self.seq_of)
        if isinstance(ev, RedactionEvent):
            self.redact(ev.redacts)
            return
        if isinstance(ev, MegolmEvent):
            content = src.get("content", {})
            relates = content.get("m.relates_to") or {}
            if relates.get("rel_type") == "m.replace":
                self.add_edit(relates.get("event_id", ""), ev.sender, event_id, None, ev)
                return
            msg = self.new_message(room_id, ev, event_id)
            msg.encrypted = True
            msg.undecryptable = True
            msg.megolm = ev
            msg.relates_to = relates
            msg.decrypt_error = "no room key for session " + getattr(ev, "session_id", "?")
            self.add_message(msg)
            return
        content = src.get("content", {})
        if src.get("type") == "m.reaction":
            relates = content.get("m.relates_to") or {}
            if relates.get("rel_type") == "m.annotation":
                self.reactions.append(Reaction(room_id, event_id, ev.sender, self.seq_of[event_id], relates,
                                               bool(getattr(ev, "decrypted", False))))
            return
        if not isinstance(ev, RoomMessage):
            return
        relates = content.get("m.relates_to") or {}
        if relates.get("rel_type") == "m.replace":
            new = content.get("m.new_content") or {}
            self.add_edit(relates.get("event_id", ""), ev.sender, event_id, new.get("body", ""))
            return
        msg = self.new_message(room_id, ev, event_id)
        msg.encrypted = bool(getattr(ev, "decrypted", False))
        msg.content = content
        msg.relates_to = relates
        self.add_message(msg)

    def new_message(self, room_id, ev, event_id):
        ts = getattr(ev, "server_timestamp", 0) or 0
        return Message(room_id, event_id, ev.sender, ts, ts < self.login_ts)

    def add_message(self, msg):
        msg.seq = self.seq_of[msg.event_id]
        self.messages.append(msg)
        self.by_id[msg.event_id] = msg
        for sender, edit_id, body, megolm in self.pending_edits.pop(msg.event_id, []):
            self.add_edit(msg.event_id, sender, edit_id, body, megolm)
        if msg.event_id in self.pending_redactions:
            self.pending_redactions.discard(msg.event_id)
            msg.redact()

    def add_edit(self, target_id, sender, edit_id, body, megolm=None):
        """Fold an edit into its target; an undecryptable edit (megolm set, body None) is
        counted on the target and retried after every sync."""
        target = self.by_id.get(target_id)
        if target is None:
            self.pending_edits.setdefault(target_id, []).append((sender, edit_id, body, megolm))
            return
        if sender != target.sender:
            return  # only the original sender may edit a message
        if megolm is not None:
            target.undecryptable_edits += 1
            self.stuck_edits.append((megolm, target))
        else:
            target.edits.append((edit_id, body))

    def redact(self, target_id):
        target = self.by_id.get(target_id)
        if target is None:
            self.pending_redactions.add(target_id)
        else:
            target.redact()

    def retry_undecryptable(self):
        stuck = []
        for megolm, target in self.stuck_edits:
            try:
                ev = self.client.decrypt_event(megolm)
            except EncryptionError:
                stuck.append((megolm, target))
                continue
            new = ((ev.source or {}).get("content", {}).get("m.new_content") or {})
            target.undecryptable_edits -= 1
            target.edits.append((megolm.event_id, new.get("body", "")))
        self.stuck_edits = stuck
        for msg in self.messages:
            if not msg.undecryptable or msg.megolm is None:
                continue
            try:
                ev = self.client.decrypt_event(msg.megolm)
            except EncryptionError as e:
                msg.decrypt_error = str(e) or msg.decrypt_error
                continue
            content = (ev.source or {}).get("content", {})
            msg.undecryptable = False
            msg.megolm = None
            msg.decrypt_error = ""
            msg.content = content
            msg.relates_to = content.get("m.relates_to") or msg.relates_to

    # ---- helpers -------------------------------------------------------------------------

    def need_login(self):
        if self.client is None:
            raise CommandError("not logged in: send login first")

    async def wait_for(self, pred, timeout, what):
        """Wait until pred() is true (checked now and after every sync); returns its value."""
        deadline = time.monotonic() + timeout
        async with self.changed:
            while True:
                value = pred()
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    extra = f" (last sync error: {self.sync_error})" if self.sync_error else ""
                    raise CommandError(f"timed out after {timeout:g}s waiting for {what}{extra}")
                try:
                    await asyncio.wait_for(self.changed.wait(), left)
                except asyncio.TimeoutError:
                    pass

    async def synced_once_more(self, timeout):
        """Wait until a sync that started after this call has been processed."""
        start = self.syncs
        await self.wait_for(lambda: self.syncs >= start + 2, timeout, "a sync")

    def room(self, room_id):
        return self.client.rooms.get(room_id)

    # ---- commands ------------------------------------------------------------------------

    async def cmd_login(self, a):
        if self.client is not None:
            raise CommandError("already logged in")
        url, user_id = a["url"], a["user_id"]
        if a.get("password"):
            SECRETS.add(a["password"])
        store = a.get("store_dir") or ""
        if not store:
            raise CommandError("login needs store_dir (the nio client keeps its keys there)")
        os.makedirs(store, mode=0o700, exist_ok=True)
        self.store_dir = store
        session_path = os.path.join(store, SESSION_FILE)
        session = None
        if os.path.exists(session_path):
            with open(session_path) as f:
                session = json.load(f)
            if session.get("user_id") != user_id:
                raise CommandError(f"store {store} belongs to {session.get('user_id')}, not {user_id}")
            if a.get("device_id") and a["device_id"] != session["device_id"]:
                raise CommandError(f"store {store} holds device {session['device_id']}, not {a['device_id']}")
        config = AsyncClientConfig(
            encryption_enabled=True,
            store_sync_tokens=True,
            max_timeouts=3,
            request_timeout=30,
        )
        device_id = session["device_id"] if session else (a.get("device_id") or "")
        client = Client(url, user_id, device_id=device_id, store_path=store, config=config)
        if session:
            SECRETS.add(session["access_token"])
            client.restore_login(user_id, session["device_id"], session["access_token"])
            self.login_ts = session["login_ts"]
            restored = True
        else:
            self.login_ts = int(time.time() * 1000)
            resp = await client.login(a["password"], device_name=a.get("device_name") or "hstest-nio")
            if not isinstance(resp, LoginResponse):
                await client.close()
                raise CommandError(f"login as {user_id} failed: {why(resp)}")
            SECRETS.add(resp.access_token)
            fd = os.open(session_path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump({"user_id": resp.user_id, "device_id": resp.device_id,
                           "access_token": resp.access_token, "login_ts": self.login_ts}, f)
            os.replace(session_path + ".tmp", session_path)
            restored = False
        self.client = client
        if client.should_upload_keys:
            resp = await client.keys_upload()
            if client.should_upload_keys:
                raise CommandError(f"uploading the device keys failed: {why(resp)}")
        self.sync_task = asyncio.create_task(self.sync_loop())
        # One sync before answering, so the caller sees the rooms the device is already in.
        await self.wait_for(lambda: self.syncs >= 1, a.get("timeout_ms", 30000) / 1000, "the first sync")
        keys = client.olm.account.identity_keys
        return {"user_id": client.user_id, "device_id": client.device_id, "restored": restored,
                "ed25519": keys["ed25519"], "curve25519": keys["curve25519"]}

    async def cmd_create_room(self, a):
        self.need_login()
        initial_state = []
        if a.get("encrypted"):
            initial_state.append({"type": "m.room.encryption", "state_key": "",
                                  "content": {"algorithm": MEGOLM}})
        resp = await self.client.room_create(
            name=a.get("name") or None,
            is_direct=bool(a.get("is_direct")),
            invite=a.get("invite") or [],
            initial_state=initial_state,
            preset=RoomPreset.trusted_private_chat if a.get("is_direct") else RoomPreset.private_chat,
        )
        if not isinstance(resp, RoomCreateResponse):
            raise CommandError(f"create room failed: {why(resp)}")
        room_id = resp.room_id
        want_enc = bool(a.get("encrypted"))
        await self.wait_for(lambda: (r := self.room(room_id)) is not None and r.encrypted == want_enc,
                            a.get("timeout_ms", 30000) / 1000, f"room {room_id} in the sync")
        return {"room_id": room_id}

    async def cmd_invite(self, a):
        self.need_login()
        resp = await self.client.room_invite(a["room_id"], a["user_id"])
        if not isinstance(resp, RoomInviteResponse):
            raise CommandError(f"invite {a['user_id']} to {a['room_id']} failed: {why(resp)}")
        return {}

    async def cmd_join(self, a):
        self.need_login()
        resp = await self.client.join(a["room_id"])
        if not isinstance(resp, JoinResponse):
            raise CommandError(f"join {a['room_id']} failed: {why(resp)}")
        room_id = resp.room_id
        await self.wait_for(lambda: room_id in self.client.rooms, a.get("timeout_ms", 30000) / 1000,
                            f"joined room {room_id} in the sync")
        return {"room_id": room_id}

    async def cmd_sync_until(self, a):
        """Wait until a condition on the synced state holds: invited, joined, encrypted,
        member_joined (user_id) or synced (one more complete sync)."""
        self.need_login()
        cond = a.get("condition", "")
        room_id = a.get("room_id") or ""
        timeout = a.get("timeout_ms", 30000) / 1000
        c = self.client
        if cond == "synced":
            await self.synced_once_more(timeout)
            return {"room_id": room_id}
        if cond == "invited":
            def pred():
                if room_id:
                    return room_id if room_id in c.invited_rooms else None
                return next(iter(c.invited_rooms), None)
        elif cond == "joined":
            def pred():
                return room_id if room_id in c.rooms else None
        elif cond == "encrypted":
            def pred():
                r = c.rooms.get(room_id)
                return room_id if r is not None and r.encrypted else None
        elif cond == "member_joined":
            user_id = a.get("user_id") or ""
            if not user_id:
                raise CommandError("member_joined needs user_id")

            def pred():
                r = c.rooms.get(room_id)
                return room_id if r is not None and user_id in r.users else None
        else:
            raise CommandError(f"unknown sync_until condition {cond!r}")
        got = await self.wait_for(pred, timeout, f"{cond} {room_id} {a.get('user_id', '')}".strip())
        return {"room_id": got}

    async def cmd_wait_device(self, a):
        """Wait until this client knows device_id of user_id (from a device-list query), so that
        what it sends next is encrypted for that device too."""
        self.need_login()
        user_id, device_id = a["user_id"], a["device_id"]
        c = self.client

        def pred():
            return any(d.id == device_id for d in c.device_store.active_user_devices(user_id))

        await self.wait_for(pred, a.get("timeout_ms", 30000) / 1000, f"device {device_id} of {user_id}")
        return {}

    def message_content(self, a):
        content = {"msgtype": a.get("msgtype") or "m.text", "body": a["body"]}
        if a.get("html"):
            content["format"] = "org.matrix.custom.html"
            content["formatted_body"] = a["html"]
        if a.get("thread_root"):
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": a["thread_root"],
                "is_falling_back": not a.get("reply_to"),
                "m.in_reply_to": {"event_id": a.get("reply_to") or a["thread_root"]},
            }
        elif a.get("reply_to"):
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": a["reply_to"]}}
        return content

    async def room_send(self, room_id, content, event_type="m.room.message"):
        if room_id not in self.client.rooms:
            raise CommandError(f"not in room {room_id} (join it and let it sync first)")
        # Under the key lock: the sync loop's key upkeep (queries, claims) waits meanwhile.
        async with self.key_lock:
            # Keys of members that just joined, or of their new devices, must be known first.
            if self.client.should_query_keys:
                await self.client.keys_query()
            self.apply_trust()
            resp = await self.client.room_send(room_id, event_type, content,
                                               ignore_unverified_devices=True)
        if not isinstance(resp, RoomSendResponse):
            raise CommandError(f"send to {room_id} failed: {why(resp)}")
        return resp.event_id

    async def cmd_send(self, a):
        self.need_login()
        return {"event_id": await self.room_send(a["room_id"], self.message_content(a))}

    async def cmd_edit(self, a):
        self.need_login()
        new = {"msgtype": a.get("msgtype") or "m.text", "body": a["body"]}
        content = {
            "msgtype": new["msgtype"],
            "body": "* " + a["body"],
            "m.new_content": new,
            "m.relates_to": {"rel_type": "m.replace", "event_id": a["event_id"]},
        }
        return {"event_id": await self.room_send(a["room_id"], content)}

    async def cmd_react(self, a):
        """React to event_id with key (an m.reaction annotating it). nio's room_send, like
        Element, sends reactions unencrypted even in an encrypted room (the relation is in the
        clear anyway); this does what the library does."""
        self.need_login()
        content = {"m.relates_to": {"rel_type": "m.annotation", "event_id": a["event_id"], "key": a["key"]}}
        return {"event_id": await self.room_send(a["room_id"], content, "m.reaction")}

    async def cmd_wait_reaction(self, a):
        """Wait for the oldest reaction in room_id matching the filters (sender, target, key)."""
        self.need_login()

        def pred():
            for r in self.reactions:
                if r.room_id != a["room_id"]:
                    continue
                if any(a.get(k) and getattr(r, k) != a[k] for k in ("sender", "target", "key")):
                    continue
                return r
            return None

        desc = ", ".join(f"{k}={a[k]!r}" for k in ("sender", "target", "key") if a.get(k))
        r = await self.wait_for(pred, a.get("timeout_ms", 30000) / 1000, f"a reaction in {a['room_id']} ({desc})")
        return r.as_json()

    async def cmd_redact(self, a):
        self.need_login()
        resp = await self.client.room_redact(a["room_id"], a["event_id"], reason=a.get("reason") or None)
        if not isinstance(resp, RoomRedactResponse):
            raise CommandError(f"redact {a['event_id']} failed: {why(resp)}")
        return {"event_id": resp.event_id}

    async def cmd_send_image(self, a):
        """Upload an image (encrypted when the room is) and send it as m.image."""
        return await self.cmd_send_file(dict(a, msgtype="m.image", name=a.get("name") or "image"))

    async def cmd_send_file(self, a):
        """Upload data (base64; an encrypted attachment when the room is encrypted, as nio's
        upload with encrypt=True makes it) and send it as a file message: msgtype (m.file when
        empty), name as its body, info with mimetype and size plus the fields of info, the fields
        of content added to the event's content, thread_root and reply_to as for send. voice
        ({"duration_ms", "waveform"}) makes it a voice message as Element sends one: MSC1767's
        text, file and audio, and MSC3245's voice flag. Returns the event id and the upload's
        mxc:// URI."""
        self.need_login()
        room = self.room(a["room_id"])
        if room is None:
            raise CommandError(f"not in room {a['room_id']}")
        data = base64.b64decode(a["data"])
        mimetype = a.get("mimetype") or "application/octet-stream"
        name = a.get("name") or "file"
        upload_name = a.get("filename") or name
        resp, keys = await self.client.upload(io.BytesIO(data), content_type=mimetype, filename=upload_name,
                                              encrypt=room.encrypted, filesize=len(data))
        if not isinstance(resp, UploadResponse):
            raise CommandError(f"upload failed: {why(resp)}")
        content = self.message_content(dict(a, msgtype=a.get("msgtype") or "m.file", body=name, html=""))
        content["info"] = dict(a.get("info") or {}, mimetype=mimetype, size=len(data))
        if a.get("filename"):
            content["filename"] = a["filename"]
        media = {}
        if room.encrypted:
            media["file"] = dict(keys, url=resp.content_uri, mimetype=mimetype)
        else:
            media["url"] = resp.content_uri
        content.update(media)
        voice = a.get("voice")
        if voice is not None:
            duration = int(voice.get("duration_ms") or 0)
            content["info"]["duration"] = duration
            content["org.matrix.msc1767.text"] = name
            content["org.matrix.msc1767.file"] = dict(media, name=upload_name, mimetype=mimetype, size=len(data))
            content["org.matrix.msc1767.audio"] = {"duration": duration, "waveform": list(voice.get("waveform") or [])}
            content["org.matrix.msc3245.voice"] = {}
        for k, v in (a.get("content") or {}).items():
            content[k] = v
        event_id = await self.room_send(a["room_id"], content)
        return {"event_id": event_id, "content_uri": resp.content_uri}

    async def cmd_download(self, a):
        """Download the media of a received message (event_id in room_id), decrypting an
        encrypted attachment; returns it base64-encoded."""
        self.need_login()
        m = self.by_id.get(a["event_id"])
        if m is None or m.room_id != a["room_id"]:
            raise CommandError(f"no message {a['event_id']} seen in {a['room_id']}")
        if m.undecryptable:
            raise CommandError(f"message {m.event_id} is undecryptable")
        file = m.content.get("file") or {}
        url = file.get("url") or m.content.get("url")
        if not url:
            raise CommandError(f"message {m.event_id} has no media")
        resp = await self.client.download(mxc=url)
        if not isinstance(resp, DownloadResponse):
            raise CommandError(f"download {url} failed: {why(resp)}")
        data = resp.body
        if file:
            try:
                data = decrypt_attachment(data, file["key"]["k"], file["hashes"]["sha256"], file["iv"])
            except Exception as e:  # noqa: BLE001
                raise CommandError(f"decrypting the attachment of {m.event_id} failed: {e}") from None
        info = m.content.get("info") or {}
        return {"data": base64.b64encode(data).decode(), "mimetype": info.get("mimetype", ""),
                "name": m.content.get("body", "")}

    async def cmd_trust(self, a):
        self.need_login()
        policy = a.get("policy", "")
        if policy not in ("tofu", "none"):
            raise CommandError(f"unknown trust policy {policy!r} (tofu or none)")
        self.policy = policy
        async with self.key_lock:
            self.apply_trust()
        return {}

    def match(self, m, a, after_seq):
        if m.room_id != a["room_id"] or m.seq <= after_seq:
            return False
        if a.get("event_id") and m.event_id != a["event_id"]:
            return False
        if a.get("sender") and m.sender != a["sender"]:
            return False
        if m.history and not a.get("include_history") and not a.get("event_id"):
            return False
        if a.get("thread_root") and m.thread_root != a["thread_root"]:
            return False
        if m.undecryptable:
            return True  # reported once the grace period is over, unless a decrypted match comes
        if a.get("contains") and a["contains"] not in m.final_body:
            return False
        if a.get("edited") and not m.edits:
            return False
        if a.get("redacted") and not m.redacted:
            return False
        return True

    async def cmd_wait_message(self, a):
        """Wait for the oldest message in room_id matching the filters (sender, contains on the
        final text, event_id, thread_root, after, edited, redacted). Messages older than this
        device's login are skipped unless include_history. An undecryptable candidate is returned
        (undecryptable: true) once it has stayed so for a few seconds or the wait times out."""
        self.need_login()
        timeout = a.get("timeout_ms", 30000) / 1000
        after_seq = -1
        if a.get("after"):
            after = a["after"]
            await self.wait_for(lambda: after in self.seq_of, timeout, f"event {after}")
            after_seq = self.seq_of[after]
        deadline = time.monotonic() + timeout
        grace = a.get("grace_ms", UNDECRYPTABLE_GRACE * 1000) / 1000

        def pred():
            stuck = None
            for m in self.messages:
                if not self.match(m, a, after_seq):
                    continue
                if not m.undecryptable:
                    return m
                if stuck is None:
                    stuck = m
            if stuck is not None and (time.monotonic() - stuck.seen_at >= grace
                                      or time.monotonic() >= deadline - 0.05):
                return stuck
            return None

        async def ticker():
            # Wake the waiter when a grace period ends even if no sync arrives.
            while True:
                await asyncio.sleep(0.25)
                async with self.changed:
                    self.changed.notify_all()

        tick = asyncio.create_task(ticker())
        try:
            desc = ", ".join(f"{k}={a[k]!r}" for k in ("sender", "contains", "event_id", "thread_root",
                                                     "after", "edited", "redacted") if a.get(k))
            m = await self.wait_for(pred, timeout, f"a message in {a['room_id']} ({desc})")
        except CommandError as e:
            raise CommandError(f"{e}; {self.describe_room(a['room_id'])}") from None
        finally:
            tick.cancel()
        return m.as_json()

    def describe_room(self, room_id, n=5):
        """The last messages seen in a room, for a failed wait's error."""
        seen = [m for m in self.messages if m.room_id == room_id]
        if not seen:
            return f"no message seen in {room_id} yet"
        parts = []
        for m in seen[-n:]:
            flags = [f for f, on in (("undecryptable", m.undecryptable), ("history", m.history),
                                     ("redacted", m.redacted)) if on]
            if m.undecryptable_edits:
                flags.append(f"{m.undecryptable_edits} undecryptable edit(s)")
            parts.append(f"{m.event_id} from {m.sender}: {m.final_body[:80]!r}"
                         + (f" [{', '.join(flags)}]" if flags else ""))
        return f"last {len(parts)} of {len(seen)} messages seen in the room: " + "; ".join(parts)

    async def cmd_close(self, a):
        if self.sync_task:
            self.sync_task.cancel()
            try:
                await self.sync_task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001
                pass
        if self.client:
            await self.client.close()
        return {}


async def main():
    sys.stderr = ScrubbingStderr(sys.stderr)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=64 << 20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    c = E2EEClient()

    def reply(obj):
        if "error" in obj:
            obj["error"] = scrub(obj["error"])
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()

    reply({"id": 0, "ok": True, "result": {"ready": True, "kind": "nio"}})
    while True:
        line = await reader.readline()
        if not line:
            await c.cmd_close({})
            return
        try:
            req = json.loads(line)
        except ValueError as e:
            reply({"id": -1, "ok": False, "error": f"bad request line: {e}"})
            continue
        rid, cmd = req.get("id", -1), req.get("cmd", "")
        handler = getattr(c, "cmd_" + cmd, None) if cmd.isidentifier() else None
        if handler is None:
            reply({"id": rid, "ok": False, "error": f"unknown command {cmd!r}"})
            continue
        try:
            result = await handler(req)
            reply({"id": rid, "ok": True, "result": result})
        except CommandError as e:
            reply({"id": rid, "ok": False, "error": str(e)})
        except KeyError as e:
            reply({"id": rid, "ok": False, "error": f"{cmd}: missing argument {e}"})
        except (LocalProtocolError, Exception) as e:  # noqa: BLE001
            log(traceback.format_exc())
            reply({"id": rid, "ok": False, "error": f"{cmd}: {type(e).__name__}: {e}"})
        if cmd == "close":
            return


if __name__ == "__main__":
    asyncio.run(main())
