// The lean view's filter as a pure function, and the engine's contract with a fake OpenClaw api.
// Run: node --test tests/js/   (tests/test_lean_js.py runs it from pytest)
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PLUGIN = path.join(HERE, "..", "..", "occd", "lean", "plugin");
const mod = await import(path.join(PLUGIN, "index.js"));
const { leanView, rulesFor, createEngine, PolicyFile, StatsFile } = mod;

// --- message builders, shaped like OpenClaw's stored AgentMessages (see fixtures/) --------------------------
let seq = 0;
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: ++seq });
const call = (id, name = "read", args = { path: `/w/${id}.txt` }) => ({ type: "toolCall", id, name, arguments: args });
const asst = (content, stopReason = "stop") => ({ role: "assistant", content, stopReason, api: "openai-completions", provider: "fake", model: "m", usage: {}, timestamp: ++seq });
const result = (id, text, name = "read") => ({ role: "toolResult", toolCallId: id, toolName: name, content: [{ type: "text", text }], isError: false, timestamp: ++seq });
const BIG = "x".repeat(5000);
// one tool turn: question, a call, its result, an answer
const toolTurn = (k, name = "read") => [user(`Q${k}`), asst([call(`c${k}`, name)], "toolUse"), result(`c${k}`, `${BIG} doc${k}`, name), asst([{ type: "text", text: `A${k}` }])];
const plainTurn = (k) => [user(`P${k}`), asst([{ type: "text", text: `R${k}` }])];
const session = (n) => Array.from({ length: n }, (_, i) => toolTurn(i + 1)).flat();

// what the model is sent, counted independently of the filter
const callIds = (msgs) => msgs.flatMap((m) => (m.role === "assistant" ? m.content.filter((b) => b.type === "toolCall").map((b) => b.id) : []));
const resultIds = (msgs) => msgs.filter((m) => m.role === "toolResult").map((m) => m.toolCallId);
const texts = (msgs) => msgs.flatMap((m) => (Array.isArray(m.content) ? m.content.filter((b) => b.type === "text").map((b) => b.text) : []));
function pairedResults(msgs) { // every result sent follows its call
  const seen = new Set();
  for (const m of msgs) {
    if (m.role === "assistant") for (const b of m.content) if (b.type === "toolCall") seen.add(b.id);
    if (m.role === "toolResult" && !seen.has(m.toolCallId)) return false;
  }
  return true;
}

test("off: the same array, untouched", () => {
  const msgs = session(6);
  const { messages, stats } = leanView(msgs, { mode: "off", keepTurns: 0, batchTurns: 1 });
  assert.equal(messages, msgs);
  assert.equal(stats.callsHidden, 0);
  assert.equal(leanView(msgs, undefined).messages, msgs); // no rules: off
});

test("drop keeps the newest N tool turns whole, hides the calls and results of older ones", () => {
  for (const keep of [0, 1, 3, 6, 9]) {
    const msgs = session(6);
    const before = structuredClone(msgs);
    const { messages, stats } = leanView(msgs, { mode: "drop", keepTurns: keep, batchTurns: 1 });
    assert.deepEqual(msgs, before, "input unchanged");
    const kept = Math.min(keep, 6);
    const expected = Array.from({ length: kept }, (_, i) => `c${6 - kept + 1 + i}`);
    assert.deepEqual(callIds(messages), expected, `keep ${keep}`);
    assert.deepEqual(resultIds(messages), expected);
    assert.equal(stats.callsHidden, 6 - kept);
    assert.equal(stats.resultsHidden, 6 - kept);
    // every user question and every answer text is still there
    for (let k = 1; k <= 6; k++) assert.ok(texts(messages).includes(`Q${k}`) && texts(messages).includes(`A${k}`));
    // an assistant message left with nothing but the call is gone: 4 messages per kept turn, 2 per hidden one
    assert.equal(messages.length, kept * 4 + (6 - kept) * 2);
  }
});

