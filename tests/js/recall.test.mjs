// Issue 30.2: recall of the user's questions is whole and durable (a gateway restart does not lose it), also when
// OpenClaw's bounded load cuts between two turns. Run: node --test tests/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PLUGIN = path.join(HERE, "..", "..", "occd", "lean", "plugin");
const { createEngine } = await import(path.join(PLUGIN, "index.js"));
const { forgetRecall, recallOnCleanCut } = await import(path.join(PLUGIN, "recall.js"));
const { forgetStateFiles } = await import(path.join(PLUGIN, "sticky.js"));

let seq = 1_800_000_000_000;
const user = (text) => ({ role: "user", content: [{ type: "text", text }], timestamp: ++seq });
const asst = (content, stopReason = "stop") => ({ role: "assistant", content, stopReason, timestamp: ++seq });
const call = (id) => ({ type: "toolCall", id, name: "read", arguments: { p: id } });
const result = (id) => ({ role: "toolResult", toolCallId: id, toolName: "read", content: [{ type: "text", text: "d".repeat(6000) }], timestamp: ++seq });
// a run of 4 tool calls a turn
const turn = (k) => [user(`Question ${k}?`), ...[0, 1, 2, 3].flatMap((j) => [asst([call(`c${k}_${j}`)], "toolUse"), result(`c${k}_${j}`)]), asst([{ type: "text", text: `Answer ${k}.` }])];
const questions = (msgs) => msgs.filter((m) => m.role === "user").map((m) => m.content[0].text);

function setup(rules = { mode: "drop", keepTurns: 2, batchTurns: 1 }) {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "occd-recall-"));
  const paths = { policyPath: path.join(d, "policy.json"), statsPath: path.join(d, "stats.json"), statePath: path.join(d, "state.json") };
  fs.writeFileSync(paths.policyPath, JSON.stringify({ default: rules }));
  forgetRecall();
  forgetStateFiles();
  return { d, paths };
}
const P = { sessionId: "sid-1", sessionKey: "agent:main:main", tokenBudget: 100000 };

test("a gateway restart does not lose recall: the cut questions come back from the file, every one", async () => {
  const { d, paths } = setup();
  const full = Array.from({ length: 12 }, (_, i) => turn(i + 1)).flat();
  await createEngine(paths).assemble({ ...P, messages: full.slice(0, 10 * 10) });
  const files = fs.readdirSync(path.join(d, "recall"));
  assert.equal(files.length, 1);
  const f = path.join(d, "recall", files[0]);
  assert.equal(fs.statSync(f).mode & 0o777, 0o600);
  assert.ok(!fs.readFileSync(f, "utf8").includes("dddd"), "no tool results in the memory");
  // restart: a new process (no memory), OpenClaw's bounded load now starts in the middle of turn 5
  forgetRecall();
  forgetStateFiles();
  const cut = full.slice(4 * 10 + 3); // mid-turn 5: Q1..Q5 cut
  const r = await createEngine(paths).assemble({ ...P, messages: cut });
  assert.deepEqual(questions(r.messages), Array.from({ length: 12 }, (_, i) => `Question ${i + 1}?`));
  const stats = JSON.parse(fs.readFileSync(paths.statsPath, "utf8")).sessions[P.sessionKey];
  assert.equal(stats.turnsRecalled, 5);
});

test("a load cut exactly between two turns is recalled too (no history limit applies to the session)", async () => {
  const { paths } = setup();
  const engine = createEngine(paths);
  const full = Array.from({ length: 8 }, (_, i) => turn(i + 1)).flat();
  await engine.assemble({ ...P, messages: full.slice(0, 7 * 10) });
  const clean = full.slice(3 * 10); // starts with Question 4
  const r = await engine.assemble({ ...P, messages: clean });
  assert.deepEqual(questions(r.messages), Array.from({ length: 8 }, (_, i) => `Question ${i + 1}?`));
  // a channel session with the user's own history limit: a clean cut is the user's, taken as it is
  const cfg = { channels: { telegram: { dmHistoryLimit: 4 } } };
  const limited = createEngine({ ...paths, config: cfg });
  const key = "agent:main:telegram:direct:42";
  await limited.assemble({ ...P, sessionId: "sid-2", sessionKey: key, messages: full.slice(0, 7 * 10) });
  const r2 = await limited.assemble({ ...P, sessionId: "sid-2", sessionKey: key, messages: clean });
  assert.deepEqual(questions(r2.messages), questions(clean));
});

test("recallOnCleanCut: only where OpenClaw's history limit cannot apply", () => {
  assert.equal(recallOnCleanCut(undefined, "agent:main:main"), true);
  assert.equal(recallOnCleanCut(undefined, "agent:main:telegram:direct:42"), false);
  assert.equal(recallOnCleanCut({}, "agent:main:telegram:direct:42"), true);
  assert.equal(recallOnCleanCut({ channels: { telegram: { historyLimit: 9 } } }, "agent:main:telegram:group:7"), false);
  assert.equal(recallOnCleanCut({ channels: { Telegram: { accounts: { a: { dms: { x: { historyLimit: 3 } } } } } } }, "agent:main:telegram:direct:x"), false);
  assert.equal(recallOnCleanCut({ channels: { slack: { historyLimit: 9 } } }, "agent:main:telegram:group:7"), true);
});

test("a FIFO at the recall file's name: the history passes unchanged, at once", async () => {
  const { d, paths } = setup();
  const full = Array.from({ length: 6 }, (_, i) => turn(i + 1)).flat();
  await createEngine(paths).assemble({ ...P, messages: full });
  const [name] = fs.readdirSync(path.join(d, "recall"));
  fs.unlinkSync(path.join(d, "recall", name));
  execFileSync("mkfifo", [path.join(d, "recall", name)]);
  forgetRecall();
  const cut = full.slice(2 * 10 + 1);
  const t0 = Date.now();
  const r = await createEngine(paths).assemble({ ...P, messages: cut });
  assert.ok(Date.now() - t0 < 2000);
  assert.equal(r.messages, cut);
});

test("recall files are bounded: past RECALL_MAX_FILES the least recently written go", async () => {
  const { pruneRecallFiles } = await import(path.join(PLUGIN, "recall.js"));
  const d = fs.mkdtempSync(path.join(os.tmpdir(), "occd-recall-prune-"));
  for (let i = 0; i < 7; i++) {
    const f = path.join(d, `${String(i).padStart(32, "0")}.json`);
    fs.writeFileSync(f, "{}");
    fs.utimesSync(f, 1000 + i, 1000 + i);
  }
  fs.writeFileSync(path.join(d, "other.txt"), "not ours");
  pruneRecallFiles(d, 4);
  assert.deepEqual(fs.readdirSync(d).sort(), [3, 4, 5, 6].map((i) => `${String(i).padStart(32, "0")}.json`).concat(["other.txt"]).sort());
});
