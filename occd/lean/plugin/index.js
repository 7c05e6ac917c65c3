// occd-lean: occd's lean view, an OpenClaw context engine (plain JavaScript, no dependencies, no build step).
//
// OpenClaw calls assemble() before each model run with the stored history; what it returns is what the model
// receives. This engine returns a copy without old tool calls and results (mode "drop") or with old results
// replaced by a short placeholder (mode "stub"), per the rules occd writes to a policy file. OpenClaw keeps
// appending every message to its own store: nothing is lost, the model's input is lean.
//
// - Non-owning: ownsCompaction false; compact() delegates to OpenClaw's runtime (delegateCompactionToRuntime).
// - Durable-turn contract (2026.8+): transcriptSemantics declared and commitTurn() implemented (stateless).
// - Total: any error in assemble() returns the messages unchanged (an exception would quarantine the engine).
// - Rules are re-read when the policy file's mtime or size changes (next turn, no restart).
// - Counts only (never content) go to a small stats file occd reads.
// - Sticky (sticky.js): a turn hidden once stays hidden, the boundary moves rarely and far, and the hidden turns'
//   hashes (never content) survive a restart in a state file beside the stats.

import path from "node:path";
import { fileURLToPath } from "node:url";
import { durableRecall, RECALL_MEMORY, recallOnCleanCut, textChars } from "./recall.js";
import { PolicyFile, Refused, StatsFile } from "./safefs.js";
import { aggregateCapChars, firstTurnIds, STICKY_DEFAULTS, stateFile, stickyChooser, turnsOf } from "./sticky.js";

export { PolicyFile, StatsFile };
export { leanTurn, recall, RECALL_SHARE } from "./recall.js";

export const ENGINE_ID = "occd-lean";
export const VERSION = "0.1.0";
export const DEFAULT_RULES = Object.freeze({
  mode: "off",               // off | drop | stub
  keepTurns: 5,              // newest turns with hideable tool blocks kept intact
  keepResults: 0,            // if > 0: keep only as many of those newest tool turns as hold this many results
  batchTurns: 4,             // hide in steps of this many turns (the prompt cache breaks once per batch)
  neverHide: [],             // tool names (a trailing * matches a prefix) never hidden, e.g. memory tools
  keepResultsUnderChars: 0,  // a result with at most this many characters is kept with its call
  // the sticky boundary's knobs (sticky.js): highWater, lowWater (shares of the budget), cacheCostRatio ((cache
  // write - cache read) / cache read: what a move costs), requestsPerTurn (how often a hidden turn is not read;
  // null: the session's own, counted in its newest tool turns), cacheTtlSeconds (the provider's cache lifetime: a
  // move after it costs nothing; null: never counted on)
  ...STICKY_DEFAULTS,
});
const MODES = new Set(["off", "drop", "stub"]);
const GONE = Symbol("gone"); // a hidden message that is left out
const THINKING = new Set(["thinking", "redacted_thinking", "redactedThinking"]);

// ---------------------------------------------------------------------------------------------------------
// The filter: a pure function of the messages and the rules.

export function normalizeRules(raw, base = DEFAULT_RULES) {
  const r = { ...base };
  if (!raw || typeof raw !== "object") return r;
  if (MODES.has(raw.mode)) r.mode = raw.mode;
  const int = (v, min) => (Number.isInteger(v) && v >= min ? v : undefined);
  r.keepTurns = int(raw.keepTurns, 0) ?? r.keepTurns;
  r.keepResults = int(raw.keepResults, 0) ?? r.keepResults;
  r.batchTurns = int(raw.batchTurns, 1) ?? r.batchTurns;
  r.keepResultsUnderChars = int(raw.keepResultsUnderChars, 0) ?? r.keepResultsUnderChars;
  const share = (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 && v <= 1 ? v : undefined);
  r.highWater = share(raw.highWater) ?? r.highWater;
  r.lowWater = share(raw.lowWater) ?? r.lowWater;
  const pos = (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 && v < 1e6 ? v : undefined);
  r.cacheCostRatio = pos(raw.cacheCostRatio) ?? r.cacheCostRatio;
  r.requestsPerTurn = pos(raw.requestsPerTurn) ?? r.requestsPerTurn;
  r.cacheTtlSeconds = pos(raw.cacheTtlSeconds) ?? r.cacheTtlSeconds;
  if (Array.isArray(raw.neverHide)) r.neverHide = raw.neverHide.filter((s) => typeof s === "string" && s);
  return r;
}