test("stub keeps the calls and replaces old results by a short placeholder", () => {
  const msgs = session(5);
  const { messages, stats } = leanView(msgs, { mode: "stub", keepTurns: 2, batchTurns: 1 });
  assert.equal(messages.length, msgs.length);
  assert.deepEqual(callIds(messages), ["c1", "c2", "c3", "c4", "c5"]);
  const res = messages.filter((m) => m.role === "toolResult");
  for (const m of res.slice(0, 3)) {
    assert.match(m.content[0].text, /^\[occd: result of read hidden/);
    assert.ok(m.content[0].text.length < 200);
    assert.equal(m.toolCallId, msgs.find((x) => x.toolCallId === m.toolCallId).toolCallId);
  }
  for (const m of res.slice(3)) assert.ok(m.content[0].text.startsWith(BIG));
  assert.equal(stats.resultsStubbed, 3);
  assert.ok(stats.charsOut < stats.charsIn - 3 * 4800);
});

test("batches: the kept window moves once per batch (hidden = oldest multiples of the batch)", () => {
  // keep 2, batch 4: nothing hidden until 6 tool turns, then 4 until 10, then 8 until 14 (stated independently)
  const expectedHidden = { 1: 0, 2: 0, 3: 0, 5: 0, 6: 4, 7: 4, 9: 4, 10: 8, 13: 8, 14: 12 };
  for (const [n, h] of Object.entries(expectedHidden)) {
    const { messages, stats } = leanView(session(Number(n)), { mode: "drop", keepTurns: 2, batchTurns: 4 });
    assert.equal(stats.hiddenTurns, h, `n=${n}`);
    assert.equal(callIds(messages).length, Number(n) - h, `n=${n}`);
  }
  // the prefix the model sees stays byte-identical between cuts (prompt cache): turns 7, 8, 9 extend turn 6's view
  const v6 = leanView(session(6), { mode: "drop", keepTurns: 2, batchTurns: 4 }).messages;
  const v9 = leanView(session(9), { mode: "drop", keepTurns: 2, batchTurns: 4 }).messages;
  assert.deepEqual(JSON.parse(JSON.stringify(v9.slice(0, v6.length))).map((m) => m.content), JSON.parse(JSON.stringify(v6)).map((m) => m.content));
});

test("plain turns do not count as tool turns", () => {
  const msgs = [...toolTurn(1), ...plainTurn(1), ...plainTurn(2), ...toolTurn(2), ...plainTurn(3)];
  const { messages, stats } = leanView(msgs, { mode: "drop", keepTurns: 1, batchTurns: 1 });
  assert.equal(stats.toolTurns, 2);
  assert.deepEqual(callIds(messages), ["c2"]);
  assert.ok(texts(messages).includes("R3"));
});

test("a compaction summary first is kept, and its tail counts as a turn", () => {
  const summary = { role: "compactionSummary", summary: "earlier: the user read notes", tokensBefore: 90000, timestamp: ++seq };
  const tail = [asst([call("t0")], "toolUse"), result("t0", BIG), asst([{ type: "text", text: "done" }])];
  const msgs = [summary, ...tail, ...session(3)];
  const { messages, stats } = leanView(msgs, { mode: "drop", keepTurns: 2, batchTurns: 1 });
  assert.equal(messages[0], summary);
  assert.equal(stats.toolTurns, 4);
  assert.deepEqual(callIds(messages), ["c2", "c3"]);
  assert.ok(texts(messages).includes("done"));
});

test("text + toolCall: the text stays, the call goes", () => {
  const msgs = [user("Q"), asst([{ type: "text", text: "let me look" }, call("a")], "toolUse"), result("a", BIG), asst([{ type: "text", text: "ok" }]), ...session(1)];
  const { messages } = leanView(msgs, { mode: "drop", keepTurns: 1, batchTurns: 1 });
  const m = messages[1];
  assert.equal(m.role, "assistant");
  assert.deepEqual(m.content, [{ type: "text", text: "let me look" }]);
  assert.equal(msgs[1].content.length, 2, "the original message is not changed");
  assert.ok(pairedResults(messages));
});

test("thinking + toolCall: the reasoning of a removed call goes with it (drop), stays with a kept call (stub)", () => {
  const think = { type: "thinking", thinking: "I should read it", thinkingSignature: "sig==" };
  const msgs = [
    user("Q1"), asst([think, call("a")], "toolUse"), result("a", BIG), asst([{ type: "text", text: "A1" }]),
    user("Q2"), asst([{ ...think }, { type: "text", text: "reading" }, call("b")], "toolUse"), result("b", BIG), asst([{ type: "text", text: "A2" }]),
    ...session(1),
  ];
  const d = leanView(msgs, { mode: "drop", keepTurns: 1, batchTurns: 1 });
  assert.equal(d.messages.filter((m) => m.role === "assistant" && m.content.some((b) => b.type === "thinking")).length, 0);
  assert.ok(!d.messages.some((m) => m.role === "assistant" && m.content.length === 0));
  assert.ok(texts(d.messages).includes("reading"));
  assert.equal(d.stats.thinkingDropped, 2);
  const s = leanView(msgs, { mode: "stub", keepTurns: 1, batchTurns: 1 });
  assert.equal(s.messages.filter((m) => m.role === "assistant" && m.content.some((b) => b.type === "thinking")).length, 2);
});

test("aborted turns: a call without a result and OpenClaw's synthetic error result are dropped together", () => {
  const msgs = [
    user("Q1"), asst([call("x")], "aborted"),
    user("Q2"), asst([call("y")], "error"), { ...result("y", "[openclaw] missing tool result: synthetic error " + BIG.slice(0, 300)), isError: true },
    ...session(2),
  ];
  const { messages } = leanView(msgs, { mode: "drop", keepTurns: 2, batchTurns: 1 });
  assert.deepEqual(callIds(messages), ["c1", "c2"]);
  assert.ok(pairedResults(messages));
  assert.ok(texts(messages).includes("Q1") && texts(messages).includes("Q2"));
});

test("an orphan result (no call before it) in a hidden turn is dropped, never sent alone", () => {
  const msgs = [user("Q0"), result("ghost", BIG), asst([{ type: "text", text: "hm" }]), ...session(2)];
  const { messages } = leanView(msgs, { mode: "drop", keepTurns: 2, batchTurns: 1 });
  assert.deepEqual(resultIds(messages), ["c1", "c2"]);
});

test("tools never hidden and results short enough to keep", () => {
  const msgs = [...toolTurn(1, "memory_search"), ...toolTurn(2), ...session(1).map((m) => m)];
  const short = [user("Qs"), asst([call("s")], "toolUse"), result("s", "ok"), asst([{ type: "text", text: "fine" }])];
  const all = [...msgs, ...short, ...toolTurn(9)];
  const { messages } = leanView(all, { mode: "drop", keepTurns: 1, batchTurns: 1, neverHide: ["memory_*"], keepResultsUnderChars: 100 });
  assert.deepEqual(callIds(messages), ["c1", "s", "c9"]);
  assert.ok(pairedResults(messages));
});

test("an unfinished last turn is never hidden, even with keep 0", () => {
  const msgs = [...session(2), user("Q3"), asst([call("c3")], "toolUse"), result("c3", BIG)];
  const { messages } = leanView(msgs, { mode: "drop", keepTurns: 0, batchTurns: 1 });
  assert.deepEqual(callIds(messages), ["c3"]);
  assert.deepEqual(resultIds(messages), ["c3"]);
});

test("random histories: results always follow their calls, and exactly the newest tool turns keep theirs", () => {
  let s = 12345; // mulberry32
  const rnd = (n) => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (((t ^ (t >>> 14)) >>> 0) % n);
  };
  for (let iter = 0; iter < 300; iter++) {
    const msgs = [];
    const toolTurnsCalls = [];
    const turns = rnd(12);
    for (let t = 0; t < turns; t++) {
      msgs.push(user(`U${t}`));
      if (rnd(3) === 0) { msgs.push(asst([{ type: "text", text: `T${t}` }])); continue; }
      const ids = [];
      for (let k = 0, n = 1 + rnd(3); k < n; k++) {
        const id = `i${t}_${k}`;
        ids.push(id);
        msgs.push(asst(rnd(2) ? [{ type: "text", text: "x" }, call(id)] : [call(id)], "toolUse"), result(id, BIG));
      }
      msgs.push(asst([{ type: "text", text: `T${t}` }]));
      toolTurnsCalls.push(ids);
    }
    const keep = rnd(5), batch = 1 + rnd(4), mode = rnd(2) ? "drop" : "stub";
    const { messages } = leanView(msgs, { mode, keepTurns: keep, batchTurns: batch });
    assert.ok(pairedResults(messages));
    const n = toolTurnsCalls.length;
    let hidden = 0;
    while (n - keep - hidden >= batch) hidden += batch; // the rule, counted step by step
    const keptIds = toolTurnsCalls.slice(hidden).flat();
    if (mode === "drop") assert.deepEqual(callIds(messages), keptIds);
    else {
      const full = messages.filter((m) => m.role === "toolResult" && m.content[0].text === BIG).map((m) => m.toolCallId);
      assert.deepEqual(full, keptIds);
    }
    for (let t = 0; t < turns; t++) assert.ok(texts(messages).includes(`U${t}`));
  }
});

