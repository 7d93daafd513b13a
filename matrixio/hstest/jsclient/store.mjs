// Persistence of the js client's device between runs (see client.mjs).
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { join } from "node:path";

const SESSION = "hstest-session.json";

export async function loadSession(dir) {
  try {
    return JSON.parse(await readFile(join(dir, SESSION), "utf8"));
  } catch (e) {
    if (e.code === "ENOENT") return null;
    throw e;
  }
}

export async function saveSession(dir, session) {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const tmp = join(dir, SESSION + ".tmp");
  await writeFile(tmp, JSON.stringify(session), { mode: 0o600 });
  await rename(tmp, join(dir, SESSION));
}

export function rustCryptoOptions() {
  return { useIndexedDB: false };
}

export async function loadCryptoStore(_dir) {}
export async function saveCryptoStore(_dir) {}
