// The lean view's sticky boundary (issue 20): prefix stability, batch moves, restart persistence.
// Run: node --test tests/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PLUGIN = path.join(HERE, "..", "..", "occd", "lean", "plugin");
const { contextWindowOf, createEngine, leanView } = await import(path.join(PLUGIN, "index.js"));
const { aggregateCapChars, chooseHidden, StateFile, forgetStateFiles, turnIds, writeAtomic } = await import(path.join(PLUGIN, "sticky.js"));

let seq = 0;
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: ++seq });
const call = (id) => ({ type: "toolCall", id, name: "read", arguments: { path: `/w/${id}.txt` } });
const asst = (content, stopReason = "stop") => ({ role: "assistant", content, stopReason, usage: {}, timestamp: ++seq });
const result = (id, text) => ({ role: "toolResult", toolCallId: id, toolName: "read", content: [{ type: "text", text }], isError: false, timestamp: ++seq });
const DOC = "w".repeat(18000); // ~4.5k tokens: the closed loop's tool result
// deterministic: the same turn k is the same messages in every simulated session
const toolTurn = (k) => [user(`Q${k}`), asst([call(`c${k}`)], "toolUse"), result(`c${k}`, `${DOC} doc${k}`), asst([{ type: "text", text: `A${k}` }])]
  .map((m, j) => ({ ...m, timestamp: 1_800_000_000_000 + k * 1000 + j }));
const RULES = { mode: "drop", keepTurns: 5, batchTurns: 4, neverHide: [], keepResultsUnderChars: 300 };
const BUDGET = 96000;
// the model's window in OpenClaw's config (128k: OpenClaw's cap on a prompt's tool results is 256k chars, 14 of
// these results, so the cost rule alone decides here)
const CONFIG = { models: { providers: { p: { models: [{ id: "m", contextWindow: 128000 }] } } } };
const engineOf = (paths) => createEngine({ ...paths, config: CONFIG });
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "occd-sticky-"));

function setup(rules = RULES) {
  const d = tmp();
  const paths = { policyPath: path.join(d, "policy.json"), statsPath: path.join(d, "stats.json"), statePath: path.join(d, "state.json") };
  fs.writeFileSync(paths.policyPath, JSON.stringify({ default: rules }));
  return { d, paths };
}

const json = (msgs) => msgs.map((m) => JSON.stringify(m));
function startsWith(next, prev) {
  const a = json(next), b = json(prev);
  return b.length <= a.length && b.every((x, i) => x === a[i]);
}
const calls = (msgs) => msgs.flatMap((m) => (m.role === "assistant" ? m.content.filter((b) => b.type === "toolCall").map((b) => b.id) : []));

/** Run `turns` turns through `engine` (history copied fresh each time, as OpenClaw reads it from its store). */
async function simulate(engine, history, from, turns, budget = BUDGET) {
  const outs = [];
  for (let k = from; k < from + turns; k++) {
    const r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(history), tokenBudget: budget, model: "m" });
    outs.push(r);
    history.push(...toolTurn(k));
  }
  return outs;
}

function breaks(outs, prev = null) {
  let n = 0;
  const at = [];
  for (let i = 0; i < outs.length; i++) {
    const before = i > 0 ? outs[i - 1].messages : prev;
    if (before && !startsWith(outs[i].messages, before)) {
      n++;
      at.push(i);
    }
  }
  return { n, at };
}