test("rulesFor: session over agent over default; bad values fall back", () => {
  const policy = {
    default: { mode: "stub", keepTurns: 5 },
    agents: { main: { mode: "drop", batchTurns: 2 } },
    sessions: { "agent:main:s1": { keepTurns: 1 }, "agent:main:bad": { keepTurns: -3, mode: "nuke" } },
  };
  assert.deepEqual(rulesFor(policy, "agent:main:s1"), { mode: "drop", keepTurns: 1, keepResults: 0, batchTurns: 2, neverHide: [], keepResultsUnderChars: 0,
                                                         highWater: 0.9, lowWater: 0.3, cacheCostRatio: 11.5, requestsPerTurn: null, cacheTtlSeconds: null });
  assert.equal(rulesFor(policy, "agent:other:x").mode, "stub");
  assert.equal(rulesFor(policy, "agent:main:bad").keepTurns, 5);
  assert.equal(rulesFor(policy, "agent:main:bad").mode, "drop");
  assert.equal(rulesFor(null, "agent:main:x").mode, "off");
});

function tmpdir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), "occd-lean-"));
}

test("the policy file is re-read when it changes, the last good one kept on a bad write", () => {
  const d = tmpdir();
  const f = path.join(d, "policy.json");
  const p = new PolicyFile(f);
  assert.equal(p.get(), null);
  fs.writeFileSync(f, JSON.stringify({ default: { mode: "drop" } }));
  assert.equal(p.get().default.mode, "drop");
  fs.writeFileSync(f, JSON.stringify({ default: { mode: "stub", keepTurns: 10 } }));
  assert.equal(p.get().default.mode, "stub");
  fs.writeFileSync(f, "{not json");
  assert.equal(p.get().default.mode, "stub");
  assert.ok(p.error);
});