function nameMatches(name, patterns) {
  if (typeof name !== "string") return false;
  for (const p of patterns) {
    if (p.endsWith("*") ? name.startsWith(p.slice(0, -1)) : name === p) return true;
  }
  return false;
}

function isToolCall(b) {
  return !!b && typeof b === "object" && b.type === "toolCall";
}

function hasMeaning(b) {
  if (!b || typeof b !== "object") return false;
  if (b.type === "text") return typeof b.text === "string" && b.text.trim() !== "";
  return !THINKING.has(b.type);
}

/** The stub a hidden result is replaced by in mode "stub". */
// The replay types of a provider's compaction checkpoint (openclaw/openclaw src/agents/transcript-redact-replay.ts,
// isCompactionReplayCheckpoint); the Python side: occd/transcript/compaction.py.
export const PROVIDER_COMPACTION_TYPES = Object.freeze(["anthropic-compaction", "openai-responses-compaction",
  "openai-responses-retained-compaction"]);

export function isCompactionCheckpoint(m) {
  return m?.role === "assistant" && PROVIDER_COMPACTION_TYPES.includes(m.providerReplay?.type);
}

export function stubText(toolName, chars) {
  return `[occd: result of ${toolName || "a tool"} hidden from the model (${chars} chars); the session keeps it, call the tool again if you need it]`;
}

/**
 * leanView(messages, rules) -> {messages, stats}. Never changes its input; untouched messages are passed on by
 * reference. Turns start at each user message (messages before the first one, e.g. a compaction summary,
 * form a turn of their own). A tool call is hideable unless its tool is in neverHide or its result is at most
 * keepResultsUnderChars long. What is hidden or kept as one is a unit: a model message's hideable calls with
 * their results (a run of 4 reads is 4 units; calls sent together are one); a turn holding one is a tool turn.
 * The newest units are kept whole: those of the newest keepTurns tool turns, or with keepResults > 0 the fewest
 * newest of them holding that many results (an unfinished last turn is never touched). Of the older units, those
 * of the oldest floor(turns / batchTurns) * batchTurns turns are hidden (the kept window moves once per
 * batchTurns turns); or, given `choose` (the engine's sticky boundary, sticky.js), the units
 * choose({units, saved: unit -> chars hiding it saves, results: unit -> its results' chars, fixedResults: chars of
 * the results no unit holds, resultsByTurn: turn -> chars of all its results, requestsByTurn: turn -> its assistant
 * messages (model requests), charsIn, firstOf:
 * unit -> first index, firstOfTurn, turns, keep, turnOf, rank: unit -> its rank in its turn}) returns. A hidden
 * unit: "drop" removes the hideable calls and their results, and the thinking of an assistant message that lost
 * a call (signed reasoning must not be sent without its call); an assistant message left with nothing else is
 * removed. "stub" keeps the calls (and their thinking) and replaces each result by a short placeholder.
 */
