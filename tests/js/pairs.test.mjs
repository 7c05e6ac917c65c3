// Issue 31.3 (the newest results never vanish, whatever the turns' identity) and 31.4 (a call and its result are
// hidden or kept together, paired by call id, whatever the result says its tool was). Run: node --test tests/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PLUGIN = path.join(HERE, "..", "..", "occd", "lean", "plugin");
const { leanView, createEngine } = await import(path.join(PLUGIN, "index.js"));
const { forgetStateFiles } = await import(path.join(PLUGIN, "sticky.js"));

const BIG = "r".repeat(6000);
const txt = (text) => [{ type: "text", text }];
const call = (id, name = "read") => ({ type: "toolCall", id, name, arguments: { p: String(id) } });
const user = (text, extra = {}) => ({ role: "user", content: txt(text), ...extra });
const asst = (content, stopReason = "stop") => ({ role: "assistant", content, stopReason });
const result = (id, name = "read", text = BIG) => ({ role: "toolResult", toolCallId: id, toolName: name, content: txt(text) });

/** The pairs of a history, stated on their own: a result pairs with the latest call of its id before it that has
 * no result yet. [{call: block, result: message|null}] */
function pairsOf(msgs) {
  const pairs = [];
  const waiting = new Map();
  for (const m of msgs) {
    if (m.role === "assistant") for (const b of m.content) if (b.type === "toolCall") {
      const p = { call: b, result: null };
      pairs.push(p);
      if (b.id != null) (waiting.get(b.id) ?? waiting.set(b.id, []).get(b.id)).push(p);
    }
    if (m.role === "toolResult" && m.toolCallId != null) {
      const p = waiting.get(m.toolCallId)?.pop();
      if (p) p.result = m;
    }
  }
  return pairs;
}

/** In what the model is sent: every pair of the input whole or gone (drop mode), never half of one. */
function assertPairsTogether(input, output, label) {
  const blocks = new Set(output.flatMap((m) => (m.role === "assistant" ? m.content : [])));
  const results = new Set(output.filter((m) => m.role === "toolResult"));
  for (const p of pairsOf(input)) {
    if (!p.result) continue;
    assert.equal(blocks.has(p.call), results.has(p.result),
                 `${label}: call ${p.call.id} (${p.call.name}) ${blocks.has(p.call) ? "kept" : "hidden"}, its result (${p.result.toolName}) ${results.has(p.result) ? "kept" : "hidden"}`);
  }
}

test("31.4: a call named bash whose result says memory_get, neverHide memory_*: kept or hidden together", () => {
  const msgs = [];
  for (let k = 0; k < 8; k++) msgs.push(user(`Q${k}`), asst([call(`c${k}`, "bash")], "toolUse"), result(`c${k}`, "memory_get"), asst(txt(`A${k}`)));
  for (const mode of ["drop", "stub"]) {
    const { messages } = leanView(msgs, { mode, keepTurns: 1, batchTurns: 1, neverHide: ["memory_*"] });
    assertPairsTogether(msgs, messages, mode);
    // and the other way round: a call never hidden by its name keeps its result whatever the result says
    const flipped = msgs.map((m) => (m.role === "toolResult" ? { ...m, toolName: "bash" } : m.role === "assistant" && m.content[0].type === "toolCall" ? { ...m, content: [call(m.content[0].id, "memory_get")] } : m));
    assertPairsTogether(flipped, leanView(flipped, { mode, keepTurns: 1, batchTurns: 1, neverHide: ["memory_*"] }).messages, `${mode} flipped`);
  }
});

test("31.4: a result stored after the next user message still goes with its call's turn", () => {
  const msgs = [user("Q0"), asst([call("a")], "toolUse"), user("interrupt"), result("a"), asst(txt("A0"))];
  for (let k = 1; k < 5; k++) msgs.push(user(`Q${k}`), asst([call(`c${k}`)], "toolUse"), result(`c${k}`), asst(txt(`A${k}`)));
  for (let keep = 0; keep < 7; keep++) assertPairsTogether(msgs, leanView(msgs, { mode: "drop", keepTurns: keep, batchTurns: 1 }).messages, `keep ${keep}`);
});