// --- the contract with OpenClaw --------------------------------------------------------------------------
function loadWithFakeApi(pluginConfig) {
  const registered = [];
  const warnings = [];
  const api = { pluginConfig, logger: { warn: (m) => warnings.push(m), info() {}, error() {} }, registerContextEngine: (id, factory) => registered.push({ id, factory }) };
  mod.default(api);
  return { registered, warnings };
}

test("contract: one engine, non-owning, with the durable-turn contract and every required method", async () => {
  const manifest = JSON.parse(fs.readFileSync(path.join(PLUGIN, "openclaw.plugin.json"), "utf8"));
  const pkg = JSON.parse(fs.readFileSync(path.join(PLUGIN, "package.json"), "utf8"));
  assert.equal(manifest.kind, "context-engine");
  assert.deepEqual(pkg.openclaw.extensions, ["./index.js"]);
  assert.equal(pkg.type, "module");
  assert.ok(!pkg.dependencies, "no dependencies");
  const { registered } = loadWithFakeApi({});
  assert.equal(registered.length, 1);
  assert.equal(registered[0].id, manifest.id);
  const engine = registered[0].factory({ agentDir: "/nowhere" });
  assert.equal(engine.info.id, manifest.id);
  assert.equal(engine.info.ownsCompaction, false);
  assert.deepEqual(engine.info.transcriptSemantics, { currentTurnFence: "before-current-turn-entry-v1", turnAdvancementIdempotency: "atomic-idempotent-v1" });
  for (const m of ["ingest", "assemble", "compact", "commitTurn"]) assert.equal(typeof engine[m], "function", m);
  assert.deepEqual(await engine.commitTurn({ advancementKey: "k1", messages: [] }), { status: "committed" });
  assert.deepEqual(await engine.commitTurn({ advancementKey: "k1", messages: [] }), { status: "duplicate" });
  assert.deepEqual(await engine.ingest({ sessionId: "s", message: user("x") }), { ingested: false });
});