export function leanView(messages, rawRules, choose) {
  const rules = normalizeRules(rawRules);
  const stats = {
    mode: rules.mode, messagesIn: Array.isArray(messages) ? messages.length : 0, messagesOut: 0, toolTurns: 0,
    hiddenTurns: 0, callsHidden: 0, resultsHidden: 0, resultsStubbed: 0, thinkingDropped: 0, charsIn: 0, charsOut: 0,
  };
  if (!Array.isArray(messages)) return { messages, stats };
  for (const m of messages) stats.charsIn += textChars(m?.content);
  if (rules.mode === "off" || messages.length === 0) {
    stats.messagesOut = messages.length;
    stats.charsOut = stats.charsIn;
    return { messages, stats };
  }
  // turns
  const turnOf = turnsOf(messages);
  const lastTurn = turnOf[messages.length - 1];
  // calls and results, paired by id: a result pairs with the latest call of its id before it that has none yet
  // (by position: duplicated ids, calls without id and results naming another tool never split a pair)
  const pairOfCall = new Map(); // "msg index:block index" -> pair
  const pairOfResult = new Map(); // result msg index -> pair
  const waiting = new Map(); // call id -> pairs without a result yet, newest last
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (!m || typeof m !== "object") continue;
    if (m.role === "assistant" && Array.isArray(m.content)) {
      m.content.forEach((b, j) => {
        if (!isToolCall(b)) return;
        const p = { turn: turnOf[i], msg: i, name: b.name, result: -1 };
        pairOfCall.set(`${i}:${j}`, p);
        if (b.id != null) waiting.set(b.id, [...(waiting.get(b.id) ?? []), p]);
      });
    } else if (m.role === "toolResult") {
      const p = m.toolCallId != null ? waiting.get(m.toolCallId)?.pop() : undefined;
      if (p) {
        p.result = i;
        pairOfResult.set(i, p);
      }
    }
  }
  // a pair is hideable unless the call's or the result's tool name is never hidden or the result is short; the
  // pair belongs to its call's turn, and its call and result are hidden or kept together
  const keptResult = (ri) => nameMatches(messages[ri]?.toolName, rules.neverHide)
    || textChars(messages[ri]?.content) <= rules.keepResultsUnderChars;
  const hideablePair = (p) => !nameMatches(p.name, rules.neverHide) && (p.result < 0 || !keptResult(p.result));
  const hideableCall = (i, j) => {
    const p = pairOfCall.get(`${i}:${j}`);
    return !!p && hideablePair(p);
  };
  const hideableResult = (i) => {
    const p = pairOfResult.get(i);
    return p ? hideablePair(p) : !keptResult(i); // an orphan result: by its own name and size
  };
  // the turn a message is hidden with: a result goes with its call's turn
  const ownerOf = (i) => pairOfResult.get(i)?.turn ?? turnOf[i];
  // an unfinished last turn (a call waiting for its result or for the model's answer) is never hidden
  const last = messages[messages.length - 1];
  const open = last?.role === "toolResult" || (last?.role === "assistant" && last.stopReason === "toolUse");
  // units: what is hidden or kept as one, a model message's hideable calls with their results (an orphan result is
  // a unit of its own); a unit belongs to the turn of its first message
  const units = [];
  const unitOf = new Map(); // message index -> unit
  const skip = (i) => (open && (turnOf[i] === lastTurn || ownerOf(i) === lastTurn));
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (skip(i)) continue;
    if (m?.role === "assistant" && Array.isArray(m.content) && m.content.some((b, j) => hideableCall(i, j))) {
      unitOf.set(i, units.length);
      units.push({ turn: turnOf[i], first: i, results: 0, resultChars: 0 });
    } else if (m?.role === "toolResult" && hideableResult(i)) {
      const p = pairOfResult.get(i);
      let u = p ? unitOf.get(p.msg) : undefined;
      if (u === undefined) {
        u = units.length;
        units.push({ turn: turnOf[i], first: i, results: 0, resultChars: 0 });
      }
      unitOf.set(i, u);
      units[u].results++;
      units[u].resultChars += textChars(m.content);
    }
  }
  // a provider-native compaction checkpoint (OpenClaw 2026.10.2+: `providerReplay` on an assistant message) is
  // never hidden or rewritten, nor is anything before it: the provider's replay was made from that prefix
  const cp = messages.findLastIndex(isCompactionCheckpoint);
  const hideable = units.map((_, u) => u).filter((u) => cp < 0 || units[u].turn > turnOf[cp]);
  const toolTurns = [...new Set(hideable.map((u) => units[u].turn))];
  stats.toolTurns = toolTurns.length;
  stats.units = hideable.length;
  // how many of the newest units stay whole: those of the newest keepTurns tool turns, or with keepResults > 0 the
  // fewest newest of them that hold that many results (a run of many calls is kept in part)
  const keptTurns = new Set(toolTurns.slice(Math.max(0, toolTurns.length - rules.keepTurns)));
  let keep = hideable.filter((u) => keptTurns.has(units[u].turn)).length;
  if (rules.keepResults > 0) {
    let n = 0;
    let sum = 0;
    while (n < keep && sum < rules.keepResults) sum += units[hideable[hideable.length - 1 - n++]].results;
    keep = n;
  }
  stats.keptTurns = new Set(hideable.slice(hideable.length - keep).map((u) => units[u].turn)).size;
  // the hidden form of message i when its unit is hidden (GONE: it is left out), counted into `st`
  const hideMsg = (i, st) => {
    const m = messages[i];
    if (!m || typeof m !== "object") return m;
    if (m.role === "assistant" && Array.isArray(m.content) && rules.mode === "drop") {
      const gone = m.content.map((b, j) => hideableCall(i, j));
      const removed = gone.filter(Boolean).length;
      if (removed === 0) return m;
      st.callsHidden += removed;
      const content = m.content.filter((b, j) => !gone[j] && !(b && THINKING.has(b.type)));
      st.thinkingDropped += m.content.filter((b) => b && THINKING.has(b.type)).length;
      return content.some(hasMeaning) ? { ...m, content } : GONE; // nothing left but hidden calls and reasoning
    }
    if (m.role === "toolResult" && hideableResult(i)) {
      // drop mode: a result goes with its call (the call is hidden as hideablePair decided for both)
      if (rules.mode === "drop") {
        st.resultsHidden++;
        return GONE;
      }
      const chars = textChars(m.content);
      const text = stubText(m.toolName ?? pairOfResult.get(i)?.name, chars);
      if (text.length < chars) {
        st.resultsStubbed++;
        return { ...m, content: [{ type: "text", text }] };
      }
    }
    return m;
  };
  let hidden;
  if (typeof choose === "function") {
    // the caller decides which units are hidden, from what each would save (sticky.js)
    const saved = new Map(hideable.map((u) => [u, 0]));
    const scratch = { callsHidden: 0, thinkingDropped: 0, resultsHidden: 0, resultsStubbed: 0 };
    const firstOfTurn = new Map();
    // every tool result counts toward OpenClaw's cap on a prompt's results, the ones never hidden too (a tool in
    // neverHide, a short result, anything before a checkpoint): their chars, and each turn's results (a run's size)
    let fixedResults = 0;
    const resultsByTurn = new Map();
    const requestsByTurn = new Map(); // a turn's model requests: its assistant messages (a run of 4 calls is 5)
    for (let i = 0; i < messages.length; i++) {
      if (!firstOfTurn.has(turnOf[i])) firstOfTurn.set(turnOf[i], i);
      if (messages[i]?.role === "assistant") requestsByTurn.set(turnOf[i], (requestsByTurn.get(turnOf[i]) ?? 0) + 1);
      const u = unitOf.get(i);
      if (messages[i]?.role === "toolResult") {
        const c = textChars(messages[i].content);
        resultsByTurn.set(ownerOf(i), (resultsByTurn.get(ownerOf(i)) ?? 0) + c);
        if (!saved.has(u)) fixedResults += c;
      }
      if (!saved.has(u)) continue;
      const h = hideMsg(i, scratch);
      saved.set(u, saved.get(u) + textChars(messages[i]?.content) - (h === GONE ? 0 : textChars(h?.content)));
    }
    const rankOf = new Map();
    const perTurn = new Map();
    for (const u of hideable) {
      const t = units[u].turn;
      rankOf.set(u, perTurn.get(t) ?? 0);
      perTurn.set(t, (perTurn.get(t) ?? 0) + 1);
    }
    hidden = new Set(choose({
      units: hideable, saved, results: new Map(hideable.map((u) => [u, units[u].resultChars])), fixedResults, resultsByTurn,
      requestsByTurn,
      charsIn: stats.charsIn,
      firstOf: new Map(hideable.map((u) => [u, units[u].first])), firstOfTurn, turns: lastTurn + 1, keep,
      turnOf: (u) => units[u].turn, rank: (u) => rankOf.get(u),
    }));
  } else {
    // the oldest whole batches of batchTurns turns beyond the kept units
    const candidates = hideable.slice(0, Math.max(0, hideable.length - keep));
    const turns = [...new Set(candidates.map((u) => units[u].turn))];
    const h = new Set(turns.slice(0, Math.floor(turns.length / rules.batchTurns) * rules.batchTurns));
    hidden = new Set(candidates.filter((u) => h.has(units[u].turn)));
  }
  stats.hiddenUnits = hidden.size;
  stats.hiddenTurns = new Set([...hidden].map((u) => units[u].turn)).size;
  if (hidden.size === 0) {
    stats.messagesOut = messages.length;
    stats.charsOut = stats.charsIn;
    return { messages, stats };
  }
  const out = [];
  for (let i = 0; i < messages.length; i++) {
    const m = hidden.has(unitOf.get(i)) ? hideMsg(i, stats) : messages[i];
    if (m !== GONE) out.push(m);
  }
  stats.messagesOut = out.length;
  for (const m of out) stats.charsOut += textChars(m?.content);
  return { messages: out, stats };
}