test("40 turns: each prompt starts with the one before except at a boundary move; at most one move per 7 turns", async () => {
  forgetStateFiles();
  const { paths } = setup();
  const engine = engineOf(paths);
  const outs = await simulate(engine, [], 1, 40);
  const { n, at } = breaks(outs);
  const stats = JSON.parse(fs.readFileSync(paths.statsPath, "utf8")).sessions["agent:main:main"];
  assert.ok(n >= 2, `the boundary moved (${n})`); // a 40-turn session of 4.5k-token results must hide something
  assert.ok(n <= Math.floor(40 / 7), `prefix breaks ${n} at ${at}`);
  assert.equal(stats.boundaryMoves, n, "every break is a recorded boundary move");
  // the last move's figures (for occd's cost model) within their bounds: what the prompt held before and after,
  // and the part before the first newly hidden turn that stays a cache read
  const lm = stats.lastMove;
  const last = at[at.length - 1];
  assert.ok(lm.turns >= RULES.batchTurns);
  assert.equal(lm.charsAfter, outs[last].messages.reduce((n, m) => n + m.content.reduce((a, b) => a + (b.text?.length ?? JSON.stringify(b.arguments ?? null).length), 0), 0));
  assert.ok(0 <= lm.prefixChars && lm.prefixChars < lm.charsAfter && lm.charsAfter < lm.charsBefore);
  const shared = outs[last].messages.findIndex((m, i) => JSON.stringify(m) !== JSON.stringify(outs[last - 1].messages[i]));
  const prefix = outs[last].messages.slice(0, shared).reduce((n, m) => n + m.content.reduce((a, b) => a + (b.text?.length ?? 0), 0), 0);
  assert.equal(lm.prefixChars, prefix, "the prefix that stays cached is exactly the messages before the first change");
  for (const i of at) {
    // a move hides a batch: at least batchTurns turns more than the prompt before
    assert.ok(calls(outs[i - 1].messages).length + 1 - calls(outs[i].messages).length >= RULES.batchTurns);
    // ... and lands the prompt at or under the low water (the newest keepTurns kept whole)
    assert.ok(outs[i].estimatedTokens <= 0.3 * BUDGET || calls(outs[i].messages).length === RULES.keepTurns);
  }
  for (const o of outs) {
    // never above the high water by more than one turn, never fewer than keepTurns results (bounds)
    assert.ok(o.estimatedTokens <= 0.8 * BUDGET, `${o.estimatedTokens}`); // a turn's growth counted ahead
    assert.ok(calls(o.messages).length >= Math.min(RULES.keepTurns, outs.indexOf(o)));
  }
});

test("the count rule alone (not sticky) breaks the prefix every batchTurns turns: the sticky view breaks less", async () => {
  const history = [];
  const outs = [];
  for (let k = 1; k <= 40; k++) {
    outs.push(leanView(structuredClone(history), RULES));
    history.push(...toolTurn(k));
  }
  const plain = breaks(outs).n;
  forgetStateFiles();
  const { paths } = setup();
  const sticky = breaks(await simulate(engineOf(paths), [], 1, 40)).n;
  assert.ok(plain >= 8, `count rule: ${plain}`);
  assert.ok(sticky < plain, `sticky ${sticky} < count rule ${plain}`);
});

test("a hidden turn stays hidden: a larger budget later, or a policy re-read, never brings it back", async () => {
  forgetStateFiles();
  const { paths } = setup();
  const engine = engineOf(paths);
  const history = [];
  const outs = await simulate(engine, history, 1, 20);
  const hiddenBefore = 19 - calls(outs[19].messages).length; // outs[19] was assembled on 19 turns
  assert.ok(hiddenBefore >= 4);
  const r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(history), tokenBudget: 10_000_000 });
  assert.ok(startsWith(r.messages, outs[19].messages), "the same prefix under a huge budget");
  assert.equal(history.filter((m) => m.role === "user").length - calls(r.messages).length, hiddenBefore);
});

test("restart: which turns are hidden survives a new process (state file): the same prompts as without a restart", async () => {
  forgetStateFiles();
  const a = setup(), b = setup();
  const ha = [], hb = [];
  const straight = await simulate(engineOf(a.paths), ha, 1, 26);
  const first = await simulate(engineOf(b.paths), hb, 1, 20);
  const state = fs.readFileSync(b.paths.statePath, "utf8");
  assert.ok(!state.includes("doc") && !state.includes("Q1") && !state.includes("www"), "ids and counts, never content");
  const saved = JSON.parse(state).sessions["agent:main:main"];
  assert.ok(saved.hidden.length >= 4 && saved.moves >= 1);
  forgetStateFiles(); // a gateway restart: nothing in memory
  const second = await simulate(engineOf(b.paths), hb, 21, 6);
  for (let i = 0; i < 6; i++) assert.deepEqual(json(second[i].messages), json(straight[20 + i].messages), `turn ${21 + i}`);
  assert.equal(breaks(second, first[19].messages).n, breaks(straight.slice(20), straight[19].messages).n);
  // without the state file the same history is cut elsewhere (the test is not vacuous)
  fs.rmSync(b.paths.statePath);
  forgetStateFiles();
  const fresh = await engineOf(b.paths).assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(hb), tokenBudget: BUDGET, model: "m" });
  assert.ok(!startsWith(fresh.messages, straight[25].messages));
});

