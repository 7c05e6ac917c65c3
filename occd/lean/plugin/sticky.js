// occd-lean: the sticky boundary of the lean view (issue 20: cache-stable).
//
// Providers cache the prompt's prefix; every time the lean view hides another turn, the prompt from that turn on
// is a cache write. So the view is sticky:
// - a turn hidden once stays hidden, rendered byte-identically (its hidden form depends only on its own messages);
// - the boundary moves rarely and far, for one of two reasons:
//   * it pays: a move rewrites the turns kept whole (K chars: a cache write instead of a read, costing
//     `cacheCostRatio` = (write - read) / read times their read price) and saves reading the hidden turns (D chars)
//     on every later request. With the prompt growing g chars a turn and `requestsPerTurn` requests a turn, the
//     cheapest rhythm moves when D^2 >= 2 * ratio * K * g / requestsPerTurn (the cost of a move spread over the
//     turns until the next one equals the extra reads of the prompt growing meanwhile); then it hides every tool
//     turn but the newest keepTurns. With 5 kept turns of similar size this is a move every ~7 turns, whatever
//     the window: short sessions never pay for one, long ones stop paying for reads they do not need;
//   * the budget: the lean prompt plus one more turn would pass `highWater` of the token budget (and at least
//     keepTurns + batchTurns tool turns are visible; or any, past the whole budget, since OpenClaw would compact):
//     it hides the oldest visible tool turns until the prompt is down to `lowWater` of the budget (keeping the
//     newest keepTurns whole);
// - which turns are hidden survives a gateway restart: a state file in occd's data dir holds, per session, one-way
//   hashes of the hidden turns' first messages and counts (never content), written atomically.
// Between two moves the prompt for turn N+1 therefore starts with exactly the prompt for turn N.

import crypto from "node:crypto";
import { Refused, readRegular, signature, writeAtomic } from "./safefs.js";

export { writeAtomic };

export const STICKY_DEFAULTS = Object.freeze({ highWater: 0.9, lowWater: 0.3, cacheCostRatio: 11.5, requestsPerTurn: 2 });
const MAX_KEYS = 4000;      // hidden-turn hashes kept per session (oldest forgotten first)
const MAX_SESSIONS = 500;

function firstText(m) {
  const c = m?.content;
  if (typeof c === "string") return c;
  if (!Array.isArray(c)) return "";
  return c.filter((b) => b && typeof b.text === "string").map((b) => b.text).join("\n");
}

/** A one-way id of the turn that starts with message `m` (role, timestamp, id and text: hashed, never stored). */
export function turnId(m) {
  const h = crypto.createHash("sha256");
  h.update(`${m?.role ?? ""}|${m?.timestamp ?? ""}|${m?.id ?? ""}|${firstText(m).slice(0, 2000)}`);
  return h.digest("hex").slice(0, 20);
}

/** The id of each turn (turn index -> id): turnId of its first message, and for the n-th (n >= 1) later turn
 * that starts the same way (no timestamp, the same text) that id + "#n", so equal-looking turns are told apart. */
export function turnIds(messages, firstOf, turns) {
  const seen = new Map();
  return Array.from({ length: turns }, (_, t) => {
    if (!firstOf.has(t)) return "";
    const base = turnId(messages[firstOf.get(t)]);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    return n ? `${base}#${n}` : base;
  });
}

/** The share knobs from the rules (0 < lowWater <= highWater <= 1), defaults otherwise. */
export function waters(rules) {
  const ok = (v) => typeof v === "number" && Number.isFinite(v) && v > 0 && v <= 1;
  const high = ok(rules?.highWater) ? rules.highWater : STICKY_DEFAULTS.highWater;
  let low = ok(rules?.lowWater) ? rules.lowWater : STICKY_DEFAULTS.lowWater;
  if (low > high) low = high;
  return { high, low };
}

/**
 * chooseHidden(ctx) -> {hidden: [turn index], added: [turn id], moved, charsBefore, charsAfter}. Pure.
 * ctx: {ids: [turn id per turn index], toolTurns: [turn index, oldest first], saved: Map turn -> chars the turn
 * loses when hidden, charsIn: chars of the whole history, rules: {keepTurns, batchTurns, highWater?, lowWater?},
 * keep: the newest tool turns kept whole (default keepTurns; fewer with keepResults, see leanView),
 * tokenBudget, hiddenIds: Set of turn ids hidden before}.
 */
