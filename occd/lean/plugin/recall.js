// occd-lean: recall, the turns OpenClaw's bounded load left out (issue 30.2), and the text count both the view
// and recall use.
//
// What OpenClaw 2026.9.6 cuts before any context engine runs (dist/builtin-openclaw-*.mjs):
// - the session's load is bounded: SessionManager.openAsync(..., resolveEmbeddedSessionContextLimits(budget)) keeps
//   the newest stored events within maxBytes = min(64 MiB, max(1 KiB, 8 x the context token budget)) bytes of
//   stored rows (full tool results included) and at most 10,000 events: a tool-heavy session reaches assemble()
//   without its oldest turns, at any event (mid-turn, or between two turns), usually long before the lean prompt
//   would be full;
// - limitHistoryTurns(getHistoryLimitFromSessionKey(...)): the user's own historyLimit / dmHistoryLimit, set only
//   under `channels.<provider>` for that channel's sessions, cuts at a user turn;
// - heartbeat artifacts, the compaction replay window and tool-pairing repair; a compaction puts a summary first.
// assemble() gets tokenBudget = the prompt budget less the reserve and the rendered system prompt.
//
// The engine remembers the lean form of each turn it has seen (the user's message and the assistant's text; no
// tool calls, results or reasoning) per session id, in memory and in a file per session beside the plugin's state
// (0600, in occd's data dir: a gateway restart does not lose it). When the history it is handed starts part-way
// into a remembered turn, or at a remembered turn that is not the first while no history limit applies to the
// session, the remembered turns before it are put back in front: the questions, then the answers, newest first,
// each within a share of the token budget (one that does not fit whole is cut short). A history that starts
// anywhere else (a compaction summary, a reset, a rotation's seed) is taken as it is and the memory starts over.

import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { readRegular, writeAtomic } from "./safefs.js";

/** The characters of a message's content that reach the model (text, reasoning, a call's arguments). */
export function textChars(content) {
  if (typeof content === "string") return content.length;
  if (!Array.isArray(content)) return 0;
  let n = 0;
  for (const b of content) {
    if (b && typeof b === "object") {
      if (typeof b.text === "string") n += b.text.length;
      else if (typeof b.thinking === "string") n += b.thinking.length;
      else if (b.type === "toolCall") n += jsonLen(b.arguments);
      else if (typeof b.data === "string") n += b.data.length;
    }
  }
  return n;
}

function jsonLen(v) {
  try {
    return JSON.stringify(v ?? null).length;
  } catch {
    return 0;
  }
}

export const RECALL_SHARE = 0.15;      // at most this share of the engine's token budget goes to recalled answers
export const QUESTION_SHARE = 0.3;     // ... and this share to recalled questions (usually all of them, whole)
const RECALL_MAX_TURNS = 2000;         // per session
const RECALL_MAX_CHARS = 4_000_000;    // per session
const RECALL_MAX_SESSIONS = 200;
export const RECALL_MAX_FILES = 500;   // session files kept on disk (the least recently written go first)
const CUT = 300;                       // a recalled message that does not fit whole is cut to this many characters
const BOOTSTRAP_TEXT = "(session bootstrap)"; // what OpenClaw puts first when a cut history starts with a reply

// one memory per process: OpenClaw may create the engine more than once (a factory per run)
export const RECALL_MEMORY = new Map();

function messageText(m) {
  const c = m?.content;
  if (typeof c === "string") return c;
  if (!Array.isArray(c)) return "";
  return c.filter((b) => b && typeof b.text === "string").map((b) => b.text).join("\n");
}

function turnKey(m) {
  return `${m.timestamp ?? ""}|${messageText(m).slice(0, 300)}`;
}

function isSynthetic(m) {
  return m?.role === "user" && messageText(m).replace(/^\[[^\]]*\]\s*/, "").startsWith(BOOTSTRAP_TEXT);
}

/** The lean form of one turn's messages: the user's message and the assistant's text (no calls, results or
 * reasoning); an assistant message with no text left goes. */
export function leanTurn(msgs) {
  const out = [];
  for (const m of msgs) {
    if (!m || typeof m !== "object" || m.role === "toolResult") continue;
    if (m.role === "assistant" && Array.isArray(m.content)) {
      const content = m.content.filter((b) => b && b.type === "text" && typeof b.text === "string" && b.text.trim() !== "");
      if (content.length === 0) continue;
      out.push(content.length === m.content.length ? m : { ...m, content });
      continue;
    }
    out.push(m);
  }
  return out;
}