test("chooseHidden: no move under the high water; a move hides at least a batch and lands at the low water", () => {
  const ids = Array.from({ length: 20 }, (_, t) => `t${t}`);
  const toolTurns = ids.map((_, t) => t);
  const saved = new Map(toolTurns.map((t) => [t, 4000 * 4]));
  // (a cache write priced so high that the cost rule never moves: this test is about the budget)
  const rules = { keepTurns: 3, batchTurns: 2, highWater: 0.6, lowWater: 0.3, cacheCostRatio: 1e5 };
  // (growth: the newest three turns' 4000 tokens count ahead of the high water)
  // 20 turns of 4000 tokens = 80k; budget 200k: under 0.6 -> nothing
  let r = chooseHidden({ ids, units: toolTurns, saved, charsIn: 80000 * 4, rules, tokenBudget: 200000, hiddenIds: new Set() });
  assert.deepEqual([r.hidden, r.added, r.moved], [[], [], false]);
  assert.equal(r.charsBefore, r.charsAfter);
  // budget 100k: 80k > 60k -> hide until <= 30k: 13 turns (80k - 13*4k = 28k)
  r = chooseHidden({ ids, units: toolTurns, saved, charsIn: 80000 * 4, rules, tokenBudget: 100000, hiddenIds: new Set() });
  assert.equal(r.hidden.length, 13);
  assert.deepEqual(r.hidden, toolTurns.slice(0, 13));
  assert.equal(r.charsBefore - r.charsAfter, 13 * 16000);
  // the next call with those hidden: no move (28k < 60k), the same turns stay hidden
  const again = chooseHidden({ ids, units: toolTurns, saved, charsIn: 80000 * 4, rules, tokenBudget: 100000, hiddenIds: new Set(r.added) });
  assert.deepEqual(again.hidden, r.hidden);
  assert.equal(again.moved, false);
  // keepTurns bound: a tiny budget hides all but the newest 3
  r = chooseHidden({ ids, units: toolTurns, saved, charsIn: 80000 * 4, rules, tokenBudget: 1000, hiddenIds: new Set() });
  assert.equal(r.hidden.length, 17);
  // no budget: only the cost rule moves (below)
  r = chooseHidden({ ids: ids.slice(0, 5), units: [0, 1, 2, 3, 4], saved, charsIn: 1, rules, tokenBudget: undefined, hiddenIds: new Set() });
  assert.equal(r.moved, false);
});

