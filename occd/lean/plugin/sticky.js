// occd-lean: the sticky boundary of the lean view (issue 20: cache-stable; issue 30.2: runs of many calls).
//
// Providers cache the prompt's prefix; every time the lean view hides more, the prompt from there on is a cache
// write. So the view is sticky. What it hides is a unit: a model message's tool calls with their results (a run
// of 4 reads is 4 units, so the newest 5 results can be kept whole without keeping two whole runs).
// - a unit hidden once stays hidden, rendered byte-identically (its hidden form depends only on its own messages);
// - the boundary moves rarely and far, for one of three reasons:
//   * it pays: a move rewrites the units kept whole (K chars: a cache write instead of a read, costing
//     `cacheCostRatio` = (write - read) / read times their read price) and saves reading the hidden ones (D chars)
//     on every later request. With the prompt growing g chars a turn and `requestsPerTurn` requests a turn, the
//     cheapest rhythm moves when D^2 >= 2 * ratio * K * g / requestsPerTurn (the cost of a move spread over the
//     turns until the next one equals the extra reads of the prompt growing meanwhile); then it hides every unit
//     but the newest kept ones. requestsPerTurn is the session's own: the model requests (assistant messages) of
//     its newest three tool turns, a run of 12 calls is 13 (the rules' requestsPerTurn, when set, instead; 2 for a
//     session with no tool turn yet). With 5 kept turns of similar size and 2 requests a turn this is a move every
//     ~7 turns, whatever the window: short sessions never pay for one, long ones stop paying for reads they do not
//     need, and sessions of long runs (every request of a run reads the whole prompt again) move sooner;
//   * the budget: the lean prompt plus one more turn would pass `highWater` of the token budget (and at least
//     batchTurns tool turns could be hidden; or any, past the whole budget, since OpenClaw would compact): it hides
//     the oldest visible units until the prompt is down to `lowWater` of the budget (keeping the newest whole);
//   * OpenClaw's cap: the tool results passed on plus one more turn's would pass OpenClaw's own cap on a prompt's
//     tool results (aggregateCapChars), past which OpenClaw cuts results itself, the newest ones included: it
//     hides every unit but the newest kept ones;
//   * a cold cache: the session's last model request is older than the provider's cache lifetime
//     (`cacheTtlSeconds`, from occd's cost settings): the whole prompt is a cache write whatever the view sends,
//     so a move costs nothing, and it hides every unit but the newest kept ones (any number of turns);
// - which units are hidden survives a gateway restart: a state file in occd's data dir holds, per session, one-way
//   hashes of the hidden turns' first messages (with a unit's rank in its turn where only some of a turn's units
//   are hidden) and counts (never content), written atomically.
// Between two moves the prompt for turn N+1 therefore starts with exactly the prompt for turn N.

import crypto from "node:crypto";
import { Refused, readRegular, signature, writeAtomic } from "./safefs.js";

export { writeAtomic };

export const STICKY_DEFAULTS = Object.freeze({ highWater: 0.9, lowWater: 0.3, cacheCostRatio: 11.5, requestsPerTurn: null,
                                               cacheTtlSeconds: null });
const FALLBACK_REQUESTS_PER_TURN = 2; // a session with no tool turn yet: a call and the answer
const MAX_KEYS = 8000;      // hidden turn and unit hashes kept per session (oldest forgotten first)
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

/** The turn of each message: a turn starts at each user message but the first message. */
export function turnsOf(messages) {
  const turnOf = new Array(messages.length);
  let turn = 0;
  for (let i = 0; i < messages.length; i++) {
    if (messages[i]?.role === "user" && i > 0) turn++;
    turnOf[i] = turn;
  }
  return turnOf;
}

/** The ids of the first `n` turns of `messages`, as the state keeps them. */
export function firstTurnIds(messages, n = 8) {
  const msgs = Array.isArray(messages) ? messages : [];
  const firstOfTurn = new Map();
  turnsOf(msgs).forEach((t, i) => { if (t < n && !firstOfTurn.has(t)) firstOfTurn.set(t, i); });
  return turnIds(msgs, firstOfTurn, firstOfTurn.size).filter(Boolean);
}

/** The share knobs from the rules (0 < lowWater <= highWater <= 1), defaults otherwise. */
export function waters(rules) {
  const ok = (v) => typeof v === "number" && Number.isFinite(v) && v > 0 && v <= 1;
  const high = ok(rules?.highWater) ? rules.highWater : STICKY_DEFAULTS.highWater;
  let low = ok(rules?.lowWater) ? rules.lowWater : STICKY_DEFAULTS.lowWater;
  if (low > high) low = high;
  return { high, low };
}