test("31.4: hostile shapes at random (duplicated ids, missing ids, other tool names, any hidden turns): never half a pair", () => {
  let s = 4242; // mulberry32
  const rnd = (n) => {
    s = (s + 0x6d2b79f5) | 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) % n;
  };
  const names = ["read", "bash", "memory_get", "memory_search", undefined];
  for (let iter = 0; iter < 400; iter++) {
    const msgs = [];
    const turns = 2 + rnd(8);
    for (let t = 0; t < turns; t++) {
      msgs.push(user(rnd(3) ? "same" : `U${t}`)); // no timestamps, often the same text
      for (let k = 0, n = rnd(4); k < n; k++) {
        const id = rnd(6) === 0 ? undefined : `i${rnd(4)}`; // few ids: duplicates across and within turns
        const blocks = [call(id, names[rnd(names.length)])];
        if (rnd(3) === 0) blocks.push(call(`i${rnd(4)}`, names[rnd(names.length)]));
        if (rnd(4) === 0) blocks.unshift({ type: "thinking", thinking: "hm" });
        msgs.push(asst(blocks, "toolUse"));
        for (const b of blocks) if (b.type === "toolCall" && rnd(5)) {
          const rid = rnd(6) === 0 ? `i${rnd(4)}` : b.id; // sometimes a result naming another call
          msgs.push(result(rid, names[rnd(names.length)], rnd(4) === 0 ? "ok" : BIG));
        }
        if (rnd(5) === 0) msgs.push(user("interjection"));
      }
      msgs.push(asst(txt(`A${t}`)));
    }
    const rules = { mode: "drop", keepTurns: rnd(4), batchTurns: 1 + rnd(3), neverHide: rnd(2) ? ["memory_*"] : ["bash"], keepResultsUnderChars: 10 };
    assertPairsTogether(msgs, leanView(msgs, rules).messages, `iter ${iter}`);
    // any set of hidden turns a chooser may pick
    const pick = ({ units }) => units.filter(() => rnd(2));
    assertPairsTogether(msgs, leanView(msgs, rules, pick).messages, `iter ${iter} (chooser)`);
  }
});

test("31.3: turns that start with the same message and no timestamp: the newest keepTurns tool turns keep their results", async () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "occd-pairs-"));
  const paths = { policyPath: path.join(d, "policy.json"), statsPath: path.join(d, "stats.json"), statePath: path.join(d, "state.json") };
  const keepTurns = 2;
  fs.writeFileSync(paths.policyPath, JSON.stringify({ default: { mode: "drop", keepTurns, batchTurns: 1 } }));
  forgetStateFiles();
  const engine = createEngine(paths);
  const history = [];
  for (let k = 0; k < 14; k++) {
    const r = await engine.assemble({ sessionId: "s", sessionKey: "agent:main:main", messages: structuredClone(history), tokenBudget: 6000 });
    const sent = new Set(r.messages.filter((m) => m.role === "toolResult").map((m) => m.toolCallId));
    const newest = history.filter((m) => m.role === "toolResult").slice(-keepTurns).map((m) => m.toolCallId);
    for (const id of newest) assert.ok(sent.has(id), `turn ${k}: the result of ${id} vanished (sent: ${[...sent]})`);
    assertPairsTogether(history, r.messages, `turn ${k}`);
    // the next turn: the same question, no timestamp (a heartbeat, a "go on"), one read
    history.push(user("go on"), asst([call(`c${k}`)], "toolUse"), result(`c${k}`), asst(txt("done")));
  }
});