test("chooseHidden, the cost rule: with 5 equal turns kept a move pays once ~8 turns are hideable, whatever the budget", () => {
  const n = 30;
  const ids = Array.from({ length: n }, (_, t) => `t${t}`);
  const saved = new Map(ids.map((_, t) => [t, 16000]));
  const rules = { keepTurns: 5, batchTurns: 4, highWater: 0.9, lowWater: 0.3, cacheCostRatio: 11.5, requestsPerTurn: 2 };
  const firstMove = (budget) => {
    for (let v = 1; v <= n; v++) {
      const toolTurns = ids.slice(0, v).map((_, t) => t);
      const r = chooseHidden({ ids: ids.slice(0, v), units: toolTurns, saved, charsIn: v * 16000, rules, tokenBudget: budget, hiddenIds: new Set() });
      if (r.moved) return { v, r };
    }
    return null;
  };
  // D^2 >= 2 * 11.5 * K * g / 2 with K = 5 turns, g = 1 turn: D >= sqrt(57.5) = 7.6 turns -> 8 hideable, 13 visible
  for (const budget of [undefined, 1e6, 1e7]) {
    const { v, r } = firstMove(budget);
    assert.equal(v, 13, `budget ${budget}`);
    assert.equal(r.why, "pays");
    assert.deepEqual(r.hidden, [0, 1, 2, 3, 4, 5, 6, 7], "every turn but the newest keepTurns");
  }
  // a cheaper write (OpenAI-style, ratio 9) moves a turn earlier; a dearer one later
  const at = (ratio) => { for (let v = 1; v <= n; v++) { const r = chooseHidden({ ids: ids.slice(0, v), units: ids.slice(0, v).map((_, t) => t), saved, charsIn: v * 16000, rules: { ...rules, cacheCostRatio: ratio }, tokenBudget: undefined, hiddenIds: new Set() }); if (r.moved) return v; } return null; };
  assert.ok(at(9) < 13 && at(30) > 13, `${at(9)} ${at(30)}`);
  // a tight budget moves before the cost rule does (the budget reason), keeping the newest 5
  const toolTurns = ids.slice(0, 10).map((_, t) => t);
  const r = chooseHidden({ ids: ids.slice(0, 10), units: toolTurns, saved, charsIn: 10 * 16000, rules, tokenBudget: 45000, hiddenIds: new Set() });
  assert.equal(r.why, "budget");
  assert.ok(r.hidden.length >= 4 && r.hidden.length <= 5);
  // past the whole budget a move happens even with fewer than keep + batch visible
  const seven = ids.slice(0, 7).map((_, t) => t);
  const p = chooseHidden({ ids: ids.slice(0, 7), units: seven, saved, charsIn: 7 * 16000, rules, tokenBudget: 30000, hiddenIds: new Set() });
  assert.deepEqual([p.why, p.hidden], ["budget", [0, 1]]);
});

test("state file: atomic write keeps the mode, a damaged file reads as empty (no throw)", () => {
  const d = tmp();
  const f = path.join(d, "state.json");
  fs.writeFileSync(f, "{not json");
  fs.chmodSync(f, 0o640);
  const sf = new StateFile(f);
  assert.equal(sf.get("k").hiddenIds.size, 0);
  sf.addHidden("k", "sid", ["a", "b"], 2);
  assert.equal(fs.statSync(f).mode & 0o777, 0o640);
  assert.deepEqual([...new StateFile(f).get("k").hiddenIds], ["a", "b"]);
  assert.deepEqual(fs.readdirSync(d), ["state.json"], "no temp file left");
  writeAtomic(f, "{}");
  assert.equal(new StateFile(f).get("k").hiddenIds.size, 0);
});

// --- issue 30.2: runs of many calls, OpenClaw's cap on a prompt's tool results ------------------------------
const runTurn = (k, n = 4) => {
  const out = [user(`Q${k}`)];
  for (let j = 0; j < n; j++) out.push(asst([call(`c${k}_${j}`)], "toolUse"), result(`c${k}_${j}`, `${DOC} doc${k}_${j}`));
  out.push(asst([{ type: "text", text: `A${k}` }]));
  return out.map((m, j) => ({ ...m, timestamp: 1_800_000_000_000 + k * 1000 + j }));
};
const resultChars = (msgs) => msgs.filter((m) => m.role === "toolResult").reduce((n, m) => n + m.content[0].text.length, 0);

async function runs(paths, turns, window) {
  const config = { models: { providers: { p: { models: [{ id: "m", contextWindow: window }] } } } };
  const engine = createEngine({ ...paths, config });
  const history = [];
  const outs = [];
  for (let k = 0; k < turns; k++) {
    outs.push(await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(history),
                                      tokenBudget: window - 40000, model: "m" }));
    history.push(...runTurn(k));
  }
  return { outs, history };
}

test("aggregateCapChars: OpenClaw's cap on a prompt's tool results, by window", () => {
  assert.equal(aggregateCapChars(128000), 256000);
  assert.equal(aggregateCapChars(96000), 192000);
  assert.equal(aggregateCapChars(200000), 400000);
  assert.equal(aggregateCapChars(32000), 64000);
  assert.equal(aggregateCapChars(undefined), Infinity);
});