test("contract: assemble filters per the policy file, writes counts only, and never throws", async () => {
  const d = tmpdir();
  const policyPath = path.join(d, "policy.json"), statsPath = path.join(d, "stats.json");
  const { registered } = loadWithFakeApi({ policyPath, statsPath });
  const engine = registered[0].factory({});
  const msgs = session(4);
  let r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: msgs, tokenBudget: 100000 });
  assert.equal(r.messages, msgs, "no policy file: off");
  fs.writeFileSync(policyPath, JSON.stringify({ default: { mode: "off" }, sessions: { "agent:main:main": { mode: "drop", keepTurns: 1, batchTurns: 1 } } }));
  r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: msgs, tokenBudget: 100000 });
  assert.equal(r.messages, msgs, "well under the budget's high water: nothing hidden (sticky.js)");
  r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: msgs, tokenBudget: 4000 });
  assert.deepEqual(callIds(r.messages), ["c4"]);
  const state = fs.readFileSync(path.join(d, "state.json"), "utf8");
  assert.ok(!state.includes("doc1") && !state.includes("xxxx") && !state.includes("Q1"), "ids only, no content");
  assert.ok(r.estimatedTokens > 0 && r.estimatedTokens < 3000);
  const stats = fs.readFileSync(statsPath, "utf8");
  assert.ok(!stats.includes("doc1") && !stats.includes("xxxx") && !stats.includes("Q1"), "counts only, no content");
  const s = JSON.parse(stats).sessions["agent:main:main"];
  assert.equal(s.callsHidden, 3);
  assert.equal(s.mode, "drop");
  // other sessions keep the default
  r = await engine.assemble({ sessionId: "s2", sessionKey: "agent:main:other", messages: msgs });
  assert.equal(r.messages, msgs);
  // garbage in: the history comes back unchanged, no exception
  const evil = [user("a"), { get role() { throw new Error("boom"); } }];
  r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: evil });
  assert.equal(r.messages, evil);
  r = await engine.assemble(undefined);
  assert.equal(r.messages, undefined);
  assert.equal(JSON.parse(fs.readFileSync(statsPath, "utf8")).errors.count >= 1, true);
});

test("contract: compact delegates to OpenClaw's runtime and reports (not throws) when it cannot", async () => {
  const { registered } = loadWithFakeApi({});
  const engine = registered[0].factory({});
  // outside OpenClaw the SDK cannot be imported: a result, not an exception (an exception quarantines)
  const r = await engine.compact({ sessionId: "s", sessionKey: "agent:main:main" });
  assert.equal(r.ok, false);
  assert.equal(r.compacted, false);
  assert.match(r.reason, /occd-lean/);
  const src = fs.readFileSync(path.join(PLUGIN, "index.js"), "utf8");
  assert.match(src, /import\("openclaw\/plugin-sdk\/core"\)/);
  assert.match(src, /delegateCompactionToRuntime\(params\)/);
});

// --- a history recorded from OpenClaw 2026.9.6's store (3 READ turns through the gateway, then a plain one) ----
const recorded = JSON.parse(fs.readFileSync(path.join(HERE, "fixtures", "oc-2026.9.6-gateway-read-turns.json"), "utf8"));

test("recorded 2026.9.6 history: drop keeps the newest tool turn, every user message and answer", () => {
  const ids = callIds(recorded);
  assert.equal(ids.length, 3);
  for (const keep of [0, 1, 2, 3]) {
    const { messages, stats } = leanView(recorded, { mode: "drop", keepTurns: keep, batchTurns: 1 });
    assert.deepEqual(callIds(messages), ids.slice(3 - keep), `keep ${keep}`);
    assert.ok(pairedResults(messages));
    assert.equal(messages.filter((m) => m.role === "user").length, recorded.filter((m) => m.role === "user").length);
    assert.equal(stats.resultsHidden, 3 - keep);
    // a kept message is the very object OpenClaw passed (nothing copied that needs no change)
    for (const m of messages) if (m.role === "user") assert.ok(recorded.includes(m));
  }
});