export function chooseHidden({ ids, toolTurns, saved, charsIn, rules, tokenBudget, hiddenIds, keep = rules.keepTurns }) {
  const hidden = [];
  const visible = [];
  // the newest keepTurns tool turns are never hidden, whatever their id says (two turns that start alike share
  // a base id; an id hidden before must not take the newest results with it)
  const newestKept = new Set(toolTurns.slice(Math.max(0, toolTurns.length - keep)));
  for (const t of toolTurns) (hiddenIds.has(ids[t]) && !newestKept.has(t) ? hidden : visible).push(t);
  let chars = charsIn;
  for (const t of hidden) chars -= saved.get(t) ?? 0;
  const batch = rules.batchTurns;
  const candidates = visible.slice(0, Math.max(0, visible.length - keep));
  const budget = Number.isFinite(tokenBudget) && tokenBudget > 0 ? tokenBudget : null;
  const { high, low } = waters(rules);
  const crowded = visible.length >= keep + batch;
  // the next turn must fit too: one turn's growth (the largest of the newest three tool turns) counts ahead
  const newest = visible.slice(-3).map((t) => saved.get(t) ?? 0);
  const growth = Math.max(0, ...newest);
  const over = budget ? (chars + growth) / 4 > high * budget : false;
  const past = budget ? (chars + growth) / 4 > budget : false; // OpenClaw would compact: any batch will do
  const charsBefore = chars;
  const why = movePays({ candidates, visible, saved, keep, batch, newest, rules }) ? "pays"
    : (over && crowded) || past ? "budget" : null;
  if (!why || candidates.length === 0) return { hidden, added: [], moved: false, charsBefore, charsAfter: chars, why: null };
  const added = [];
  for (const t of candidates) {
    if (why === "budget" && added.length >= batch && chars / 4 <= low * budget) break;
    hidden.push(t);
    added.push(ids[t]);
    chars -= saved.get(t) ?? 0;
  }
  hidden.sort((a, b) => a - b);
  return { hidden, added, moved: added.length > 0, charsBefore, charsAfter: chars, why };
}

/** The cost rule (see the head of this file): hiding every candidate now is the cheapest rhythm of moves.
 * K: the chars of the turns kept whole (rewritten by the move), D: the chars the candidates would stop costing,
 * g: the prompt's growth per turn (the mean of the newest three tool turns). */
export function movePays({ candidates, visible, saved, keep, batch, newest, rules }) {
  if (candidates.length < Math.max(1, batch)) return false;
  const num = (v, d) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : d);
  const ratio = num(rules?.cacheCostRatio, STICKY_DEFAULTS.cacheCostRatio);
  const perTurn = num(rules?.requestsPerTurn, STICKY_DEFAULTS.requestsPerTurn);
  const sum = (ts) => ts.reduce((n, t) => n + (saved.get(t) ?? 0), 0);
  const D = sum(candidates);
  const K = sum(visible.slice(visible.length - keep));
  const g = newest.length ? newest.reduce((a, b) => a + b, 0) / newest.length : 0;
  return D > 0 && g > 0 && D * D >= (2 * ratio * K * g) / perTurn;
}

/**
 * stickyChooser({state, key, messages, rules, tokenBudget, textChars}) -> {choose, record}: `choose` is leanView's
 * hook (which tool turns are hidden: chooseHidden over the session's persisted hidden ids); `record(stats,
 * sessionId, warn)` after leanView puts the move's counts into the stats (boundaryMoves, movedNow, lastMove:
 * the prompt's chars before and after, and before the first change, which stays a cache read) and persists the
 * newly hidden ids (one atomic write per move).
 */