test("contextWindowOf: the model's entry in OpenClaw's config, else the budget plus the output reserve", () => {
  const config = { models: { providers: { a: { models: [{ id: "m", contextWindow: 128000 }] },
                                          b: { models: [{ id: "m", contextWindow: 200000, contextTokens: 64000 }, null] } } } };
  assert.equal(contextWindowOf(config, { model: "m", tokenBudget: 5 }), 128000);
  assert.equal(contextWindowOf(config, { model: "m", runtimeSettings: { provider: "b" } }), 64000);
  assert.equal(contextWindowOf(config, { model: "x", tokenBudget: 90000, runtimeSettings: { maxOutputTokens: 8000 } }), 98000);
  assert.equal(contextWindowOf({ models: { providers: { a: { models: "junk" } } } }, { model: "m", tokenBudget: 7 }), 7);
  assert.equal(contextWindowOf(null, {}), undefined);
});

test("runs of 4 calls, 128k: the newest 5 results always whole, the prompt's results under OpenClaw's cap, every question kept", async () => {
  forgetStateFiles();
  const { paths } = setup({ ...RULES, keepResults: 5 });
  const { outs } = await runs(paths, 14, 128000);
  const cap = aggregateCapChars(128000);
  outs.forEach((r, k) => {
    // what the run adds (4 results) must fit beside what assemble() hands on
    assert.ok(resultChars(r.messages) + 4 * (DOC.length + 8) <= cap, `turn ${k}: ${resultChars(r.messages)}`);
    const ids = r.messages.filter((m) => m.role === "toolResult").map((m) => m.toolCallId);
    const want = Array.from({ length: k }, (_, t) => [0, 1, 2, 3].map((j) => `c${t}_${j}`)).flat().slice(-5);
    assert.deepEqual(ids.slice(-want.length), want, `turn ${k}: the newest 5 whole`);
    assert.equal(r.messages.filter((m) => m.role === "user").length, k);
  });
  const { n, at } = breaks(outs);
  assert.ok(n >= 3 && n <= 7, `a move at most every other turn: ${n} at ${at}`);
  for (let i = 1; i < at.length; i++) assert.ok(at[i] - at[i - 1] >= 2, `moves at ${at}`);
  const stats = JSON.parse(fs.readFileSync(paths.statsPath, "utf8")).sessions["agent:main:main"];
  assert.equal(stats.boundaryMoves, n);
  assert.equal(stats.lastMove.why, "cap");
  // a move hides down to the newest 5 results: the run before is cut between its calls
  assert.equal(outs.at(-1 - (outs.length - 1 - at.at(-1))).messages.filter((m) => m.role === "toolResult").length, 5);
  // without the cap (a window 10x larger) the same session's prompt passes 256k chars of results: the rule acts
  forgetStateFiles();
  const big = await runs(setup({ ...RULES, keepResults: 5 }).paths, 14, 1280000);
  assert.ok(big.outs.some((r) => resultChars(r.messages) + 4 * (DOC.length + 8) > cap));
});

test("the cap counts every result: a never-hidden tool's results and short ones too (OpenClaw's cap counts them)", async () => {
  // each run: a memory lookup (never hidden, 9 KB), a listing (short: never hidden) and 3 reads of 18 KB
  const MEM = "m".repeat(9000);
  const memTurn = (k) => {
    const out = [user(`Q${k}`)];
    out.push(asst([{ type: "toolCall", id: `m${k}`, name: "memory_get", arguments: {} }], "toolUse"),
             { role: "toolResult", toolCallId: `m${k}`, toolName: "memory_get", content: [{ type: "text", text: `${MEM}${k}` }], isError: false });
    out.push(asst([call(`l${k}`)], "toolUse"), result(`l${k}`, `ls ${k}`));
    for (let j = 0; j < 3; j++) out.push(asst([call(`c${k}_${j}`)], "toolUse"), result(`c${k}_${j}`, `${DOC} doc${k}_${j}`));
    out.push(asst([{ type: "text", text: `A${k}` }]));
    return out.map((m, j) => ({ ...m, timestamp: 1_800_000_000_000 + k * 1000 + j }));
  };
  const run = async (paths) => {
    const engine = createEngine({ ...paths, config: CONFIG });
    const history = [];
    const outs = [];
    for (let k = 0; k < 12; k++) {
      outs.push(await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(history),
                                        tokenBudget: 88000, model: "m" }));
      history.push(...memTurn(k));
    }
    return outs;
  };
  forgetStateFiles();
  const outs = await run(setup({ ...RULES, keepResults: 5, neverHide: ["memory_*"] }).paths);
  const cap = aggregateCapChars(128000);
  const growth = resultChars(memTurn(0));
  outs.forEach((r, k) => {
    assert.ok(resultChars(r.messages) + growth <= cap, `turn ${k}: ${resultChars(r.messages)} + ${growth} > ${cap}`);
    assert.equal(r.messages.filter((m) => m.toolName === "memory_get").length, k, "memory results are never hidden");
  });
});