/** OpenClaw's cap on the tool results of one prompt (every release from 2026.7.1 to 2026.9.6,
 * resolveLiveToolResultAggregateMaxChars): past it, OpenClaw cuts results itself, the newest ones included, and
 * keeps them cut. In characters, for a context window of `window` tokens. */
export function aggregateCapChars(window) {
  if (!(Number.isFinite(window) && window > 0)) return Infinity;
  const w = Math.floor(window);
  const auto = w >= 200000 ? 64000 : w >= 100000 ? 32000 : 16000;
  const perResult = Math.min(Math.floor(w * 0.3) * 4, auto);
  return Math.max(perResult * 4, Math.floor(w * 4 * 0.5));
}

/**
 * chooseHidden(ctx) -> {hidden: [unit], added: [unit id], moved, why, charsBefore, charsAfter, requests (the
 * requests a turn the cost rule counted)}. Pure.
 * A unit is what is hidden or kept as one: a model message's tool calls with their results (a run of 4 calls is 4
 * units, calls sent together are one); each belongs to a turn (`turnOf`, default: a unit is its own turn).
 * ctx: {ids: [id per unit], units: [unit, oldest first], saved: Map unit -> chars hiding it saves, charsIn: chars
 * of the whole history, rules: {keepTurns, batchTurns (counted in turns), highWater?, lowWater?}, keep: the newest
 * units kept whole, tokenBudget, hiddenIds: Set of unit ids hidden before, turnOf, results: Map unit -> chars of
 * its tool results, capChars: OpenClaw's cap on a prompt's tool results (aggregateCapChars), fixedResults: the chars
 * of the results no unit holds (never hidden, yet counted by OpenClaw's cap), resultsByTurn: Map turn -> chars of
 * all its results (a run's size; default: the units' results), requestsByTurn: Map turn -> its model requests
 * (assistant messages), for the cost rule, cold: the provider's cache no longer holds the prompt (coldCache)}.
 */
export function chooseHidden({ ids, units, saved, charsIn, rules, tokenBudget, hiddenIds, keep = rules.keepTurns,
                               turnOf = (u) => u, results = null, capChars = Infinity, fixedResults = 0,
                               resultsByTurn = null, requestsByTurn = null, cold = false }) {
  const hidden = [];
  const visible = [];
  // the newest `keep` units are never hidden, whatever their id says (two turns that start alike share a base id;
  // an id hidden before must not take the newest results with it)
  const newestKept = new Set(units.slice(Math.max(0, units.length - keep)));
  for (const u of units) (hiddenIds.has(ids[u]) && !newestKept.has(u) ? hidden : visible).push(u);
  let chars = charsIn;
  for (const u of hidden) chars -= saved.get(u) ?? 0;
  const batch = rules.batchTurns;
  const candidates = visible.slice(0, Math.max(0, visible.length - keep));
  const budget = Number.isFinite(tokenBudget) && tokenBudget > 0 ? tokenBudget : null;
  const { high, low } = waters(rules);
  const crowded = turnCount(candidates, turnOf) >= batch;
  // the next turn must fit too: one turn's growth (the largest of the newest three tool turns) counts ahead
  const newest = newestTurns(visible, turnOf, saved);
  const growth = Math.max(0, ...newest);
  const over = budget ? (chars + growth) / 4 > high * budget : false;
  const past = budget ? (chars + growth) / 4 > budget : false; // OpenClaw would compact: any batch will do
  // OpenClaw's own cap on the prompt's tool results, with the next turn's results: past it OpenClaw cuts them
  const resultsOf = (us) => us.reduce((n, u) => n + (results?.get(u) ?? 0), 0);
  const runs = resultsByTurn ? newestOf(resultsByTurn) : newestTurns(visible, turnOf, results);
  const capped = results !== null && Number.isFinite(capChars)
    && fixedResults + resultsOf(visible) + Math.max(0, ...runs) > capChars;
  const charsBefore = chars;
  const freed = candidates.reduce((n, u) => n + (saved.get(u) ?? 0), 0);
  const requests = requestsPerTurn({ rules, units: visible, turnOf, requestsByTurn });
  const why = cold && freed > 0 ? "cold"
    : movePays({ candidates, visible, saved, keep, batch, newest, rules, turnOf, requests }) ? "pays"
    : (over && crowded) || past ? "budget" : capped ? "cap" : null;
  if (!why || candidates.length === 0) {
    return { hidden, added: [], moved: false, charsBefore, charsAfter: chars, why: null, requests };
  }
  const taken = [];
  const takenTurns = new Set();
  for (const u of candidates) {
    if (why === "budget" && takenTurns.size >= batch && chars / 4 <= low * budget) break;
    hidden.push(u);
    taken.push(u);
    takenTurns.add(turnOf(u));
    chars -= saved.get(u) ?? 0;
  }
  const added = taken.map((u) => ids[u]);
  hidden.sort((a, b) => a - b);
  return { hidden, added, moved: added.length > 0, charsBefore, charsAfter: chars, why, requests };
}

