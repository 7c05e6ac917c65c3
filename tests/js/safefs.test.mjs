// Issue 31.1 and 31.2: nothing put at the names of the plugin's files can stall OpenClaw's gateway, and the
// plugin's temp files never write through a link. Run: node --test tests/js/
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PLUGIN = path.join(HERE, "..", "..", "occd", "lean", "plugin");
const safefs = await import(path.join(PLUGIN, "safefs.js"));
const { createEngine } = await import(path.join(PLUGIN, "index.js"));
const { StateFile, forgetStateFiles } = await import(path.join(PLUGIN, "sticky.js"));
const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), "occd-safefs-"));

function runCase(which, kind) {
  const d = tmp();
  const p = spawnSync(process.execPath, [path.join(HERE, "fixtures", "hostile-file.mjs"), PLUGIN, d, which, kind],
                      { encoding: "utf8", timeout: 20000 });
  assert.equal(p.error?.code, undefined, `${which} as ${kind}: the plugin hung (${p.error?.code})`);
  assert.equal(p.status, 0, p.stderr);
  return JSON.parse(p.stdout.trim().split("\n").at(-1));
}

test("control: with regular files the same history is leaned (the cases below would hide turns)", () => {
  for (const which of ["policy", "stats", "state"]) {
    const r = runCase(which, "none");
    assert.ok(r.out.every((o) => !o.same && o.n < r.n), JSON.stringify(r.out));
    assert.deepEqual(r.lines, []);
  }
});

for (const which of ["policy", "stats", "state"]) {
  for (const kind of ["fifo", "devzero", "huge", "dir", "link"]) {
    test(`${which}.json as ${kind}: assemble() returns at once with OpenClaw's history, one log line, the file left alone`, () => {
      const r = runCase(which, kind);
      for (const o of r.out) {
        assert.ok(o.ms < 2000, `took ${o.ms} ms`);
        assert.equal(o.same, true, "fails open: the history unchanged");
        assert.ok(Number.isFinite(o.est) && o.est > 0);
      }
      assert.equal(r.lines.length, 1, `one error line for three turns: ${JSON.stringify(r.lines)}`);
      assert.match(r.lines[0], new RegExp(`occd-lean.*${which}\\.json refused`));
      if (kind === "fifo") assert.ok(r.after.fifo);
      if (kind === "devzero") assert.equal(r.after.link, "/dev/zero");
      if (kind === "link") assert.ok(r.after.symlink);
      if (kind === "dir") assert.ok(r.after.dir);
      if (kind === "huge") assert.equal(r.after.size, safefs.MAX_BYTES + 4096);
    });
  }
}

test("readRegular: a missing file is null, a regular one read, anything else refused without blocking", () => {
  const d = tmp();
  assert.equal(safefs.readRegular(path.join(d, "none")), null);
  fs.writeFileSync(path.join(d, "ok"), "{\"a\":1}");
  assert.equal(safefs.readRegular(path.join(d, "ok")), "{\"a\":1}");
  fs.symlinkSync("/dev/zero", path.join(d, "zero"));
  assert.throws(() => safefs.readRegular(path.join(d, "zero")), (e) => e instanceof safefs.Refused && /symbolic link/.test(e.why));
  assert.throws(() => safefs.readRegular("/dev/null"), (e) => e instanceof safefs.Refused);
  fs.writeFileSync(path.join(d, "big"), "y".repeat(5000));
  assert.throws(() => safefs.readRegular(path.join(d, "big"), { maxBytes: 4999 }), /larger than 4999 bytes/);
  assert.equal(safefs.readRegular(path.join(d, "big"), { maxBytes: 5000 }).length, 5000);
});

test("time budget: a read over it is abandoned and the file left alone for a while (one slow turn, not every turn)", () => {
  const d = tmp();
  const f = path.join(d, "slow.json");
  fs.writeFileSync(f, "z".repeat(3 * 1024 * 1024)); // three chunks
  let now = 1000;
  let step = 400;
  const clock = () => (now += step); // every look at the clock: `step` ms later
  assert.throws(() => safefs.readRegular(f, { budgetMs: 250, clock }), /not read within 250 ms/);
  // cooling down: refused without reading, even when the disk is fast again
  step = 0;
  assert.throws(() => safefs.readRegular(f, { clock }), /left alone for a while/);
  now += safefs.COOL_DOWN_MS;
  assert.equal(safefs.readRegular(f, { clock }).length, 3 * 1024 * 1024);
  // a slow write is done, and the file then cools down too
  step = 400;
  safefs.writeAtomic(f, "{}", { budgetMs: 250, clock });
  assert.equal(fs.readFileSync(f, "utf8"), "{}");
  step = 0;
  assert.throws(() => safefs.writeAtomic(f, "{}", { clock }), /left alone for a while/);
  safefs.forgetSlow();
  assert.equal(safefs.readRegular(f), "{}");
});