test("units survive a restart, and a state of whole turns (before units) still hides those turns", async () => {
  forgetStateFiles();
  const a = setup({ ...RULES, keepResults: 5 });
  const b = setup({ ...RULES, keepResults: 5 });
  const straight = (await runs(a.paths, 12, 128000)).outs;
  const { history } = await runs(b.paths, 8, 128000);
  forgetStateFiles(); // a gateway restart: only the state file is left
  const state = JSON.parse(fs.readFileSync(b.paths.statePath, "utf8")).sessions["agent:main:main"];
  assert.ok(state.hidden.some((id) => id.includes("/")) || state.hidden.length > 0);
  assert.ok(state.hidden.every((id) => /^[0-9a-f]{20}(#\d+)?(\/\d+)?$/.test(id)), "hashes and ranks only");
  const config = { models: { providers: { p: { models: [{ id: "m", contextWindow: 128000 }] } } } };
  const engine = createEngine({ ...b.paths, config });
  for (let k = 8; k < 12; k++) {
    const r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(history), tokenBudget: 88000, model: "m" });
    assert.deepEqual(json(r.messages), json(straight[k].messages), `turn ${k} after the restart`);
    history.push(...runTurn(k));
  }
  // a state written before units: the ids of whole turns hide every unit of those turns
  forgetStateFiles();
  const c = setup({ ...RULES, keepResults: 5 });
  const old = [];
  for (let k = 0; k < 6; k++) old.push(...runTurn(k));
  const firstOfTurn = new Map();
  old.forEach((m, i) => { if (m.role === "user") firstOfTurn.set(firstOfTurn.size, i); });
  const tids = turnIds(old, firstOfTurn, 6);
  fs.writeFileSync(c.paths.statePath, JSON.stringify({ version: 1, sessions: { "agent:main:main": { hidden: [tids[0], tids[1]], moves: 1 } } }));
  // (a window large enough that no move is due: only the old state hides)
  const roomy = { models: { providers: { p: { models: [{ id: "m", contextWindow: 1280000 }] } } } };
  const r = await createEngine({ ...c.paths, config: roomy }).assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(old), tokenBudget: 1200000, model: "m" });
  const ids = r.messages.filter((m) => m.role === "toolResult").map((m) => m.toolCallId);
  assert.ok(!ids.some((id) => id.startsWith("c0_") || id.startsWith("c1_")), ids.join(","));
  assert.ok(ids.includes("c5_3") && ids.includes("c2_0"), ids.join(","));
});

