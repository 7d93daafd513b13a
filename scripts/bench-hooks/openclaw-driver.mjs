// openclaw-driver.mjs benchmarks OpenClaw's compiled plugin hook runner (the
// npm package "openclaw", installed by scripts/bench-hooks.sh) with N
// registered no-op hooks per mode, the same modes and sizes as hookroom's
// hooks/bench_test.go. It calls the runner directly: no gateway, no plugin
// loader. Nothing of OpenClaw is copied here; the runner is found in the
// installed package's dist/ at run time.
//
// Usage: node openclaw-driver.mjs PACKAGE_DIR [SIZES] [MIN_MS]
// Prints one line per case: MODE HOOKS NS_PER_EMISSION ITERATIONS
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const [pkgDir, sizesArg = "1,10,50", minMsArg = "1000"] = process.argv.slice(2);
if (!pkgDir) {
  console.error("usage: node openclaw-driver.mjs PACKAGE_DIR [SIZES] [MIN_MS]");
  process.exit(2);
}
const sizes = sizesArg.split(",").map(Number);
const minNs = BigInt(Number(minMsArg) * 1e6);

// The runner lives in a content-hashed chunk; find the chunk that defines
// createHookRunner and the name it is exported under.
async function loadRunner() {
  const dist = join(pkgDir, "dist");
  for (const f of readdirSync(dist)) {
    if (!f.endsWith(".mjs")) continue;
    const src = readFileSync(join(dist, f), "utf8");
    if (!src.includes("function createHookRunner(")) continue;
    const m = src.match(/createHookRunner as (\w+)/);
    if (!m) continue;
    const mod = await import(pathToFileURL(join(dist, f)).href);
    if (typeof mod[m[1]] === "function") return { create: mod[m[1]], chunk: f };
  }
  throw new Error(`no createHookRunner export found in ${dist}`);
}

// One case per hookroom mode: the OpenClaw hook of the same shape, its
// no-op handler and how to emit once.
const modes = {
  // observer: void hook (OpenClaw runs these in parallel).
  observer: {
    hook: "message_received",
    handler: () => undefined,
    emit: (r) => r.runMessageReceived({ from: "@u:x", content: "hi" }, { channelId: "matrix" }),
  },
  // transformer: modifying hook, sequential, results merged.
  transformer: {
    hook: "message_sending",
    handler: () => ({ content: "x" }),
    emit: (r) => r.runMessageSending({ to: "!r:x", content: "hello" }, { channelId: "matrix" }),
  },
  // gate: before_tool_call, sequential, first block stops; each handler
  // gets its own clone of the event (OpenClaw's isolateEventPerHandler).
  gate: {
    hook: "before_tool_call",
    handler: () => undefined,
    emit: (r) => r.runBeforeToolCall({ toolName: "read_file", params: { path: "/tmp/x" } }, { agentId: "a" }),
  },
  // claim: first { handled: true } wins; the no-op hooks all decline.
  claim: {
    hook: "inbound_claim",
    handler: () => undefined,
    emit: (r) => r.runInboundClaim({ content: "hi", channel: "matrix" }, { channelId: "matrix" }),
  },
  // collector: context enrichment (before_prompt_build merges every
  // hook's prependContext; OpenClaw runs them sequentially).
  collector: {
    hook: "before_prompt_build",
    handler: () => ({ prependContext: "k=v" }),
    emit: (r) => r.runBeforePromptBuild({ prompt: "hi" }, { agentId: "a" }),
  },
};

const { create, chunk } = await loadRunner();
console.error(`openclaw hook runner: dist/${chunk}`);
for (const [mode, m] of Object.entries(modes)) {
  for (const n of sizes) {
    const typedHooks = [];
    for (let i = 0; i < n; i++) {
      typedHooks.push({ hookName: m.hook, pluginId: `bench${i}`, handler: m.handler, priority: 0, source: "bench" });
    }
    const runner = create({ typedHooks, plugins: [] }, {});
    // Warm up so the JIT has compiled the path.
    for (let i = 0; i < 20000; i++) await m.emit(runner);
    let iters = 0;
    let elapsed = 0n;
    let batch = 1000;
    while (elapsed < minNs) {
      const start = process.hrtime.bigint();
      for (let i = 0; i < batch; i++) await m.emit(runner);
      elapsed += process.hrtime.bigint() - start;
      iters += batch;
      batch = Math.min(batch * 2, 100000);
    }
    console.log(`${mode} ${n} ${(Number(elapsed) / iters).toFixed(1)} ${iters}`);
  }
}