function turnCount(units, turnOf) {
  return new Set(units.map(turnOf)).size;
}

/** Per turn, newest first, the sum of `by` over the units of the newest three turns among `units`. */
function newestTurns(units, turnOf, by) {
  const sums = new Map();
  for (const u of units) sums.set(turnOf(u), (sums.get(turnOf(u)) ?? 0) + (by?.get(u) ?? 0));
  return newestOf(sums);
}

/** The values of the newest three turns of a Map turn -> figure, newest first. */
function newestOf(byTurn) {
  return [...byTurn.keys()].sort((a, b) => b - a).slice(0, 3).map((t) => byTurn.get(t));
}

/** The time (ms) of the session's last model request: its newest assistant message's timestamp (ms, seconds or
 * ISO text); null when it has none. */
export function lastRequestAt(messages) {
  for (let i = (messages?.length ?? 0) - 1; i >= 0; i--) {
    const m = messages[i];
    if (m?.role !== "assistant") continue;
    const t = m.timestamp;
    if (typeof t === "number" && Number.isFinite(t) && t > 0) return t < 1e11 ? t * 1000 : t;
    if (typeof t === "string") {
      const ms = Date.parse(t);
      if (Number.isFinite(ms)) return ms;
    }
    return null;
  }
  return null;
}

/** The provider's cache no longer holds the session's prompt: its last request is at least `cacheTtlSeconds` old
 * (unknown lifetime, unknown time or a time in the future: warm). */
export function coldCache(messages, rules, now = Date.now()) {
  const ttl = rules?.cacheTtlSeconds;
  if (!(typeof ttl === "number" && Number.isFinite(ttl) && ttl > 0)) return false;
  const at = lastRequestAt(messages);
  return at !== null && now - at >= ttl * 1000;
}

/** The model requests a turn of this session makes: the rules' requestsPerTurn when set, else the mean of the
 * session's newest three tool turns (among `units`) in `requestsByTurn`, else 2. */
export function requestsPerTurn({ rules, units = [], turnOf = (u) => u, requestsByTurn = null }) {
  const num = (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : null);
  const set = num(rules?.requestsPerTurn);
  if (set !== null) return set;
  if (requestsByTurn) {
    const turns = [...new Set(units.map(turnOf))].sort((a, b) => b - a).slice(0, 3);
    const counts = turns.map((t) => requestsByTurn.get(t) ?? 0).filter((n) => n > 0);
    if (counts.length) return counts.reduce((a, b) => a + b, 0) / counts.length;
  }
  return FALLBACK_REQUESTS_PER_TURN;
}

/** The cost rule (see the head of this file): hiding every candidate now is the cheapest rhythm of moves.
 * K: the chars of the units kept whole (rewritten by the move), D: the chars the candidates would stop costing,
 * g: the prompt's growth per turn (the mean of the newest three tool turns), r: the requests a turn
 * (requestsPerTurn). */
export function movePays({ candidates, visible, saved, keep, batch, newest, rules, turnOf = (u) => u,
                           requestsByTurn = null, requests = requestsPerTurn({ rules, units: visible, turnOf, requestsByTurn }) }) {
  if (turnCount(candidates, turnOf) < Math.max(1, batch)) return false;
  const num = (v, d) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? v : d);
  const ratio = num(rules?.cacheCostRatio, STICKY_DEFAULTS.cacheCostRatio);
  const perTurn = requests;
  const sum = (us) => us.reduce((n, u) => n + (saved.get(u) ?? 0), 0);
  const D = sum(candidates);
  const K = sum(visible.slice(visible.length - keep));
  const g = newest.length ? newest.reduce((a, b) => a + b, 0) / newest.length : 0;
  return D > 0 && g > 0 && D * D >= (2 * ratio * K * g) / perTurn;
}