export function stickyChooser({ state, key, messages, rules, tokenBudget, textChars }) {
  const { hiddenIds, moves } = state.get(key);
  let move = null;
  const choose = ({ toolTurns, saved, charsIn, firstOf, turns, keep }) => {
    const ids = turnIds(messages, firstOf, turns);
    const r = chooseHidden({ ids, toolTurns, saved, charsIn, rules, tokenBudget, hiddenIds, keep });
    move = { ...r, prefixChars: 0 };
    if (r.moved) {
      const addedSet = new Set(r.added);
      const t0 = Math.min(...r.hidden.filter((t) => addedSet.has(ids[t])));
      // a hidden turn keeps its user message: the change starts after it
      const i0 = (firstOf.get(t0) ?? 0) + (messages[firstOf.get(t0)]?.role === "user" ? 1 : 0);
      for (let i = 0; i < i0; i++) move.prefixChars += textChars(messages[i]?.content);
      for (const t of r.hidden) if (t < t0) move.prefixChars -= saved.get(t) ?? 0;
    }
    return r.hidden;
  };
  const record = (s, sessionId, warn) => {
    s.boundaryMoves = moves + (move?.moved ? 1 : 0);
    s.movedNow = move?.moved ? move.added.length : 0;
    if (!move?.moved) return;
    s.lastMove = { at: Date.now(), turns: move.added.length, charsBefore: move.charsBefore, charsAfter: move.charsAfter,
                   prefixChars: Math.max(0, move.prefixChars) };
    try {
      state.addHidden(key, sessionId, move.added, s.hiddenTurns);
    } catch (e) {
      if (e instanceof Refused) throw e; // a FIFO, a link, a huge file at the state's name: the engine fails open
      warn(`lean state not written: ${e?.message ?? e}`);
    }
  };
  return { choose, record };
}

/** The plugin's state file: {version, sessions: {key: {sessionId, hidden: [id], moves, hiddenTurns, at}}}.
 * Re-read when its signature changes (another engine instance or a restart wrote it); written atomically. */
export class StateFile {
  constructor(file) {
    this.file = file;
    this.sig = null;
    this.data = { version: 1, sessions: {} };
  }

  _load() {
    const sig = signature(this.file);
    if (sig !== null && sig === this.sig) return;
    let d = null;
    try {
      d = JSON.parse(readRegular(this.file) ?? "null");
    } catch (e) {
      if (e instanceof Refused) { // not a regular file, too large or too slow: nothing trusted, looked at again next turn
        this.sig = null;
        this.data = { version: 1, sessions: {} };
        throw e;
      }
      d = null; // damaged: read as empty
    }
    if (!d || typeof d !== "object" || Array.isArray(d) || typeof d.sessions !== "object" || !d.sessions) {
      d = { version: 1, sessions: {} };
    }
    this.data = d;
    this.sig = sig;
  }

  /** {hiddenIds: Set, moves} for one session (empty when unknown). */
  get(key) {
    this._load();
    const e = this.data.sessions[key];
    const ids = Array.isArray(e?.hidden) ? e.hidden.filter((s) => typeof s === "string") : [];
    return { hiddenIds: new Set(ids), moves: Number.isInteger(e?.moves) ? e.moves : 0 };
  }

  /** Add the newly hidden turn ids of one session and count the move; one atomic write. */
  addHidden(key, sessionId, added, hiddenTurns, now = Date.now()) {
    this._load();
    const s = this.data.sessions;
    const e = s[key] && typeof s[key] === "object" ? s[key] : {};
    let hidden = Array.isArray(e.hidden) ? e.hidden.filter((x) => typeof x === "string") : [];
    const have = new Set(hidden);
    for (const id of added) if (!have.has(id)) hidden.push(id);
    if (hidden.length > MAX_KEYS) hidden = hidden.slice(hidden.length - MAX_KEYS);
    s[key] = { sessionId: sessionId ?? e.sessionId ?? null, hidden, moves: (Number.isInteger(e.moves) ? e.moves : 0) + 1,
               hiddenTurns, lastMoveTurns: added.length, at: now };
    const keys = Object.keys(s);
    if (keys.length > MAX_SESSIONS) {
      keys.sort((a, b) => (s[a]?.at ?? 0) - (s[b]?.at ?? 0));
      for (const k of keys.slice(0, keys.length - MAX_SESSIONS)) delete s[k];
    }
    this.data.version = 1;
    writeAtomic(this.file, JSON.stringify(this.data));
    this.sig = signature(this.file);
  }
}

// one state object per file per process: OpenClaw may create the engine more than once
const FILES = new Map();
export function stateFile(file) {
  if (!FILES.has(file)) FILES.set(file, new StateFile(file));
  return FILES.get(file);
}

/** Forget the in-process copies (a test's "restart"). */
export function forgetStateFiles() {
  FILES.clear();
}