// ---------------------------------------------------------------------------------------------------------
// The rules file occd writes, and the counts file it reads.

export function agentOfSessionKey(key) {
  const m = typeof key === "string" ? /^agent:([^:]+):/.exec(key) : null;
  return m ? m[1] : undefined;
}

/** The rules for one session from a parsed policy: sessions[key] over agents[agent] over default. */
export function rulesFor(policy, sessionKey) {
  if (!policy || typeof policy !== "object") return normalizeRules(null);
  const pick = (obj, k) => (obj && typeof obj === "object" && k != null && obj[k] && typeof obj[k] === "object" ? obj[k] : {});
  // layer by layer: a bad value in one layer leaves the one below in force
  let r = normalizeRules(policy.default);
  r = normalizeRules(pick(policy.agents, agentOfSessionKey(sessionKey)), r);
  return normalizeRules(pick(policy.sessions, sessionKey), r);
}

/** OpenClaw's side sessions forked from a session's transcript (2026.9.x `internal-session-effects`: the
 * pre-compaction memory flush and other suppressed side effects), keyed `agent:<id>:internal-session-effects:<run>`. */
export const SIDE_SESSION_RE = /^agent:[^:]+:internal-session-effects:/;

/** The session a side session was forked from (the one whose hidden turns its first turns are), when it has no
 * rules of its own; null otherwise. */