/** Split into turns at each user message: {lead, turns: [{key, msgs}]}; `lead` is what comes before the first
 * user message that is not OpenClaw's synthetic bootstrap (that one belongs to the lead). */
function splitTurns(messages) {
  const lead = [];
  const turns = [];
  for (const m of messages) {
    if (m?.role === "user" && !(turns.length === 0 && isSynthetic(m))) turns.push({ key: turnKey(m), msgs: [m] });
    else if (turns.length === 0) lead.push(m);
    else turns[turns.length - 1].msgs.push(m);
  }
  return { lead, turns };
}

/** Where `turns` start in the remembered ones: the index k whose run of keys matches theirs the furthest (the last
 * such k on a tie: equal-looking turns, e.g. the same "go on" with no timestamp, are told apart by what follows). */
function matchAt(mem, turns) {
  let best = -1;
  let bestLen = 0;
  for (let k = 0; k < mem.length; k++) {
    if (mem[k].key !== turns[0].key) continue;
    let n = 1;
    while (k + n < mem.length && n < turns.length && mem[k + n].key === turns[n].key) n++;
    if (n >= bestLen) {
      best = k;
      bestLen = n;
    }
  }
  return best;
}

/** The remembered turns to put back, in order: the questions newest first within `qRoom` characters, then the
 * answers newest first within `aRoom`; a message that does not fit whole is cut short (or left out when even
 * that does not fit). With questions of a usual size every one is whole. */
function recalledMessages(before, qRoom, aRoom) {
  const pick = new Map(); // message -> itself or its cut form
  const fill = (isMine, room) => {
    let used = 0;
    for (let i = before.length - 1; i >= 0; i--) {
      for (const m of before[i].msgs) {
        if (!isMine(m)) continue;
        const c = textChars(m.content);
        if (used + c <= room) {
          pick.set(m, m);
          used += c;
        } else if (used + CUT + 8 <= room) {
          pick.set(m, { ...m, content: [{ type: "text", text: `${messageText(m).slice(0, CUT)} [...]` }] });
          used += CUT + 8;
        }
      }
    }
  };
  fill((m) => m?.role === "user", qRoom);
  fill((m) => m?.role !== "user", aRoom);
  return before.flatMap((t) => t.msgs.filter((m) => pick.has(m)).map((m) => pick.get(m)));
}

/**
 * recall(memory, id, messages, tokenBudget, {cleanCut}) -> {messages, turnsRecalled}. Pure apart from `memory` (a
 * Map the caller keeps): remembers the lean turns of `messages` under `id`, and when `messages` starts part-way into
 * a remembered turn (its lead holds only replies, tool results or OpenClaw's bootstrap message), or with `cleanCut`
 * at a remembered turn that is not the first, returns the remembered turns before it (recalledMessages) followed by
 * `messages` from that whole turn on.
 */
export function recall(memory, id, messages, tokenBudget, { cleanCut = false } = {}) {
  if (!Array.isArray(messages) || id == null) return { messages, turnsRecalled: 0 };
  const { lead, turns } = splitTurns(messages);
  const mem = memory.get(id);
  const k = mem && turns.length > 0 ? matchAt(mem.turns, turns) : -1;
  // the lead: nothing (a cut between turns), or the rest of a turn whose start was cut off; anything else (a
  // compaction summary, ...) is a history OpenClaw rebuilt on purpose: the memory starts over from it
  const partial = lead.length > 0 && lead.every((m) => m?.role === "assistant" || m?.role === "toolResult" || isSynthetic(m));
  const before = k > 0 && (partial || lead.length === 0) ? mem.turns.slice(0, k) : [];
  remember(memory, id, before, turns);
  if (!(k > 0 && (partial || (cleanCut && lead.length === 0)))) return { messages, turnsRecalled: 0 };
  const chars = (share) => (Number.isFinite(tokenBudget) && tokenBudget > 0 ? tokenBudget * share * 4 : Infinity);
  const recalled = recalledMessages(before, chars(QUESTION_SHARE), chars(RECALL_SHARE));
  return { messages: [...recalled, ...messages.slice(lead.length)], turnsRecalled: k };
}