// --- the cost rule counts the session's own requests a turn (every request of a run reads the prompt again) --
test("the cost rule's requests a turn are the session's own: runs of many calls move sooner, a set figure wins", async () => {
  const { requestsPerTurn } = await import(path.join(PLUGIN, "sticky.js"));
  const n = 30;
  const ids = Array.from({ length: n }, (_, t) => `t${t}`);
  const saved = new Map(ids.map((_, t) => [t, 16000]));
  const rules = { keepTurns: 5, batchTurns: 4, highWater: 0.9, lowWater: 0.3, cacheCostRatio: 11.5 };
  const firstMove = (rs, perTurn) => {
    const requestsByTurn = new Map(ids.map((_, t) => [t, perTurn]));
    for (let v = 1; v <= n; v++) {
      const units = ids.slice(0, v).map((_, t) => t);
      const r = chooseHidden({ ids: ids.slice(0, v), units, saved, charsIn: v * 16000, rules: rs, tokenBudget: undefined,
                               hiddenIds: new Set(), requestsByTurn });
      if (r.moved) return [v, r.why];
    }
    return null;
  };
  // 2 requests a turn: D >= sqrt(57.5) = 7.6 turns -> 13 visible (as before); 13 a turn (a run of 12 calls):
  // D >= sqrt(2 * 11.5 * 5 / 13) = 3.0 turns, but a move hides at least batchTurns (4) -> 9 visible
  assert.deepEqual(firstMove(rules, 2), [13, "pays"]);
  assert.deepEqual(firstMove(rules, 13), [9, "pays"]);
  assert.deepEqual(firstMove({ ...rules, requestsPerTurn: 2 }, 13), [13, "pays"], "a set figure wins over the session's");
  // the figure: the mean of the newest three tool turns among the units; 2 for a session without any
  const byTurn = new Map([[0, 40], [1, 5], [2, 1], [3, 3], [4, 9]]);
  assert.equal(requestsPerTurn({ rules: {}, units: [0, 1, 2, 3, 4], requestsByTurn: byTurn }), (1 + 3 + 9) / 3);
  assert.equal(requestsPerTurn({ rules: {}, units: [0, 1], requestsByTurn: byTurn }), (40 + 5) / 2);
  assert.equal(requestsPerTurn({ rules: {}, units: [], requestsByTurn: byTurn }), 2);
  assert.equal(requestsPerTurn({ rules: { requestsPerTurn: 0.5 }, units: [0], requestsByTurn: byTurn }), 0.5);
  assert.equal(requestsPerTurn({ rules: { requestsPerTurn: null }, units: [0] }), 2);
  // leanView counts them from the messages: a run of 4 calls is 5 requests
  let got = null;
  forgetStateFiles();
  leanView([...runTurn(0), ...runTurn(1, 2)], { ...RULES, keepResults: 5 }, (ctx) => { got = ctx.requestsByTurn; return []; });
  assert.deepEqual([...got.entries()], [[0, 5], [1, 3]]);
});

test("a cold cache: after the provider's cache lifetime a move costs nothing, so the view hides all it may", async () => {
  const { coldCache, lastRequestAt } = await import(path.join(PLUGIN, "sticky.js"));
  const t0 = 1_800_000_000_000;
  const msgs = [user("Q"), { ...asst([{ type: "text", text: "A" }]), timestamp: t0 }];
  assert.equal(lastRequestAt(msgs), t0);
  assert.equal(lastRequestAt([{ ...msgs[1], timestamp: t0 / 1000 }]), t0, "seconds");
  assert.equal(lastRequestAt([{ ...msgs[1], timestamp: new Date(t0).toISOString() }]), t0, "ISO text");
  assert.equal(lastRequestAt([user("Q")]), null);
  assert.equal(coldCache(msgs, { cacheTtlSeconds: 300 }, t0 + 299_000), false);
  assert.equal(coldCache(msgs, { cacheTtlSeconds: 300 }, t0 + 300_000), true);
  assert.equal(coldCache(msgs, { cacheTtlSeconds: null }, t0 + 1e9), false, "no lifetime: never counted on");
  assert.equal(coldCache(msgs, { cacheTtlSeconds: 300 }, t0 - 1e6), false, "a time in the future: warm");
  // 7 tool turns of one call, 5 kept: 2 hideable, too few for the cost rule (batchTurns 4) and far from any budget
  const ids = Array.from({ length: 7 }, (_, t) => `t${t}`);
  const saved = new Map(ids.map((_, t) => [t, 16000]));
  const rules = { keepTurns: 5, batchTurns: 4, highWater: 0.9, lowWater: 0.3, cacheCostRatio: 11.5 };
  const ctx = { ids, units: ids.map((_, t) => t), saved, charsIn: 7 * 16000, rules, tokenBudget: 1e6, hiddenIds: new Set() };
  assert.equal(chooseHidden(ctx).moved, false);
  const r = chooseHidden({ ...ctx, cold: true });
  assert.deepEqual([r.why, r.hidden], ["cold", [0, 1]]);
  assert.equal(chooseHidden({ ...ctx, ids: ids.slice(0, 5), units: [0, 1, 2, 3, 4], cold: true }).moved, false, "nothing to hide");
  // through the engine: the same history, the last answer 6 minutes old against 4 minutes old
  const history = [];
  for (let k = 0; k < 7; k++) history.push(...toolTurn(k));
  const lastAt = history.at(-1).timestamp;
  const assembleAt = async (ageMs) => {
    forgetStateFiles();
    const { paths } = setup({ ...RULES, cacheTtlSeconds: 300 });
    const realNow = Date.now;
    Date.now = () => lastAt + ageMs;
    try {
      return await engineOf(paths).assemble({ sessionId: "s1", sessionKey: "agent:main:main",
                                              messages: structuredClone(history), tokenBudget: BUDGET, model: "m" });
    } finally {
      Date.now = realNow;
    }
  };
  const warm = await assembleAt(240_000);
  const cold = await assembleAt(360_000);
  const results = (out) => out.messages.filter((m) => m.role === "toolResult").length;
  assert.deepEqual([results(warm), results(cold)], [7, 5]);
  assert.equal(cold.messages.filter((m) => m.role === "user").length, 7, "every question kept");
});