test("recorded 2026.9.6 history: stub and off", () => {
  const s = leanView(recorded, { mode: "stub", keepTurns: 1, batchTurns: 1 });
  assert.deepEqual(callIds(s.messages), callIds(recorded));
  const res = s.messages.filter((m) => m.role === "toolResult");
  assert.equal(res.filter((m) => m.content[0].text.startsWith("[occd: result of read hidden")).length, 2);
  assert.ok(res[2].content[0].text.length > 1000);
  assert.equal(leanView(recorded, { mode: "off", keepTurns: 0 }).messages, recorded);
});

// --- recall: the turns OpenClaw's bounded load left out ---------------------------------------------------------
const { recall, leanTurn } = mod;
const questions = (msgs) => msgs.filter((m) => m.role === "user").map((m) => m.content[0].text);
const cutAt = (msgs, i) => msgs.slice(i); // OpenClaw's bounded load keeps the newest events, from any event on

test("recall: a history cut part-way into a turn gets the cut turns back, lean, in front", () => {
  const mem = new Map();
  const full = session(7);
  recall(mem, "s", full.slice(0, 4 * 6));                // seen with 6 turns
  const cut = cutAt(full, 4 * 2 + 2);                    // the load starts at turn 3's result: Q1, Q2, Q3 lost
  const { messages, turnsRecalled } = recall(mem, "s", cut);
  assert.equal(turnsRecalled, 3);
  // stated independently: every question, in order; the recalled turns carry no call, result or reasoning
  assert.deepEqual(questions(messages), ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7"]);
  assert.deepEqual(callIds(messages), ["c4", "c5", "c6", "c7"]);
  assert.deepEqual(resultIds(messages), ["c4", "c5", "c6", "c7"]);
  assert.ok(pairedResults(messages));
  assert.deepEqual(texts(messages).filter((t) => /^A\d$/.test(t)), ["A1", "A2", "A3", "A4", "A5", "A6", "A7"]);
  assert.equal(messages[0].role, "user");
  // turns 4..7 are the very objects OpenClaw passed
  for (const m of cut.slice(2)) assert.ok(messages.includes(m));
});

test("recall: OpenClaw's bootstrap message in front of a cut turn is replaced by the turn itself", () => {
  const mem = new Map();
  const full = session(5);
  recall(mem, "s", full);
  const boot = { role: "user", content: [{ type: "text", text: "[Wed 2026-11-25 20:35 UTC] (session bootstrap)\n\nRuntime: x" }], timestamp: 999 };
  const cut = [boot, ...cutAt(full, 4 * 1 + 3)];         // the rest of turn 2 (its answer), then turns 3..5
  const { messages, turnsRecalled } = recall(mem, "s", cut);
  assert.equal(turnsRecalled, 2);
  assert.deepEqual(questions(messages), ["Q1", "Q2", "Q3", "Q4", "Q5"]);
  assert.ok(!messages.includes(boot));
});

test("recall: a history that starts on purpose (compaction summary, reset, seed) is taken as it is", () => {
  const mem = new Map();
  const full = session(6);
  recall(mem, "s", full);
  const summary = { role: "compactionSummary", summary: "S", tokensBefore: 1, timestamp: 500 };
  const compacted = [summary, ...full.slice(4 * 4)];     // OpenClaw compacted: Q1..Q4 summarised
  const r = recall(mem, "s", compacted);
  assert.equal(r.messages, compacted);
  assert.equal(r.turnsRecalled, 0);
  // the memory starts over from the compacted history: a later cut never brings back what was summarised
  const later = [...compacted.slice(1), ...toolTurn(7)];
  const cut = later.slice(2);                              // Q5 cut mid-turn (and the summary with it)
  const r2 = recall(mem, "s", cut);
  assert.deepEqual(questions(r2.messages), ["Q5", "Q6", "Q7"]);
  // a reset or a rotation's seed: a first question the memory does not know
  const fresh = [user("[occd] This session continues session x"), asst([{ type: "text", text: "ok" }])];
  assert.equal(recall(mem, "s", fresh).messages, fresh);
  assert.deepEqual(questions(recall(mem, "s", [asst([{ type: "text", text: "late" }]), ...fresh]).messages), ["[occd] This session continues session x"]);
});

test("recall: every question, then the answers newest first within their share of the token budget", () => {
  const mem = new Map();
  const full = Array.from({ length: 8 }, (_, i) => [user(`Q${i + 1} ${"q".repeat(400)}`), asst([{ type: "text", text: `A${i + 1} ${"a".repeat(400)}` }])]).flat();
  recall(mem, "s", full);
  const cut = full.slice(2 * 5 + 1);                       // Q1..Q6 cut (the rest of turn 6 leads)
  // a budget of 2,100 tokens: questions get 30% (2,520 chars: all six, 403 chars each), answers 15% (1,260
  // chars: the newest three whole, none older)
  const { messages, turnsRecalled } = recall(mem, "s", cut, 2100);
  assert.equal(turnsRecalled, 6);
  assert.deepEqual(questions(messages).map((q) => q.split(" ")[0]), ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8"]);
  assert.ok(questions(messages).every((q) => q.length === 403), "questions whole");
  const answers = texts(messages).filter((t) => /^A[1-6] /.test(t));
  assert.deepEqual(answers.map((a) => a.split(" ")[0]), ["A4", "A5", "A6"]);
  assert.ok(answers.every((a) => a.length === 403));
  // 1,950 tokens: 2,340 chars of questions (five whole, the oldest cut short), 1,170 of answers (two whole, one cut)
  const tight = recall(new Map([["s", structuredClone(mem.get("s"))]]), "s", cut, 1950);
  assert.deepEqual(questions(tight.messages).map((q) => q.split(" ")[0]), ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7", "Q8"]);
  assert.ok(questions(tight.messages)[0].endsWith("[...]") && questions(tight.messages)[0].length === 306);
  const tightA = texts(tight.messages).filter((t) => /^A[1-6] /.test(t));
  assert.deepEqual(tightA.map((a) => a.length), [306, 403, 403]);
  const all = recall(new Map([["s", mem.get("s")]]), "s", cut, 1_000_000);
  assert.equal(all.turnsRecalled, 6);
  assert.equal(texts(all.messages).filter((t) => /^A[1-6] /.test(t) && t.length === 403).length, 6);
});

test("recall: a cut between two turns recalls nothing now, and the older turns stay remembered", () => {
  const mem = new Map();
  const full = session(6);
  recall(mem, "s", full);
  const clean = cutAt(full, 4 * 2);                      // starts with Q3: what a user's historyLimit does
  assert.equal(recall(mem, "s", clean).messages, clean);
  const next = cutAt([...full, ...toolTurn(7)], 4 * 3 + 1);
  assert.deepEqual(questions(recall(mem, "s", next).messages), ["Q1", "Q2", "Q3", "Q4", "Q5", "Q6", "Q7"]);
});

test("engine: assemble recalls cut turns in drop/stub mode, never in off, and counts them", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "occd-lean-recall-"));
  const policyPath = path.join(dir, "policy.json");
  const statsPath = path.join(dir, "stats.json");
  const engine = createEngine({ policyPath, statsPath });
  const full = session(10);
  const p = { sessionId: "sid-recall", sessionKey: "agent:main:main", tokenBudget: 76000 };
  fs.writeFileSync(policyPath, JSON.stringify({ default: { mode: "drop", keepTurns: 2, batchTurns: 1 } }));
  await engine.assemble({ ...p, messages: full.slice(0, 4 * 9) });
  const r = await engine.assemble({ ...p, messages: cutAt(full, 4 * 3 + 2) });
  assert.deepEqual(questions(r.messages), full.filter((m) => m.role === "user").map((m) => m.content[0].text));
  assert.deepEqual(callIds(r.messages), ["c9", "c10"]);
  const stats = JSON.parse(fs.readFileSync(statsPath, "utf8"));
  assert.equal(stats.sessions["agent:main:main"].turnsRecalled, 4);
  fs.writeFileSync(policyPath, JSON.stringify({ default: { mode: "off" } }));
  const cut = cutAt(full, 4 * 3 + 2);
  assert.equal((await engine.assemble({ ...p, messages: cut })).messages, cut);
});