/**
 * stickyChooser({state, key, messages, rules, tokenBudget, capChars, textChars}) -> {choose, record}: `choose` is
 * leanView's hook (which units are hidden: chooseHidden over the session's persisted hidden ids); `record(stats,
 * sessionId, warn)` after leanView puts the move's counts into the stats (boundaryMoves, movedNow, lastMove:
 * the prompt's chars before and after, and before the first change, which stays a cache read) and persists the
 * newly hidden ids (one atomic write per move).
 * A unit's id is its turn's id and its rank in the turn ("<turn id>/<rank>"); a turn id alone (a turn every unit
 * of which is hidden, or a state written before units) stands for every unit of that turn.
 */
export function stickyChooser({ state, key, messages, rules, tokenBudget, capChars = Infinity, textChars, now = Date.now() }) {
  const { hiddenIds, moves } = state.get(key);
  let move = null;
  let persist = [];
  const choose = ({ units, saved, results, fixedResults, resultsByTurn, requestsByTurn, charsIn, firstOf, firstOfTurn,
                    turns, keep, turnOf, rank }) => {
    const tids = turnIds(messages, firstOfTurn, turns);
    const ids = [];
    const known = new Set(hiddenIds);
    for (const u of units) {
      ids[u] = `${tids[turnOf(u)]}/${rank(u)}`;
      if (hiddenIds.has(tids[turnOf(u)])) known.add(ids[u]);
    }
    const r = chooseHidden({ ids, units, saved, charsIn, rules, tokenBudget, hiddenIds: known, keep, turnOf, results, capChars,
                             fixedResults, resultsByTurn, requestsByTurn, cold: coldCache(messages, rules, now) });
    const addedSet = new Set(r.added);
    move = { ...r, turns: turnCount(units.filter((u) => addedSet.has(ids[u])), turnOf), prefixChars: 0 };
    if (r.moved) {
      const u0 = Math.min(...r.hidden.filter((u) => addedSet.has(ids[u])));
      const i0 = firstOf.get(u0) ?? 0;
      for (let i = 0; i < i0; i++) move.prefixChars += textChars(messages[i]?.content);
      for (const u of r.hidden) if (u < u0) move.prefixChars -= saved.get(u) ?? 0;
      // what is written: a turn all of whose units are hidden now by its turn id, other units by theirs
      const hiddenSet = new Set(r.hidden);
      const whole = new Set();
      for (const u of units) whole.add(turnOf(u));
      for (const u of units) if (!hiddenSet.has(u)) whole.delete(turnOf(u));
      const out = new Set();
      for (const u of units) {
        if (!addedSet.has(ids[u])) continue;
        const t = turnOf(u);
        if (!whole.has(t)) out.add(ids[u]);
        else if (!hiddenIds.has(tids[t])) out.add(tids[t]);
      }
      persist = [...out];
    }
    return r.hidden;
  };
  const record = (s, sessionId, warn) => {
    s.boundaryMoves = moves + (move?.moved ? 1 : 0);
    s.movedNow = move?.moved ? move.added.length : 0;
    if (!move?.moved) return;
    s.lastMove = { at: Date.now(), turns: move.turns, units: move.added.length, why: move.why,
                   charsBefore: move.charsBefore, charsAfter: move.charsAfter, prefixChars: Math.max(0, move.prefixChars),
                   requests: Math.round(move.requests * 100) / 100 };
    try {
      state.addHidden(key, sessionId, persist, s.hiddenTurns);
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

  /** The session whose hidden turns include the most of `ids` (firstTurnIds of a transcript): the session a copy
   * of that transcript was forked from; null when none, or two match as well. */
  ownerOf(ids) {
    this._load();
    const want = new Set(ids);
    if (want.size === 0) return null;
    let best = null;
    let most = 0;
    let tie = false;
    for (const [key, e] of Object.entries(this.data.sessions)) {
      if (!Array.isArray(e?.hidden)) continue;
      const hit = new Set();
      for (const h of e.hidden) {
        if (typeof h !== "string") continue;
        const tid = h.includes("/") ? h.slice(0, h.indexOf("/")) : h;
        if (want.has(tid)) hit.add(tid);
      }
      if (hit.size > most) [best, most, tie] = [key, hit.size, false];
      else if (hit.size === most && most > 0) tie = true;
    }
    return most > 0 && !tie ? best : null;
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