export function sideSessionOwner(policy, sessionKey, messages, state) {
  if (!state || typeof sessionKey !== "string" || !SIDE_SESSION_RE.test(sessionKey)) return null;
  const own = policy?.sessions?.[sessionKey];
  if (own && typeof own === "object") return null;
  const owner = state.ownerOf(firstTurnIds(messages));
  return owner && owner !== sessionKey ? owner : null;
}

// per session, the newest assemble() calls occd compares with the turns OpenClaw stored (counts and times only)
export const MAX_TURNS = 20;

/** One assemble() call as occd reads it back: when, for which session id, and what went in and came out. */
export function turnRecord(s, sessionId, estimatedTokens, now = Date.now()) {
  return { at: now, sessionId: sessionId ?? null, mode: s.mode, messagesIn: s.messagesIn, messagesOut: s.messagesOut,
           estimatedTokens, hiddenTurns: s.hiddenTurns };
}

/** The session's counts after one more assemble() call: the last counts, a call counter and its newest turns. */
export function withTurn(prev, s, rec) {
  const old = prev && typeof prev === "object" ? prev : {};
  const turns = Array.isArray(old.turns) ? old.turns.filter((t) => t && typeof t.at === "number") : [];
  turns.push(rec);
  return { ...s, sessionId: rec.sessionId ?? undefined, at: rec.at, calls: (Number.isInteger(old.calls) ? old.calls : 0) + 1,
           firstAt: typeof old.firstAt === "number" ? old.firstAt : rec.at, turns: turns.slice(-MAX_TURNS) };
}

/**
 * The context window (tokens) OpenClaw sizes this prompt for: the model's entry in OpenClaw's config (`contextTokens`,
 * else `contextWindow`, the smaller of the two when both are set), found by provider and model id; else a lower
 * bound, the budget assemble() was given plus the output reserve (OpenClaw also takes its system prompt off it).
 */
export function contextWindowOf(config, params) {
  const rs = params?.runtimeSettings && typeof params.runtimeSettings === "object" ? params.runtimeSettings : {};
  const model = typeof params?.model === "string" ? params.model : rs.resolvedModel;
  const pos = (v) => (typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.floor(v) : undefined);
  const providers = config?.models?.providers;
  if (model && providers && typeof providers === "object") {
    const order = [rs.provider, ...Object.keys(providers)].filter((p) => typeof p === "string");
    for (const p of order) {
      const list = providers[p]?.models;
      const m = Array.isArray(list) ? list.find((e) => e && typeof e === "object" && e.id === model) : undefined;
      if (!m) continue;
      const sizes = [pos(m.contextTokens), pos(m.contextWindow)].filter((v) => v !== undefined);
      if (sizes.length) return Math.min(...sizes);
    }
  }
  const budget = pos(params?.tokenBudget);
  return budget === undefined ? undefined : budget + (pos(rs.maxOutputTokens) ?? 0);
}

