// An end-to-end encrypted Matrix test client built on matrix-js-sdk with its Rust crypto (the
// wasm build of matrix-sdk-crypto, as in Element). hstest.StartClient runs it with node and
// drives it over stdin/stdout with the same line protocol as ../e2ee_client.py: one JSON request
// per line ({"id": 1, "cmd": "send", ...}), one JSON response per line ({"id": 1, "ok": true,
// "result": {...}} or {"id": 1, "ok": false, "error": "..."}). Only protocol lines go to stdout;
// the SDK's warnings and errors go to stderr (all its logging with HOOKROOM_HSTEST_JS_DEBUG=1), and
// nothing here prints a password or an access token.
//
// Node has no IndexedDB, so the SDK's sync store and the Rust crypto store live in memory. The
// crypto store is fake-indexeddb's, which this script saves into the store directory on close
// and loads back at login (see store.mjs), so a restarted client is still the same device.

import { createInterface } from "node:readline";

// The password and access token: blanked out of everything written to stderr or sent back.
const secrets = new Set();
const scrub = (text) => {
  let out = String(text).replace(/(access_token=)[^&\s'"]+/g, "$1<redacted>");
  for (const secret of secrets) out = out.split(secret).join("<redacted>");
  return out;
};
const stderrWrite = process.stderr.write.bind(process.stderr);
process.stderr.write = (chunk, ...rest) => stderrWrite(scrub(chunk), ...rest);

const debug = process.env.HOOKROOM_HSTEST_JS_DEBUG === "1";
// The SDK logs through console: keep stdout for the protocol, and warnings and errors only (the
// Rust crypto's tracing says a lot at info level) unless debugging.
const toStderr = (...args) => console.error(...args);
console.log = toStderr;
console.info = debug ? toStderr : () => {};
console.warn = toStderr;
console.debug = debug ? toStderr : () => {};
console.trace = debug ? toStderr : () => {};

const out = (obj) => {
  if (obj.error !== undefined) obj.error = scrub(obj.error);
  process.stdout.write(JSON.stringify(obj) + "\n");
};

// Loading the SDK and the wasm takes a while; the ready line goes out when they are loaded.
const sdk = await import("matrix-js-sdk");
const { logger } = await import("matrix-js-sdk/lib/logger.js");
logger.setLevel(debug ? "debug" : "warn");
const store = await import("./store.mjs");

const MEGOLM = "m.megolm.v1.aes-sha2";
const UNDECRYPTABLE_GRACE_MS = 3000;

class CommandError extends Error {}

const state = {
  client: null,
  loginTs: 0,
  storeDir: "",
  policy: "tofu",
  entries: [], // {ev, seq, seenAt, roomId} in arrival order
  byId: new Map(),
  syncs: 0,
  syncError: "",
  waiters: new Set(),
};

function notify() {
  for (const w of state.waiters) w();
}

// waitFor resolves with pred()'s first truthy value, checked now and on every change.
function waitFor(pred, timeoutMs, what) {
  return new Promise((resolve, reject) => {
    const deadline = Date.now() + timeoutMs;
    let timer;
    const check = () => {
      let v;
      try {
        v = pred();
      } catch (e) {
        done();
        reject(e);
        return;
      }
      if (v) {
        done();
        resolve(v);
      } else if (Date.now() >= deadline) {
        done();
        const extra = state.syncError ? ` (last sync error: ${state.syncError})` : "";
        reject(new CommandError(`timed out after ${timeoutMs / 1000}s waiting for ${what}${extra}`));
      }
    };
    const done = () => {
      state.waiters.delete(check);
      clearInterval(timer);
    };
    state.waiters.add(check);
    timer = setInterval(check, 250);
    check();
  });
}

function need() {
  if (!state.client) throw new CommandError("not logged in: send login first");
  return state.client;
}

// ---- what the client has seen -----------------------------------------------------------------

function take(ev, roomId) {
  const id = ev.getId();
  if (!id || id.startsWith("~") || state.byId.has(id)) return;
  const entry = { ev, roomId, seq: state.entries.length, seenAt: Date.now() };
  state.entries.push(entry);
  state.byId.set(id, entry);
  if (ev.shouldAttemptDecryption()) {
    state.client.decryptEventIfNeeded(ev).catch(() => {});
  }
}

function relation(ev) {
  const clear = ev.isEncrypted() ? ev.getClearContent() : ev.getContent();
  return (clear && clear["m.relates_to"]) || ev.getWireContent()["m.relates_to"] || {};
}

function pending(ev) {
  return ev.isBeingDecrypted() || (ev.isEncrypted() && !ev.getClearContent() && !ev.isDecryptionFailure());
}

// A redacted event has lost its content, encrypted or not: it is not waiting for a key.
function undecryptable(ev) {
  return ev.isEncrypted() && !ev.isRedacted() && (ev.isDecryptionFailure() || pending(ev));
}

// kind is "message", "edit" or "" (anything else) for an entry. It sticks once known, as a
// redaction strips the type and relation that tell.
function kind(entry) {
  if (entry.kind !== undefined) return entry.kind;
  const ev = entry.ev;
  if (ev.isRedacted()) return "";
  let k;
  if (undecryptable(ev)) {
    // Only messages are encrypted here (m.relates_to stays in the clear).
    k = ev.getWireContent()["m.relates_to"]?.rel_type === "m.replace" ? "edit" : "message";
  } else if (ev.getType() !== "m.room.message") {
    k = "";
  } else {
    k = relation(ev).rel_type === "m.replace" ? "edit" : "message";
  }
  entry.kind = k;
  return k;
}

function describe(entry) {
  const ev = entry.ev;
  const rel = relation(ev);
  const bad = undecryptable(ev);
  const content = bad ? {} : ev.getOriginalContent() || {};
  const edits = [];
  let undecryptableEdits = 0;
  for (const e of state.entries) {
    if (e.seq <= entry.seq || e.roomId !== entry.roomId || kind(e) !== "edit") continue;
    if (e.ev.getSender() !== ev.getSender()) continue;
    if (undecryptable(e.ev)) {
      if ((e.ev.getWireContent()["m.relates_to"] || {}).event_id === ev.getId()) undecryptableEdits++;
      continue;
    }
    const r = relation(e.ev);
    if (r.event_id !== ev.getId()) continue;
    const nc = (e.ev.getOriginalContent() || {})["m.new_content"] || {};
    edits.push([e.ev.getId(), nc.body ?? ""]);
  }
  const file = content.file || {};
  const res = {
    room_id: entry.roomId,
    event_id: ev.getId(),
    sender: ev.getSender(),
    origin_server_ts: ev.getTs(),
    msgtype: content.msgtype || "",
    body: content.body ?? "",
    final_body: edits.length ? edits[edits.length - 1][1] : content.body ?? "",
    encrypted: ev.isEncrypted(),
    undecryptable: bad,
    decrypt_error: bad
      ? pending(ev)
        ? "still waiting for the room key"
        : `${ev.decryptionFailureReason}: ${(ev.getContent() || {}).body || ""}`
      : "",
    thread_root: rel.rel_type === "m.thread" ? rel.event_id || "" : "",
    reply_to: (rel["m.in_reply_to"] || {}).event_id || "",
    edits: edits.length,
    last_edit_id: edits.length ? edits[edits.length - 1][0] : "",
    undecryptable_edits: undecryptableEdits,
    redacted: ev.isRedacted(),
    history: ev.getTs() < state.loginTs,
  };
  if (content.formatted_body !== undefined) res.formatted_body = content.formatted_body;
  if (file.url || content.url) {
    res.media_url = file.url || content.url;
    res.media_encrypted = Boolean(file.url);
  }
  return res;
}

function describeRoom(roomId, n = 5) {
  const seen = state.entries.filter((e) => e.roomId === roomId && kind(e) === "message");
  if (!seen.length) return `no message seen in ${roomId} yet`;
  const parts = seen.slice(-n).map((e) => {
    const d = describe(e);
    const flags = [];
    if (d.undecryptable) flags.push(`undecryptable: ${d.decrypt_error}`);
    if (d.history) flags.push("history");
    if (d.redacted) flags.push("redacted");
    if (d.undecryptable_edits) flags.push(`${d.undecryptable_edits} undecryptable edit(s)`);
    return `${d.event_id} from ${d.sender}: ${JSON.stringify(d.final_body.slice(0, 80))}${flags.length ? ` [${flags.join(", ")}]` : ""}`;
  });
  return `last ${parts.length} of ${seen.length} messages seen in the room: ${parts.join("; ")}`;
}

// ---- commands ---------------------------------------------------------------------------------

const commands = {
  async login(a) {
    if (state.client) throw new CommandError("already logged in");
    const { url, user_id: userId } = a;
    if (a.password) secrets.add(a.password);
    state.password = a.password || "";
    const timeoutMs = a.timeout_ms ?? 30000;
    let session = a.store_dir ? await store.loadSession(a.store_dir) : null;
    if (session && session.user_id !== userId) {
      throw new CommandError(`store ${a.store_dir} belongs to ${session.user_id}, not ${userId}`);
    }
    if (session && a.device_id && a.device_id !== session.device_id) {
      throw new CommandError(`store ${a.store_dir} holds device ${session.device_id}, not ${a.device_id}`);
    }
    let restored = true;
    if (!session) {
      restored = false;
      const loginTs = Date.now();
      const anon = sdk.createClient({ baseUrl: url });
      let resp;
      try {
        resp = await anon.loginRequest({
          type: "m.login.password",
          identifier: { type: "m.id.user", user: userId },
          password: a.password,
          initial_device_display_name: a.device_name || "hstest-js",
          ...(a.device_id ? { device_id: a.device_id } : {}),
        });
      } catch (e) {
        throw new CommandError(`login as ${userId} failed: ${e.errcode || ""} ${e.message}`);
      }
      session = { user_id: resp.user_id, device_id: resp.device_id, access_token: resp.access_token, login_ts: loginTs };
    }
    secrets.add(session.access_token);
    state.storeDir = a.store_dir || "";
    state.loginTs = session.login_ts;
    if (restored) await store.loadCryptoStore(a.store_dir);
    const client = sdk.createClient({
      baseUrl: url,
      userId: session.user_id,
      deviceId: session.device_id,
      accessToken: session.access_token,
      store: new sdk.MemoryStore(),
      timelineSupport: false,
    });
    state.client = client;
    await client.initRustCrypto(store.rustCryptoOptions());
    if (!restored && state.storeDir) await store.saveSession(state.storeDir, session);

    client.on(sdk.RoomEvent.Timeline, (ev, room) => {
      if (room) take(ev, room.roomId);
      notify();
    });
    // This client's own messages: the local echo gets its real id when the server has it.
    client.on(sdk.RoomEvent.LocalEchoUpdated, (ev, room) => {
      if (room) take(ev, room.roomId);
      notify();
    });
    client.on(sdk.MatrixEventEvent.Decrypted, () => notify());
    client.on(sdk.RoomMemberEvent.Membership, () => notify());
    client.on(sdk.RoomEvent.MyMembership, () => notify());
    client.on(sdk.ClientEvent.Room, () => notify());
    client.on(sdk.ClientEvent.Sync, (s, _prev, data) => {
      if (s === "ERROR" || s === "RECONNECTING") {
        state.syncError = `sync ${s}: ${data?.error?.message || ""}`;
        console.error(`client.mjs: ${state.syncError}`);
      } else {
        state.syncError = "";
      }
      if (s === "PREPARED" || s === "SYNCING") state.syncs++;
      notify();
    });
    // Thread support off: thread replies stay in the room's main timeline like any message.
    const filter = new sdk.Filter(session.user_id);
    filter.setDefinition({ room: { timeline: { limit: 500 } } });
    await client.startClient({ initialSyncLimit: 50, threadSupport: false, filter, pollTimeout: 10000 });
    await waitFor(() => state.syncs >= 1, timeoutMs, "the first sync");
    const keys = await client.getCrypto().getOwnDeviceKeys();
    return {
      user_id: session.user_id,
      device_id: session.device_id,
      restored,
      ed25519: keys.ed25519,
      curve25519: keys.curve25519,
    };
  },

  async create_room(a) {
    const client = need();
    const opts = {
      name: a.name || undefined,
      invite: a.invite || [],
      is_direct: Boolean(a.is_direct),
      preset: a.is_direct ? sdk.Preset.TrustedPrivateChat : sdk.Preset.PrivateChat,
      initial_state: a.encrypted
        ? [{ type: "m.room.encryption", state_key: "", content: { algorithm: MEGOLM } }]
        : [],
    };
    const { room_id: roomId } = await client.createRoom(opts);
    await waitFor(
      () => {
        const room = client.getRoom(roomId);
        return room && room.getMyMembership() === "join" && room.hasEncryptionStateEvent() === Boolean(a.encrypted);
      },
      a.timeout_ms ?? 30000,
      `room ${roomId} in the sync`,
    );
    return { room_id: roomId };
  },

  async invite(a) {
    await need().invite(a.room_id, a.user_id);
    return {};
  },

  async join(a) {
    const client = need();
    const room = await client.joinRoom(a.room_id);
    const roomId = room.roomId;
    await waitFor(
      () => client.getRoom(roomId)?.getMyMembership() === "join",
      a.timeout_ms ?? 30000,
      `joined room ${roomId} in the sync`,
    );
    return { room_id: roomId };
  },

  async sync_until(a) {
    const client = need();
    const roomId = a.room_id || "";
    const timeoutMs = a.timeout_ms ?? 30000;
    let pred;
    switch (a.condition) {
      case "synced": {
        const start = state.syncs;
        pred = () => state.syncs >= start + 2 && (roomId || true);
        break;
      }
      case "invited":
        pred = () => {
          const rooms = client.getRooms().filter((r) => r.getMyMembership() === "invite");
          if (roomId) return rooms.some((r) => r.roomId === roomId) && roomId;
          return rooms.length ? rooms[0].roomId : null;
        };
        break;
      case "joined":
        pred = () => client.getRoom(roomId)?.getMyMembership() === "join" && roomId;
        break;
      case "encrypted":
        pred = () => client.getRoom(roomId)?.hasEncryptionStateEvent() && roomId;
        break;
      case "member_joined":
        if (!a.user_id) throw new CommandError("member_joined needs user_id");
        pred = () => client.getRoom(roomId)?.getMember(a.user_id)?.membership === "join" && roomId;
        break;
      default:
        throw new CommandError(`unknown sync_until condition ${JSON.stringify(a.condition)}`);
    }
    const got = await waitFor(pred, timeoutMs, `${a.condition} ${roomId} ${a.user_id || ""}`.trim());
    return { room_id: got === true ? roomId : got };
  },

  // wait_device waits until this client knows device_id of user_id, so that what it sends next
  // is encrypted for that device too.
  async wait_device(a) {
    const crypto = need().getCrypto();
    const deadline = Date.now() + (a.timeout_ms ?? 30000);
    for (;;) {
      const devices = await crypto.getUserDeviceInfo([a.user_id], true);
      if (devices.get(a.user_id)?.has(a.device_id)) return {};
      if (Date.now() >= deadline) {
        throw new CommandError(`timed out waiting for device ${a.device_id} of ${a.user_id}`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  },

  async send(a) {
    const content = { msgtype: a.msgtype || "m.text", body: a.body };
    if (a.html) {
      content.format = "org.matrix.custom.html";
      content.formatted_body = a.html;
    }
    if (a.thread_root) {
      content["m.relates_to"] = {
        rel_type: "m.thread",
        event_id: a.thread_root,
        is_falling_back: !a.reply_to,
        "m.in_reply_to": { event_id: a.reply_to || a.thread_root },
      };
    } else if (a.reply_to) {
      content["m.relates_to"] = { "m.in_reply_to": { event_id: a.reply_to } };
    }
    return { event_id: await roomSend(a.room_id, content) };
  },

  async edit(a) {
    const msgtype = a.msgtype || "m.text";
    const content = {
      msgtype,
      body: `* ${a.body}`,
      "m.new_content": { msgtype, body: a.body },
      "m.relates_to": { rel_type: "m.replace", event_id: a.event_id },
    };
    return { event_id: await roomSend(a.room_id, content) };
  },

  // react annotates event_id with key (an m.reaction). matrix-js-sdk, like Element, sends
  // reactions unencrypted even in an encrypted room (the relation is in the clear anyway);
  // this does what the SDK does.
  async react(a) {
    const content = { "m.relates_to": { rel_type: "m.annotation", event_id: a.event_id, key: a.key } };
    return { event_id: await roomSend(a.room_id, content, "m.reaction") };
  },

  // wait_reaction waits for the oldest reaction in room_id matching sender, target and key.
  async wait_reaction(a) {
    need();
    const pred = () => {
      for (const e of state.entries) {
        const ev = e.ev;
        if (e.roomId !== a.room_id || ev.isRedacted() || ev.getType() !== "m.reaction") continue;
        const rel = relation(ev);
        if (rel.rel_type !== "m.annotation") continue;
        if (a.sender && ev.getSender() !== a.sender) continue;
        if (a.target && rel.event_id !== a.target) continue;
        if (a.key && rel.key !== a.key) continue;
        return e;
      }
      return null;
    };
    const desc = ["sender", "target", "key"]
      .filter((k) => a[k])
      .map((k) => `${k}=${JSON.stringify(a[k])}`)
      .join(", ");
    const e = await waitFor(pred, a.timeout_ms ?? 30000, `a reaction in ${a.room_id} (${desc})`);
    const rel = relation(e.ev);
    return {
      room_id: e.roomId,
      event_id: e.ev.getId(),
      sender: e.ev.getSender(),
      target: rel.event_id || "",
      key: rel.key || "",
      encrypted: e.ev.isEncrypted(),
    };
  },

  async redact(a) {
    const resp = await need().redactEvent(a.room_id, a.event_id, undefined, a.reason ? { reason: a.reason } : undefined);
    return { event_id: resp.event_id };
  },

  // send_image uploads data (base64), encrypted as an attachment when the room is encrypted,
  // and sends it as m.image.
  async send_image(a) {
    const client = need();
    const room = client.getRoom(a.room_id);
    if (!room || room.getMyMembership() !== "join") throw new CommandError(`not in room ${a.room_id}`);
    const plain = Buffer.from(a.data, "base64");
    const mimetype = a.mimetype || "application/octet-stream";
    const name = a.name || "image";
    const encrypted = await client.getCrypto().isEncryptionEnabledInRoom(a.room_id);
    const { data, file } = encrypted ? await encryptAttachment(plain) : { data: plain, file: null };
    const { content_uri: uri } = await client.uploadContent(data, {
      name,
      type: encrypted ? "application/octet-stream" : mimetype,
      includeFilename: !encrypted,
    });
    const content = { msgtype: "m.image", body: name, info: { mimetype, size: plain.length } };
    if (file) content.file = { ...file, url: uri, mimetype };
    else content.url = uri;
    return { event_id: await roomSend(a.room_id, content), content_uri: uri };
  },

  // download fetches the media of a received message (authenticated media), decrypting an
  // encrypted attachment; the data comes back base64-encoded.
  async download(a) {
    const client = need();
    const entry = state.byId.get(a.event_id);
    if (!entry || entry.roomId !== a.room_id) throw new CommandError(`no message ${a.event_id} seen in ${a.room_id}`);
    if (undecryptable(entry.ev)) throw new CommandError(`message ${a.event_id} is undecryptable`);
    const content = entry.ev.getOriginalContent();
    const file = content.file;
    const mxc = file?.url || content.url;
    if (!mxc) throw new CommandError(`message ${a.event_id} has no media`);
    const url = client.mxcUrlToHttp(mxc, undefined, undefined, undefined, false, true, true);
    const resp = await fetch(url, { headers: { Authorization: `Bearer ${client.getAccessToken()}` } });
    if (!resp.ok) throw new CommandError(`download ${mxc} failed: HTTP ${resp.status} ${await resp.text()}`);
    let data = Buffer.from(await resp.arrayBuffer());
    if (file) data = await decryptAttachment(data, file);
    return { data: data.toString("base64"), mimetype: content.info?.mimetype || "", name: content.body || "" };
  },

  async trust(a) {
    need();
    if (a.policy !== "tofu" && a.policy !== "none") {
      throw new CommandError(`unknown trust policy ${JSON.stringify(a.policy)} (tofu or none)`);
    }
    state.policy = a.policy;
    return {};
  },

  async wait_message(a) {
    need();
    const timeoutMs = a.timeout_ms ?? 30000;
    const graceMs = a.grace_ms ?? UNDECRYPTABLE_GRACE_MS;
    const deadline = Date.now() + timeoutMs;
    let afterSeq = -1;
    if (a.after) {
      const anchor = await waitFor(() => state.byId.get(a.after), timeoutMs, `event ${a.after}`);
      afterSeq = anchor.seq;
    }
    const matches = (e) => {
      if (e.roomId !== a.room_id || e.seq <= afterSeq || kind(e) !== "message") return false;
      const ev = e.ev;
      if (a.event_id && ev.getId() !== a.event_id) return false;
      if (a.sender && ev.getSender() !== a.sender) return false;
      if (ev.getTs() < state.loginTs && !a.include_history && !a.event_id) return false;
      if (a.thread_root) {
        const rel = relation(ev);
        if (rel.rel_type !== "m.thread" || rel.event_id !== a.thread_root) return false;
      }
      if (undecryptable(ev)) return true;
      const d = describe(e);
      if (a.contains && !d.final_body.includes(a.contains)) return false;
      if (a.edited && !d.edits) return false;
      if (a.redacted && !d.redacted) return false;
      return true;
    };
    const pred = () => {
      let stuck = null;
      for (const e of state.entries) {
        if (!matches(e)) continue;
        if (!undecryptable(e.ev)) return e;
        stuck ??= e;
      }
      if (stuck && (Date.now() - stuck.seenAt >= graceMs || Date.now() >= deadline - 50)) return stuck;
      return null;
    };
    const desc = ["sender", "contains", "event_id", "thread_root", "after", "edited", "redacted"]
      .filter((k) => a[k])
      .map((k) => `${k}=${JSON.stringify(a[k])}`)
      .join(", ");
    try {
      return describe(await waitFor(pred, timeoutMs, `a message in ${a.room_id} (${desc})`));
    } catch (e) {
      if (e instanceof CommandError) throw new CommandError(`${e.message}; ${describeRoom(a.room_id)}`);
      throw e;
    }
  },

  // bootstrap_cross_signing gives this user cross-signing keys (master, self-signing and
  // user-signing; uploaded with the login password), so it can verify other users.
  async bootstrap_cross_signing() {
    const client = need();
    const crypto = client.getCrypto();
    await crypto.bootstrapCrossSigning({
      authUploadDeviceSigningKeys: async (makeRequest) => {
        await makeRequest({
          type: "m.login.password",
          identifier: { type: "m.id.user", user: client.getUserId() },
          password: state.password,
        });
      },
    });
    const status = await crypto.getCrossSigningStatus();
    return { ready: await crypto.isCrossSigningReady(), private_keys_cached: status.privateKeysCachedLocally.masterKey };
  },

  // verify_user asks user_id to verify in room_id (Element's "Verify user": an in-room request;
  // with device_id instead a to-device request to that device),
  // waits until the other side accepts, starts emoji (SAS) verification and returns the emoji
  // and decimals this client shows. verify_confirm then confirms them.
  async verify_user(a) {
    const client = need();
    const crypto = client.getCrypto();
    const timeoutMs = a.timeout_ms ?? 30000;
    await crypto.getUserDeviceInfo([a.user_id], true);
    // With device_id: a to-device request to that device (Element's "Verify session").
    const request = a.device_id
      ? await crypto.requestDeviceVerification(a.user_id, a.device_id)
      : await crypto.requestVerificationDM(a.user_id, a.room_id);
    state.verification = { request, verifier: null, sas: null, done: null };
    request.on("change", () => notify());
    // Phases: 3 ready, 4 started, 5 cancelled, 6 done.
    const phase = await waitFor(() => (request.phase >= 3 ? request.phase : 0), timeoutMs, `${a.user_id} to accept the verification`);
    if (phase === 5) {
      throw new CommandError(`verification cancelled: ${request.cancellationCode || ""}`);
    }
    const verifier = await request.startVerification("m.sas.v1");
    state.verification.verifier = verifier;
    verifier.on("show_sas", (sas) => {
      state.verification.sas = sas;
      notify();
    });
    state.verification.done = verifier.verify().then(
      () => "done",
      (e) => `failed: ${e.message}`,
    );
    state.verification.done.then(() => notify());
    const sas = await waitFor(
      () => state.verification.sas || verifier.getShowSasCallbacks() || (request.phase === 5 ? { cancelled: true } : null),
      timeoutMs,
      "the emoji to compare",
    );
    if (sas.cancelled) throw new CommandError(`verification cancelled: ${request.cancellationCode || ""}`);
    state.verification.sas = sas;
    return {
      emoji: (sas.sas.emoji || []).map(([emoji, name]) => ({ emoji, name })),
      decimals: sas.sas.decimal || [],
    };
  },

  // verify_confirm confirms the emoji verify_user returned and waits until the verification is done.
  async verify_confirm(a) {
    need();
    const v = state.verification;
    if (!v?.sas) throw new CommandError("no verification shows emoji: send verify_user first");
    await v.sas.confirm();
    const outcome = await Promise.race([
      v.done,
      new Promise((resolve) => setTimeout(() => resolve("timed out"), a.timeout_ms ?? 30000)),
    ]);
    if (outcome !== "done") throw new CommandError(`verification not done: ${outcome}`);
    return { phase: v.request.phase };
  },

  // verify_request asks user_id to verify in room_id and waits for the answer: accepted (phase 3)
  // or cancelled (phase 5, with the other side's code).
  async verify_request(a) {
    const client = need();
    const crypto = client.getCrypto();
    await crypto.getUserDeviceInfo([a.user_id], true);
    const request = await crypto.requestVerificationDM(a.user_id, a.room_id);
    request.on("change", () => notify());
    const phase = await waitFor(() => (request.phase >= 3 ? request.phase : 0), a.timeout_ms ?? 30000, `${a.user_id} to answer the verification request`);
    return { phase, cancelled: phase === 5, code: request.cancellationCode || "" };
  },

  // verification_status says how this client sees user_id and its device_id: whether the user's
  // identity is verified (signed by this user's user-signing key) and the device cross-signed.
  async verification_status(a) {
    const crypto = need().getCrypto();
    await crypto.getUserDeviceInfo([a.user_id], true);
    const user = await crypto.getUserVerificationStatus(a.user_id);
    const dev = a.device_id ? await crypto.getDeviceVerificationStatus(a.user_id, a.device_id) : null;
    return {
      user_verified: user.isCrossSigningVerified(),
      device_cross_signing_verified: Boolean(dev?.crossSigningVerified),
      device_signed_by_owner: Boolean(dev?.signedByOwner),
    };
  },

  async close() {
    const client = state.client;
    if (client) {
      client.stopClient();
      if (state.storeDir) await store.saveCryptoStore(state.storeDir);
    }
    return {};
  },
};

async function roomSend(roomId, content, type = "m.room.message") {
  const client = need();
  const room = client.getRoom(roomId);
  if (!room || room.getMyMembership() !== "join") {
    throw new CommandError(`not in room ${roomId} (join it and let it sync first)`);
  }
  if (state.policy === "tofu") await trustMembers(room);
  const resp = await client.sendEvent(roomId, type, content);
  return resp.event_id;
}

// Encrypted attachments (the spec's v2 format): AES-256-CTR with a random key and a 64-bit
// random IV prefix, and the SHA-256 of the ciphertext, all with WebCrypto.
const b64 = (buf) => Buffer.from(buf).toString("base64").replace(/=+$/, "");

async function encryptAttachment(plain) {
  const subtle = globalThis.crypto.subtle;
  const iv = new Uint8Array(16);
  globalThis.crypto.getRandomValues(iv.subarray(0, 8));
  const key = await subtle.generateKey({ name: "AES-CTR", length: 256 }, true, ["encrypt", "decrypt"]);
  const jwk = await subtle.exportKey("jwk", key);
  const data = Buffer.from(await subtle.encrypt({ name: "AES-CTR", counter: iv, length: 64 }, key, plain));
  const sha256 = await subtle.digest("SHA-256", data);
  return {
    data,
    file: {
      v: "v2",
      key: { kty: "oct", alg: "A256CTR", ext: true, key_ops: ["encrypt", "decrypt"], k: jwk.k },
      iv: b64(iv),
      hashes: { sha256: b64(sha256) },
    },
  };
}

async function decryptAttachment(data, file) {
  const subtle = globalThis.crypto.subtle;
  const want = (file.hashes?.sha256 || "").replace(/=+$/, "");
  if (b64(await subtle.digest("SHA-256", data)) !== want) throw new CommandError("attachment hash mismatch");
  const key = await subtle.importKey("jwk", { kty: "oct", alg: "A256CTR", k: file.key.k, ext: true }, "AES-CTR", false, ["decrypt"]);
  const iv = Buffer.from(file.iv, "base64");
  return Buffer.from(await subtle.decrypt({ name: "AES-CTR", counter: iv, length: 64 }, key, data));
}

// trustMembers marks every known device of the room's other members as verified (trust on first
// use). Unverified devices get room keys anyway; this only changes how they are shown.
async function trustMembers(room) {
  const client = state.client;
  const crypto = client.getCrypto();
  const others = room.getJoinedMembers().map((m) => m.userId).filter((u) => u !== client.getUserId());
  if (!others.length) return;
  const devices = await crypto.getUserDeviceInfo(others, true);
  for (const [userId, byId] of devices) {
    for (const [deviceId, device] of byId) {
      const status = await crypto.getDeviceVerificationStatus(userId, deviceId);
      if (!status?.localVerified) await crypto.setDeviceVerified(userId, device.deviceId, true);
    }
  }
}

// ---- the line loop ----------------------------------------------------------------------------

out({ id: 0, ok: true, result: { ready: true, kind: "js" } });
const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
let closing = false;
for await (const line of rl) {
  if (!line.trim()) continue;
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    out({ id: -1, ok: false, error: `bad request line: ${e.message}` });
    continue;
  }
  const id = req.id ?? -1;
  const handler = Object.hasOwn(commands, req.cmd) ? commands[req.cmd] : null;
  if (!handler) {
    out({ id, ok: false, error: `unknown command ${JSON.stringify(req.cmd)}` });
    continue;
  }
  try {
    out({ id, ok: true, result: await handler(req) });
  } catch (e) {
    if (!(e instanceof CommandError)) console.error(`client.mjs: ${req.cmd}:`, e);
    const detail = e.errcode ? `${e.errcode} (HTTP ${e.httpStatus}): ` : "";
    out({ id, ok: false, error: `${e instanceof CommandError ? "" : `${req.cmd}: `}${detail}${e.message}` });
  }
  if (req.cmd === "close") {
    closing = true;
    break;
  }
}
if (!closing) await commands.close();
process.exit(0);
