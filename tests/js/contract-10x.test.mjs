// The plugin against OpenClaw's newest context-engine contract (2026.10.x/11.x, met on paper: openclaw/openclaw
// docs/concepts/context-engine.md, src/context-engine/registry-contract.ts), and provider-native compaction
// checkpoints (2026.10.2+: `providerReplay` on an assistant message; types from src/agents/transcript-redact-replay.ts).
// Run: node --test tests/js/   (tests/test_lean.py runs it from pytest)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PLUGIN = path.join(HERE, "..", "..", "occd", "lean", "plugin");
const mod = await import(path.join(PLUGIN, "index.js"));
const { leanView, isCompactionCheckpoint, PROVIDER_COMPACTION_TYPES } = mod;

let seq = 0;
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: ++seq });
const call = (id) => ({ type: "toolCall", id, name: "read", arguments: { path: `/w/${id}` } });
const asst = (content, stopReason = "stop", extra = {}) => ({ role: "assistant", content, stopReason, api: "openai-responses", provider: "openai", model: "m", usage: {}, timestamp: ++seq, ...extra });
const result = (id, text) => ({ role: "toolResult", toolCallId: id, toolName: "read", content: [{ type: "text", text }], isError: false, timestamp: ++seq });
const BIG = "x".repeat(5000);
const replay = (type) => ({ v: 1, type, id: "cmp_1", data: "opaque", provider: "openai", api: "openai-responses", model: "m" });
// tool turn k; `cp` puts a provider compaction checkpoint on its final answer
const toolTurn = (k, cp) => [user(`Q${k}`), asst([call(`c${k}`)], "toolUse"), result(`c${k}`, `${BIG} doc${k}`),
  asst([{ type: "text", text: `A${k}` }], "stop", cp ? { providerReplay: replay(cp) } : {})];
const callIds = (msgs) => msgs.flatMap((m) => (m.role === "assistant" ? m.content.filter((b) => b.type === "toolCall").map((b) => b.id) : []));

function register(pluginConfig) {
  const registered = [];
  mod.default({ pluginConfig, logger: { warn() {}, info() {}, error() {} }, registerContextEngine: (id, factory) => registered.push({ id, factory }) });
  return registered;
}

test("newest contract: engine id = plugin id, ingest/assemble/compact/commitTurn, transcriptSemantics", async () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(PLUGIN, "openclaw.plugin.json"), "utf8"));
  const reg = register({});
  assert.equal(reg.length, 1);
  assert.equal(reg[0].id, manifest.id, "registered engine id = plugin id (else disabling leaves a missing engine)");
  const engine = reg[0].factory({});
  assert.equal(engine.info.id, manifest.id);
  assert.equal(typeof engine.info.name, "string");
  for (const m of ["ingest", "assemble", "compact", "commitTurn"]) assert.equal(typeof engine[m], "function", m);
  assert.equal(typeof engine.info.transcriptSemantics?.currentTurnFence, "string");
  assert.equal(typeof engine.info.transcriptSemantics?.turnAdvancementIdempotency, "string");
});

test("newest contract: every assemble() answer has messages and a finite estimatedTokens", async () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "occd-lean-10x-"));
  const policyPath = path.join(d, "policy.json"), statsPath = path.join(d, "stats.json");
  const engine = register({ policyPath, statsPath })[0].factory({});
  const msgs = [1, 2, 3, 4].flatMap((k) => toolTurn(k));
  const check = (r, what) => {
    assert.ok(Array.isArray(r.messages), `${what}: messages`);
    assert.ok(Number.isFinite(r.estimatedTokens) && r.estimatedTokens >= 0, `${what}: estimatedTokens`);
  };
  check(await engine.assemble({ sessionId: "s", sessionKey: "agent:main:main", messages: msgs }), "no policy");
  fs.writeFileSync(policyPath, JSON.stringify({ default: { mode: "drop", keepTurns: 1, batchTurns: 1 } }));
  const r = await engine.assemble({ sessionId: "s", sessionKey: "agent:main:main", messages: msgs, tokenBudget: 100000 });
  check(r, "drop");
  assert.ok(r.estimatedTokens < Math.ceil(msgs.length * 5000 / 4));
  check(await engine.assemble({ sessionId: "s", sessionKey: "agent:main:main", messages: [] }), "empty");
  const evil = [user("a"), { get role() { throw new Error("boom"); } }];
  check(await engine.assemble({ sessionId: "s", sessionKey: "agent:main:main", messages: evil }), "error path");
});

test("provider checkpoints: the three types, on assistant messages only", () => {
  assert.deepEqual([...PROVIDER_COMPACTION_TYPES].sort(), ["anthropic-compaction", "openai-responses-compaction", "openai-responses-retained-compaction"]);
  for (const t of PROVIDER_COMPACTION_TYPES) assert.ok(isCompactionCheckpoint(asst([], "stop", { providerReplay: replay(t) })));
  assert.ok(!isCompactionCheckpoint(asst([], "stop", { providerReplay: replay("openai-responses-reasoning") })));
  assert.ok(!isCompactionCheckpoint({ ...user("q"), providerReplay: replay("anthropic-compaction") }));
});

for (const type of ["anthropic-compaction", "openai-responses-compaction", "openai-responses-retained-compaction"]) {
  test(`a ${type} checkpoint and everything before it are never hidden or rewritten`, () => {
    const rules = { mode: "drop", keepTurns: 1, batchTurns: 1 };
    const plain = [1, 2, 3, 4, 5].flatMap((k) => toolTurn(k));
    assert.deepEqual(callIds(leanView(plain, rules).messages), ["c5"]); // without a checkpoint: turns 1-4 hidden
    const msgs = [1, 2, 3, 4, 5].flatMap((k) => toolTurn(k, k === 3 ? type : null));
    const { messages: out, stats } = leanView(msgs, rules);
    const owner = msgs[11];
    assert.ok(isCompactionCheckpoint(owner));
    assert.ok(out.includes(owner), "the same object: not rewritten");
    for (const m of msgs.slice(0, 12)) assert.ok(out.includes(m), "the prefix the checkpoint was made from is sent as is");
    assert.deepEqual(callIds(out), ["c1", "c2", "c3", "c5"]); // only turn 4, after the checkpoint, is hidden
    assert.equal(stats.hiddenTurns, 1);
    for (const mode of ["stub"]) {
      const s = leanView(msgs, { ...rules, mode }).messages;
      for (const m of msgs.slice(0, 12)) assert.ok(s.includes(m), `${mode}: prefix untouched`);
    }
  });
}