// ---------------------------------------------------------------------------------------------------------
// The engine.

// one error line per problem per process (OpenClaw may create the engine per run): key -> message
const REPORTED = new Map();

/** Log `msg` once where the gateway logs (the engine API's logger, else console.error) until `key` clears. */
export function reportOnce(logger, key, msg) {
  if (REPORTED.has(key)) return;
  if (REPORTED.size > 100) REPORTED.clear();
  REPORTED.set(key, msg);
  const line = `[${ENGINE_ID}] ${msg}`;
  try {
    if (typeof logger?.error === "function") logger.error(line);
    else if (typeof logger?.warn === "function") logger.warn(line);
    else console.error(line);
  } catch {
    // a logger must not break a turn
  }
}

/** A problem reported before is over: the next one is logged again. */
function cleared(prefix) {
  for (const k of REPORTED.keys()) if (k.startsWith(prefix)) REPORTED.delete(k);
}

export function createEngine({ policyPath, statsPath, statePath, recallDir, logger, config } = {}) {
  // the recall memory's files (recall.js): beside the sticky state unless told otherwise
  const recallAt = recallDir ?? (statePath ? path.join(path.dirname(statePath), "recall") : null);
  const policy = new PolicyFile(policyPath);
  const state = statePath ? stateFile(statePath) : null;
  const stats = statsPath ? new StatsFile(statsPath, { engine: ENGINE_ID, engineVersion: VERSION }) : null;
  const committed = new Set();
  const report = (e, what) => {
    const key = e instanceof Refused ? `file:${e.file}:${e.why}` : `${what}:${e?.message ?? e}`.slice(0, 300);
    reportOnce(logger, key, e instanceof Refused ? `${e.message}; ${what}` : `${what}: ${e?.message ?? e}`);
  };
  const warn = (msg) => reportOnce(logger, `warn:${msg}`.slice(0, 300), msg);
  const noteError = (op, e, params, messages, estimatedTokens) => {
    report(e, `${op} failed, the history passed unchanged`);
    try { // one write: the error count, and the turn as not lean (it went through assemble() unchanged)
      stats?.update((d) => {
        d.errors = { count: (d.errors?.count ?? 0) + 1, lastAt: Date.now(), lastOp: op };
        const key = params?.sessionKey;
        if (op !== "assemble" || typeof key !== "string" || !key) return;
        const n = Array.isArray(messages) ? messages.length : 0;
        const s = { mode: "error", messagesIn: n, messagesOut: n, hiddenTurns: 0 };
        d.sessions[key] = withTurn(d.sessions[key], d.sessions[key] ?? {},
                                   { ...turnRecord(s, params?.sessionId, estimatedTokens), error: true });
      });
    } catch {
      // best effort (the counts file may be the file refused)
    }
  };
  const estimate = (messages) => {
    let n = 0;
    if (Array.isArray(messages)) for (const m of messages) n += textChars(m?.content);
    return Math.ceil(n / 4);
  };

  return {
    info: {
      id: ENGINE_ID,
      name: "occd lean view",
      version: VERSION,
      ownsCompaction: false,
      transcriptSemantics: {
        currentTurnFence: "before-current-turn-entry-v1",
        turnAdvancementIdempotency: "atomic-idempotent-v1",
      },
    },

    async ingest() {
      return { ingested: false }; // stateless: OpenClaw's store is the only store
    },

    async ingestBatch() {
      return { ingestedCount: 0 };
    },

    async assemble(params) {
      const messages = params?.messages;
      try {
        const doc = policy.get();
        // a side session OpenClaw forks from a session's transcript (its pre-compaction memory flush: the whole
        // transcript, once it passes 2 MiB) is seen as that session's next turn would be: its rules and the calls
        // it hides, without moving its boundary or recalling anything (the copy is whole)
        const owner = sideSessionOwner(doc, params.sessionKey, messages, state);
        const rules = rulesFor(doc, owner ?? params.sessionKey);
        let whole = messages;
        let turnsRecalled = 0;
        if (rules.mode !== "off" && !owner) {
          ({ messages: whole, turnsRecalled } = durableRecall(RECALL_MEMORY, recallAt, params.sessionId ?? params.sessionKey,
                                                              messages, params.tokenBudget,
                                                              { cleanCut: recallOnCleanCut(config, params.sessionKey) }));
        }
        // sticky (sticky.js): the turns hidden before stay hidden; the boundary moves rarely and far
        const skey = owner ?? params.sessionKey ?? params.sessionId;
        const sticky = state && skey != null && rules.mode !== "off"
          ? stickyChooser({ state, key: skey, messages: whole, rules, tokenBudget: params.tokenBudget, textChars,
                            capChars: aggregateCapChars(contextWindowOf(config, params)) }) : null;
        const { messages: lean, stats: s } = leanView(whole, rules, sticky?.choose);
        s.turnsRecalled = turnsRecalled;
        if (owner) s.sideOf = owner;
        else sticky?.record(s, params.sessionId, warn);
        const estimatedTokens = Math.ceil(s.charsOut / 4);
        if (stats && params.sessionKey) {
          try {
            stats.update((d) => {
              const prevMove = d.sessions[params.sessionKey]?.lastMove;
              const rec = turnRecord(s, params.sessionId, estimatedTokens);
              d.sessions[params.sessionKey] = withTurn(d.sessions[params.sessionKey], s, rec);
              if (!s.lastMove && prevMove && s.boundaryMoves) d.sessions[params.sessionKey].lastMove = prevMove;
              if (policy.error) d.policyError = policy.error;
              else delete d.policyError;
            });
          } catch (e) {
            if (e instanceof Refused) throw e; // a FIFO, a link, a huge file at the counts' name: fail open
            warn(`stats not written: ${e?.message ?? e}`);
          }
        }
        cleared("file:");
        return { messages: lean, estimatedTokens };
      } catch (e) {
        const estimatedTokens = estimate(messages);
        noteError("assemble", e, params, messages, estimatedTokens);
        return { messages, estimatedTokens };
      }
    },

    async compact(params) {
      try {
        const sdk = await import("openclaw/plugin-sdk/core");
        return await sdk.delegateCompactionToRuntime(params);
      } catch (e) {
        noteError("compact", e);
        return { ok: false, compacted: false, reason: `${ENGINE_ID}: compaction not delegated: ${e?.message ?? e}` };
      }
    },

    async commitTurn(params) {
      // stateless: nothing to store; a retried key is reported as such
      const key = params?.advancementKey;
      if (key != null && committed.has(key)) return { status: "duplicate" };
      if (key != null) {
        committed.add(key);
        if (committed.size > 1000) committed.delete(committed.values().next().value);
      }
      return { status: "committed" };
    },
  };
}