function remember(memory, id, before, turns) {
  const lean = turns.map((t) => ({ key: t.key, msgs: leanTurn(t.msgs) }));
  let all = [...before, ...lean];
  if (all.length > RECALL_MAX_TURNS) all = all.slice(all.length - RECALL_MAX_TURNS);
  let chars = all.reduce((n, t) => n + t.msgs.reduce((a, m) => a + textChars(m.content), 0), 0);
  while (chars > RECALL_MAX_CHARS && all.length > 1) {
    chars -= all[0].msgs.reduce((a, m) => a + textChars(m.content), 0);
    all = all.slice(1);
  }
  const prev = memory.get(id);
  memory.delete(id); // re-inserted last: the Map's order is the sessions' recency
  memory.set(id, { turns: all, saved: prev?.saved });
  while (memory.size > RECALL_MAX_SESSIONS) memory.delete(memory.keys().next().value);
}

/** No history limit of the user's can apply to this session (OpenClaw sets one only under `channels.<provider>`
 * for that provider's sessions): a history starting at a remembered turn was cut by the bounded load. Without the
 * config, only a session key that names no chat kind (agent:<id>:main, ...) is taken as such. */
export function recallOnCleanCut(config, sessionKey) {
  const parts = typeof sessionKey === "string" ? sessionKey.split(":") : [];
  const rest = parts[0] === "agent" && parts.length >= 3 ? parts.slice(2) : parts;
  const provider = (rest[0] ?? "").toLowerCase();
  const channels = config && typeof config === "object" ? config.channels : undefined;
  if (!channels || typeof channels !== "object") {
    return !(config && typeof config === "object") ? !rest.slice(1).some((p) => /^(direct|dm|group|channel)$/.test(p)) : true;
  }
  const entry = Object.entries(channels).find(([name]) => name.toLowerCase() === provider)?.[1];
  if (!entry || typeof entry !== "object") return true;
  let text;
  try {
    text = JSON.stringify(entry);
  } catch {
    return false;
  }
  return !/"(dm)?[hH]istoryLimit"\s*:/.test(text);
}

// ---------------------------------------------------------------------------------------------------------
// Durable: one file per session beside the plugin's state.

const fileOf = (dir, id) => path.join(dir, `${crypto.createHash("sha256").update(String(id)).digest("hex").slice(0, 32)}.json`);
const FILE_RE = /^[0-9a-f]{32}\.json$/;

/** At most RECALL_MAX_FILES session files in `dir`: the least recently written go (lstat only, never an open). */
export function pruneRecallFiles(dir, max = RECALL_MAX_FILES) {
  let names;
  try {
    names = fs.readdirSync(dir).filter((n) => FILE_RE.test(n));
  } catch {
    return;
  }
  if (names.length <= max) return;
  const when = (n) => {
    try {
      return fs.lstatSync(path.join(dir, n)).mtimeMs;
    } catch {
      return 0;
    }
  };
  const old = names.map((n) => [n, when(n)]).sort((a, b) => a[1] - b[1]).slice(0, names.length - max);
  for (const [n] of old) {
    try {
      fs.unlinkSync(path.join(dir, n));
    } catch {
      // gone already
    }
  }
}

const keysOf = (entry) => crypto.createHash("sha256").update(entry.turns.map((t) => t.key).join("\n")).digest("hex");

/**
 * recall() over a memory that survives a restart: a session this process has not seen yet is loaded from `dir`
 * (when there is one), and the session's memory is written back when its turns changed. A file refused
 * (safefs.Refused) throws: the engine then passes the history unchanged.
 */
export function durableRecall(memory, dir, id, messages, tokenBudget, opts) {
  if (dir && id != null && !memory.has(id)) {
    let saved = null;
    try {
      saved = JSON.parse(readRegular(fileOf(dir, id)) ?? "null");
    } catch (e) {
      if (e?.name === "Refused") throw e;
      saved = null; // damaged: started over
    }
    if (saved && saved.id === String(id) && Array.isArray(saved.turns)) {
      const turns = saved.turns.filter((t) => t && typeof t.key === "string" && Array.isArray(t.msgs));
      memory.set(id, { turns, saved: keysOf({ turns }) });
    }
  }
  const r = recall(memory, id, messages, tokenBudget, opts);
  const entry = id != null ? memory.get(id) : undefined;
  if (dir && entry) {
    const keys = keysOf(entry);
    if (keys !== entry.saved) {
      const first = entry.saved === undefined; // the first write of this session in this process
      writeAtomic(fileOf(dir, id), JSON.stringify({ version: 1, id: String(id), at: Date.now(), turns: entry.turns }));
      entry.saved = keys;
      if (first) pruneRecallFiles(dir);
    }
  }
  return r;
}

/** Forget the in-process memory (a test's "restart"). */
export function forgetRecall() {
  RECALL_MEMORY.clear();
}