// --- 31.2: temp files --------------------------------------------------------------------------------------
test("temp names: beside the file, hidden, unpredictable (never the pid), different every time", () => {
  const f = "/x/stats.json";
  const names = new Set(Array.from({ length: 50 }, () => safefs.tempName(f)));
  assert.equal(names.size, 50);
  for (const n of names) {
    assert.equal(path.dirname(n), "/x");
    assert.match(path.basename(n), /^\.stats\.json\.[0-9a-f]{24}\.tmp$/);
    assert.notEqual(n, `${f}.${process.pid}.tmp`);
  }
});

test("a link or a file planted at the temp name is never written through or removed; the target is not touched", () => {
  const d = tmp();
  const f = path.join(d, "state.json");
  const victim = path.join(d, "victim.txt");
  fs.writeFileSync(victim, "precious");
  fs.writeFileSync(f, "{\"old\":1}");
  const fixed = () => "0123456789abcdef01234567";
  const planted = safefs.tempName(f, fixed);
  fs.symlinkSync(victim, planted);
  assert.throws(() => safefs.writeAtomic(f, "{\"new\":1}", { random: fixed }), (e) => e.code === "EEXIST");
  assert.equal(fs.readFileSync(victim, "utf8"), "precious");
  assert.equal(fs.readlinkSync(planted), victim, "somebody else's link is left as it was");
  assert.equal(fs.readFileSync(f, "utf8"), "{\"old\":1}");
  // with a name nobody could plant, the write goes through and leaves no temp file
  safefs.writeAtomic(f, "{\"new\":1}");
  assert.equal(fs.readFileSync(f, "utf8"), "{\"new\":1}");
  assert.deepEqual(fs.readdirSync(d).filter((n) => n.endsWith(".tmp")), [path.basename(planted)]);
});

test("a failed write removes its own temp file and keeps the old file", () => {
  const d = tmp();
  const f = path.join(d, "stats.json");
  fs.writeFileSync(f, "{\"old\":1}");
  const bad = { toString() { throw new Error("no text"); } }; // Buffer.from throws inside the write
  assert.throws(() => safefs.writeAtomic(f, bad));
  assert.deepEqual(fs.readdirSync(d), ["stats.json"]);
  assert.equal(fs.readFileSync(f, "utf8"), "{\"old\":1}");
});

test("the engine with links planted at every temp name pattern (old <file>.<pid>.tmp, new ones): no other file touched", async () => {
  const d = tmp();
  const victim = path.join(d, "victim.txt");
  fs.writeFileSync(victim, "precious");
  const paths = { policyPath: path.join(d, "policy.json"), statsPath: path.join(d, "stats.json"), statePath: path.join(d, "state.json") };
  fs.writeFileSync(paths.policyPath, JSON.stringify({ default: { mode: "drop", keepTurns: 1, batchTurns: 1 } }));
  const planted = [];
  for (const f of [paths.statsPath, paths.statePath, paths.policyPath]) {
    for (const name of [`${f}.${process.pid}.tmp`, `${f}.tmp`, `.${path.basename(f)}.tmp`, safefs.tempName(f)]) {
      const at = path.isAbsolute(name) ? name : path.join(d, name);
      fs.symlinkSync(victim, at);
      planted.push(at);
    }
  }
  forgetStateFiles();
  const engine = createEngine(paths);
  let seq = 0;
  const msgs = [1, 2, 3, 4].flatMap((k) => [
    { role: "user", content: [{ type: "text", text: `Q${k}` }], timestamp: ++seq },
    { role: "assistant", content: [{ type: "toolCall", id: `c${k}`, name: "read", arguments: {} }], stopReason: "toolUse", timestamp: ++seq },
    { role: "toolResult", toolCallId: `c${k}`, toolName: "read", content: [{ type: "text", text: "x".repeat(8000) }], timestamp: ++seq },
    { role: "assistant", content: [{ type: "text", text: `A${k}` }], stopReason: "stop", timestamp: ++seq },
  ]);
  for (let i = 0; i < 3; i++) {
    const r = await engine.assemble({ sessionId: "s1", sessionKey: "agent:main:main", messages: msgs, tokenBudget: 3000 });
    assert.ok(r.messages.length < msgs.length);
  }
  assert.equal(fs.readFileSync(victim, "utf8"), "precious");
  for (const at of planted) assert.equal(fs.readlinkSync(at), victim);
  assert.ok(JSON.parse(fs.readFileSync(paths.statsPath, "utf8")).sessions["agent:main:main"]);
  assert.ok(new StateFile(paths.statePath).get("agent:main:main").hiddenIds.size > 0);
});