// OpenClaw may run a copy of this module from elsewhere ("captured" plugins), so a path relative to it is not
// reliable: occd writes the absolute paths into the line below of the copy it installs.
const INSTALLED_PATHS = null; // occd-lean:installed-paths

export function defaultPaths(pluginConfig, installed = INSTALLED_PATHS) {
  const cfg = pluginConfig && typeof pluginConfig === "object" ? pluginConfig : {};
  const inst = installed && typeof installed === "object" ? installed : {};
  const pick = (k, file) => {
    if (typeof cfg[k] === "string" && cfg[k]) return cfg[k];
    if (typeof inst[k] === "string" && inst[k]) return inst[k];
    return path.join(path.dirname(fileURLToPath(import.meta.url)), "..", file);
  };
  const statsPath = pick("statsPath", "stats.json");
  // the sticky state lives beside the counts (occd's data dir) unless told otherwise
  const statePath = (typeof cfg.statePath === "string" && cfg.statePath) || (typeof inst.statePath === "string" && inst.statePath)
    || path.join(path.dirname(statsPath), "state.json");
  return { policyPath: pick("policyPath", "policy.json"), statsPath, statePath };
}

export default function register(api) {
  const paths = defaultPaths(api?.pluginConfig);
  api.registerContextEngine(ENGINE_ID, (ctx) => createEngine({ ...paths, logger: api.logger, config: ctx?.config ?? api?.config }));
}