// --- issue 30.2: the newest N tool results whole, not N whole turns of results ------------------------------
test("keepResults: runs of 4 calls a turn keep the newest 5 results, a run cut between its calls", () => {
  const msgs = [];
  for (let k = 0; k < 10; k++) {
    msgs.push(user(`Q${k}`));
    for (let j = 0; j < 4; j++) msgs.push(asst([call(`c${k}_${j}`)], "toolUse"), result(`c${k}_${j}`));
    msgs.push(asst(txt(`A${k}`)));
  }
  const sent = (rules) => leanView(msgs, rules).messages.filter((m) => m.role === "toolResult").map((m) => m.toolCallId);
  // keepTurns 5 alone: 5 whole turns, 20 results
  assert.equal(sent({ mode: "drop", keepTurns: 5, batchTurns: 1 }).length, 20);
  // keepResults 5: the newest 5 results whole, the older calls of the run before hidden with their results
  const kept = sent({ mode: "drop", keepTurns: 5, keepResults: 5, batchTurns: 1 });
  assert.deepEqual(kept, ["c8_3", "c9_0", "c9_1", "c9_2", "c9_3"]);
  const out = leanView(msgs, { mode: "drop", keepTurns: 5, keepResults: 5, batchTurns: 1 });
  assert.deepEqual([out.stats.keptTurns, out.stats.hiddenTurns, out.stats.hiddenUnits], [2, 9, 35]);
  assert.equal(out.messages.filter((m) => m.role === "user").length, 10, "every question stays");
  // calls sent together in one message are one unit: kept or hidden together
  const par = msgs.slice(0, -7).concat([asst([call("p1"), call("p2")], "toolUse"), result("p1"), result("p2"), asst(txt("A9"))]);
  assert.deepEqual(leanView(par, { mode: "drop", keepTurns: 5, keepResults: 5, batchTurns: 1 }).messages
    .filter((m) => m.role === "toolResult").map((m) => m.toolCallId), ["c8_2", "c8_3", "c9_0", "p1", "p2"]);
  // one call a turn: the same as keepTurns (at most keepTurns turns in any case)
  const single = [];
  for (let k = 0; k < 10; k++) single.push(user(`Q${k}`), asst([call(`s${k}`)], "toolUse"), result(`s${k}`), asst(txt(`A${k}`)));
  assert.equal(leanView(single, { mode: "drop", keepTurns: 5, keepResults: 5, batchTurns: 1 }).messages.filter((m) => m.role === "toolResult").length, 5);
  assert.equal(leanView(single, { mode: "drop", keepTurns: 3, keepResults: 5, batchTurns: 1 }).messages.filter((m) => m.role === "toolResult").length, 3);
  // results never hidden (short ones, neverHide) do not count toward the 5
  const withMemory = msgs.map((m) => (m.role === "toolResult" && m.toolCallId.startsWith("c9") ? { ...m, toolName: "memory_get" } : m));
  const kept2 = leanView(withMemory, { mode: "drop", keepTurns: 5, keepResults: 5, batchTurns: 1, neverHide: ["memory_*"] }).messages
    .filter((m) => m.role === "toolResult").map((m) => m.toolCallId);
  assert.deepEqual(kept2.filter((id) => !id.startsWith("c9")), ["c7_3", "c8_0", "c8_1", "c8_2", "c8_3"]);
});

test("keepResults through the engine's sticky boundary: the newest 5 results always whole, fewer turns kept", async () => {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "occd-keepres-"));
  const paths = { policyPath: path.join(d, "policy.json"), statsPath: path.join(d, "stats.json"), statePath: path.join(d, "state.json") };
  fs.writeFileSync(paths.policyPath, JSON.stringify({ default: { mode: "drop", keepTurns: 5, keepResults: 5, batchTurns: 1 } }));
  forgetStateFiles();
  const engine = createEngine(paths);
  const history = [];
  let moved = 0;
  for (let k = 0; k < 12; k++) {
    const r = await engine.assemble({ sessionId: "s", sessionKey: "agent:main:main", messages: structuredClone(history), tokenBudget: 30000 });
    const sent = new Set(r.messages.filter((m) => m.role === "toolResult").map((m) => m.toolCallId));
    for (const m of history.filter((x) => x.role === "toolResult").slice(-5)) assert.ok(sent.has(m.toolCallId), `turn ${k}: ${m.toolCallId}`);
    assertPairsTogether(history, r.messages, `turn ${k}`);
    if (r.messages.length < history.length) moved++;
    history.push(user(`Q${k}`), ...[0, 1, 2, 3].flatMap((j) => [asst([call(`c${k}_${j}`)], "toolUse"), result(`c${k}_${j}`)]), asst(txt(`A${k}`)));
  }
  assert.ok(moved > 0, "the budget made it hide something");
  const s = JSON.parse(fs.readFileSync(paths.statsPath, "utf8")).sessions["agent:main:main"];
  assert.equal(s.keptTurns, 2);
});