test("leanTurn keeps the question and the answer's text only", () => {
  const t = [user("Q"), asst([{ type: "thinking", thinking: "hm" }, call("c1")], "toolUse"), result("c1", BIG), asst([{ type: "text", text: "A" }])];
  assert.deepEqual(leanTurn(t).map((m) => m.role), ["user", "assistant"]);
  assert.deepEqual(texts(leanTurn(t)), ["Q", "A"]);
});

// --- issue 21: the plugin records each assemble() call per session (counts and times only) ----------------
test("stats: every assemble() call is recorded per session and turn, counts only, bounded, atomic", async () => {
  const { MAX_TURNS } = mod;
  const d = tmpdir();
  const policyPath = path.join(d, "policy.json"), statsPath = path.join(d, "stats.json");
  fs.writeFileSync(policyPath, JSON.stringify({ default: { mode: "off" }, sessions: { "agent:main:main": { mode: "drop", keepTurns: 1, batchTurns: 1 } } }));
  const engine = createEngine({ policyPath, statsPath });
  const msgs = session(4);
  const t0 = Date.now();
  const r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: msgs });
  let s = JSON.parse(fs.readFileSync(statsPath, "utf8")).sessions["agent:main:main"];
  assert.equal(s.calls, 1);
  assert.equal(s.turns.length, 1);
  const [t] = s.turns;
  assert.ok(t.at >= t0 && t.at <= Date.now());
  assert.deepEqual({ ...t, at: 0 }, { at: 0, sessionId: "s1", mode: "drop", messagesIn: 16, messagesOut: r.messages.length,
                                      estimatedTokens: r.estimatedTokens, hiddenTurns: 3 });
  // bounded: only the newest MAX_TURNS calls are kept, the counter goes on
  for (let i = 0; i < MAX_TURNS + 5; i++) await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: msgs });
  const raw = fs.readFileSync(statsPath, "utf8");
  s = JSON.parse(raw).sessions["agent:main:main"];
  assert.equal(s.calls, MAX_TURNS + 6);
  assert.equal(s.turns.length, MAX_TURNS);
  assert.ok(s.turns.every((x, i) => i === 0 || x.at >= s.turns[i - 1].at));
  assert.ok(!raw.includes("doc1") && !raw.includes("Q1") && !raw.includes("xxxx"), "counts only, no content");
  assert.deepEqual(fs.readdirSync(d).filter((f) => f.endsWith(".tmp")), [], "no temp file left behind");
  assert.equal(fs.statSync(statsPath).mode & 0o777, 0o600);
  // a call that fails inside assemble() is recorded too, marked as an error (the history went through unchanged)
  const evil = [user("a"), { get role() { throw new Error("boom"); } }];
  await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: evil });
  s = JSON.parse(fs.readFileSync(statsPath, "utf8")).sessions["agent:main:main"];
  assert.equal(s.calls, MAX_TURNS + 7);
  assert.equal(s.turns.at(-1).error, true);
  assert.equal(s.turns.at(-1).messagesIn, 2);
});

test("stats: withTurn starts a session's record and survives a damaged previous one", () => {
  const { withTurn, turnRecord } = mod;
  const s = { mode: "drop", messagesIn: 3, messagesOut: 2, hiddenTurns: 1 };
  const a = withTurn(undefined, s, turnRecord(s, "sid", 5, 1000));
  assert.equal(a.calls, 1);
  assert.equal(a.firstAt, 1000);
  const b = withTurn({ calls: "x", turns: [null, { at: "bad" }, { at: 900 }] }, s, turnRecord(s, "sid", 5, 2000));
  assert.equal(b.calls, 1);
  assert.deepEqual(b.turns.map((t) => t.at), [900, 2000]);
});
