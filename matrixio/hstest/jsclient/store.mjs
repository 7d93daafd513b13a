// Persistence of the js client's device between runs (see client.mjs).
//
// Node has no IndexedDB. fake-indexeddb provides one in memory, which the Rust crypto store
// (matrix-sdk-indexeddb) uses as it would in a browser. On close, saveCryptoStore copies every
// database (schema and records, through the public IndexedDB API) into one file in the store
// directory, serialised with v8's structured clone; loadCryptoStore recreates the databases
// before the crypto starts. The session (user, device, access token, first login time) sits
// beside it. A js client that is killed instead of closed loses what changed since it started.

import "fake-indexeddb/auto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { deserialize, serialize } from "node:v8";

const SESSION = "hstest-session.json";
const CRYPTO_DUMP = "hstest-js-crypto.v8";

async function writeAtomic(dir, name, data) {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, name + ".tmp");
  await writeFile(tmp, data, { mode: 0o600 });
  await rename(tmp, join(dir, name));
}

async function readOrNull(path, encoding) {
  try {
    return await readFile(path, encoding);
  } catch (e) {
    if (e.code === "ENOENT") return null;
    throw e;
  }
}

// loadSession returns the saved session, or null when there is none or the crypto store that
// belongs to it is missing (then the device cannot be used again: log in anew).
export async function loadSession(dir) {
  const text = await readOrNull(join(dir, SESSION), "utf8");
  if (text === null) return null;
  if ((await readOrNull(join(dir, CRYPTO_DUMP))) === null) return null;
  return JSON.parse(text);
}

export async function saveSession(dir, session) {
  await writeAtomic(dir, SESSION, JSON.stringify(session));
}

export function rustCryptoOptions() {
  return { useIndexedDB: true };
}

const request = (req) =>
  new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });

const done = (tx) =>
  new Promise((resolve, reject) => {
    tx.oncomplete = () => resolve();
    tx.onerror = () => reject(tx.error);
    tx.onabort = () => reject(tx.error || new Error("transaction aborted"));
  });

// saveCryptoStore writes every IndexedDB database into dir.
export async function saveCryptoStore(dir) {
  const dump = [];
  for (const { name, version } of await indexedDB.databases()) {
    const db = await request(indexedDB.open(name));
    const names = [...db.objectStoreNames];
    const stores = [];
    if (names.length) {
      const tx = db.transaction(names, "readonly");
      for (const storeName of names) {
        const os = tx.objectStore(storeName);
        const indexes = [...os.indexNames].map((n) => {
          const ix = os.index(n);
          return { name: n, keyPath: ix.keyPath, unique: ix.unique, multiEntry: ix.multiEntry };
        });
        const [keys, values] = await Promise.all([request(os.getAllKeys()), request(os.getAll())]);
        stores.push({ name: storeName, keyPath: os.keyPath, autoIncrement: os.autoIncrement, indexes, keys, values });
      }
      await done(tx);
    }
    db.close();
    dump.push({ name, version, stores });
  }
  await writeAtomic(dir, CRYPTO_DUMP, serialize(dump));
}

// loadCryptoStore recreates the databases saved by saveCryptoStore.
export async function loadCryptoStore(dir) {
  const data = await readOrNull(join(dir, CRYPTO_DUMP));
  if (data === null) throw new Error(`no saved crypto store in ${dir}`);
  for (const { name, version, stores } of deserialize(data)) {
    const req = indexedDB.open(name, version);
    req.onupgradeneeded = () => {
      const db = req.result;
      for (const s of stores) {
        const os = db.createObjectStore(s.name, {
          keyPath: s.keyPath ?? undefined,
          autoIncrement: s.autoIncrement,
        });
        for (const ix of s.indexes) os.createIndex(ix.name, ix.keyPath, { unique: ix.unique, multiEntry: ix.multiEntry });
      }
    };
    const db = await request(req);
    if (stores.length) {
      const tx = db.transaction(
        stores.map((s) => s.name),
        "readwrite",
      );
      for (const s of stores) {
        const os = tx.objectStore(s.name);
        s.values.forEach((v, i) => (s.keyPath == null ? os.put(v, s.keys[i]) : os.put(v)));
      }
      await done(tx);
    }
    db.close();
  }
}