test("a side session forked from a session's transcript (9.x memory flush) is seen as that session: lean, and moves nothing", async () => {
  forgetStateFiles();
  const { d, paths } = setup({ ...RULES, mode: "off" });
  // occd's rules name the session only (as the daemon writes them); the default is off
  fs.writeFileSync(paths.policyPath, JSON.stringify({ default: { mode: "off" }, sessions: { "agent:main:main": RULES } }));
  const engine = engineOf(paths);
  const history = [];
  for (let k = 0; k < 20; k++) {
    await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(history), tokenBudget: BUDGET, model: "m" });
    history.push(...toolTurn(k));
  }
  const stateBefore = fs.readFileSync(paths.statePath, "utf8");
  const movesBefore = JSON.parse(fs.readFileSync(paths.statsPath, "utf8")).sessions["agent:main:main"].boundaryMoves;
  assert.ok(movesBefore >= 1, "the session's boundary moved before the flush");
  const side = await engine.assemble({ sessionId: "internal-1", sessionKey: "agent:main:internal-session-effects:run-1",
                                       messages: structuredClone(history), tokenBudget: BUDGET, model: "m" });
  const next = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: structuredClone(history), tokenBudget: BUDGET, model: "m" });
  assert.ok(side.messages.length < history.length, "the side session is lean");
  assert.deepEqual(json(side.messages), json(next.messages), "as the session's own next turn sees it");
  const stats = JSON.parse(fs.readFileSync(paths.statsPath, "utf8")).sessions;
  assert.equal(stats["agent:main:internal-session-effects:run-1"].sideOf, "agent:main:main");
  assert.equal(stats["agent:main:internal-session-effects:run-1"].boundaryMoves, undefined, "no move reported for it");
  const state = JSON.parse(fs.readFileSync(paths.statePath, "utf8"));
  assert.equal(state.sessions["agent:main:internal-session-effects:run-1"], undefined, "nothing persisted for it");
  assert.ok(fs.readFileSync(paths.statePath, "utf8") === stateBefore || stats["agent:main:main"].boundaryMoves > movesBefore,
            "the side session moved nothing: only the session's own turn may");
  // a side session that matches no session (another transcript), or one with rules of its own: its own rules
  const other = [];
  for (let k = 100; k < 120; k++) other.push(...toolTurn(k));
  const stranger = await engine.assemble({ sessionId: "internal-2", sessionKey: "agent:main:internal-session-effects:run-2",
                                           messages: structuredClone(other), tokenBudget: BUDGET, model: "m" });
  assert.equal(stranger.messages.length, other.length, "default rules (off): whole");
  fs.rmSync(d, { recursive: true, force: true });
});
