"""What occd saved: context tokens removed, compactions OpenClaw did not have to do, and NET money once the
provider's prompt cache is priced (occd.policy.cost).

- tokens removed: context tokens, what the model is no longer sent each turn: the session's context figure before
  the strip (what was in the model's context: the active branch since the last compaction, as every command
  shows it) minus the figure after it, never more than the figure before (`context_removed`). Compacted-away
  history and abandoned branches are not sent, so removing them saves no context; and never more than the prompt
  the model was being sent where the strip recorded it;
- a compaction avoided: the trigger predicted OpenClaw would compact within AVOID_HORIZON_TURNS turns
  (predicted estimate + that many turns of growth >= its budget), the strip brought the estimate under it, and the
  next turn then ran without a compaction (the verify job's record); a rotation: the new session's first turn
  after the seed ran without one. Until that turn the action is "awaiting its next turn", counted as not avoided;
- withdrawn: a strip undone by `occd restore`, a rotation by `occd rotate --undo`, saves nothing (`undone`);
- money (net): per action, what the smaller prompt saves on the following turns (cache reads; until the next
  compaction would have come, at most `cost.horizon_turns`) plus an avoided compaction's summary call and rebuilt
  prompt (only where one is counted avoided), minus the cache write the rewrite causes on the next turn (none when the cache had expired). Negative
  when the action cost more than it saved. Prices from OpenClaw's models config (`cost.input/cacheRead/
  cacheWrite/output`), else litellm's price map read from the installed package's JSON file (litellm is never
  imported), else occd.policy.cost.DEFAULT_PRICES. A rotation is priced like a strip that leaves the seed: the
  daemon keeps the prompt it was going to send and the cost inputs with the action (occd.jobs.rotate); a manual
  one, or one recorded by an older occd, is counted, not priced.
"""

from __future__ import annotations

import json
import os
from typing import Iterable

AVOID_HORIZON_TURNS = 3
_LITELLM_FILES = ("model_prices_and_context_window_backup.json", "model_prices_and_context_window.json")


def compaction_avoided(details: dict, horizon: int = AVOID_HORIZON_TURNS) -> bool:
    try:
        pred, growth, budget = details["predictedPromptTokens"], details["growthTokens"], details["promptBudget"]
        after = details["predictedAfter"]
    except (KeyError, TypeError):
        return False
    if details.get("emergency"):
        return True  # a spiral or a block: OpenClaw compacts (or refuses) on the next turn
    return pred + horizon * growth >= budget and after + growth < budget


def _model_ids(model: str | None) -> list[str]:
    if not model:
        return []
    ids = [model]
    if "/" in model:
        ids.append(model.split("/", 1)[1])
    return ids


def price_from_openclaw(cfg: dict | None, model: str | None) -> float | None:
    """USD per million input tokens from OpenClaw's models config."""
    provs = ((cfg or {}).get("models") or {}).get("providers") if isinstance((cfg or {}).get("models"), dict) else None
    if not isinstance(provs, dict) or not model:
        return None
    ids = _model_ids(model)
    for p in provs.values():
        for m in (p.get("models") if isinstance(p, dict) and isinstance(p.get("models"), list) else []):
            if isinstance(m, dict) and m.get("id") in ids and isinstance(m.get("cost"), dict):
                v = m["cost"].get("input")
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0:
                    return float(v)
    return None


def litellm_cost_file() -> str | None:
    """The cost map JSON shipped inside the installed litellm package (found without importing litellm)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("litellm")
    except (ImportError, ValueError):
        return None
    for d in (spec.submodule_search_locations or []) if spec else []:
        for name in _LITELLM_FILES:
            p = os.path.join(d, name)
            if os.path.isfile(p):
                return p
    return None


def price_from_litellm(model: str | None, cache: dict | None = None) -> float | None:
    if not model:
        return None
    table = litellm_table(cache)
    for k in _model_ids(model):
        v = (table.get(k) or {}).get("input_cost_per_token") if isinstance(table.get(k), dict) else None
        if isinstance(v, (int, float)):
            return float(v) * 1e6
    return None


def input_price_per_mtok(cfg: dict | None, model: str | None, cache: dict | None = None) -> float | None:
    p = price_from_openclaw(cfg, model)
    return p if p is not None else price_from_litellm(model, cache)


def litellm_table(cache: dict | None = None) -> dict:
    """litellm's price map (the parsed JSON file shipped in the installed package; {} without it)."""
    cache = cache if cache is not None else {}
    table = cache.get("savings.litellm")
    if table is None:
        p = litellm_cost_file()
        try:
            with open(p, "rb") as fh:  # type: ignore[arg-type]
                table = json.load(fh)
        except (OSError, TypeError, ValueError):
            table = {}
        cache["savings.litellm"] = table
    return table


def _num(v) -> int | None:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 else None


def context_removed(before: dict, after: dict) -> int:
    """Context tokens a strip removed, bounded by the context before it: the figure before (`tokensBefore`,
    the one figure every command shows) minus the figure after (`tokensAfterEstimate`: before minus the
    chars/4 estimate of what left the context). Rows without these (older ledgers): the estimate of the
    context before and after, else 0 — the file's size difference counts compacted-away history and
    abandoned branches, which the model is never sent."""
    tb, ta = _num(after.get("tokensBefore")), _num(after.get("tokensAfterEstimate"))
    if tb is None:
        tb = _num(before.get("tokens"))
    if tb is not None and ta is not None:
        return max(0, tb - min(ta, tb))
    eb, ea = _num(after.get("estimateBefore")), _num(after.get("estimateAfter"))
    if eb is not None and ea is not None:
        removed = max(0, eb - ea)
        return min(removed, tb) if tb is not None else removed
    return 0


SUMMED = ("tokensRemoved", "compactionsAvoided", "emergencies", "usdSaved", "usdCacheWrites",
          "usdCompactionsAvoided", "usdNet")
MONEY = ("usdSaved", "usdCacheWrites", "usdCompactionsAvoided", "usdNet")


def _zero() -> dict:
    return {"strips": 0, "rotations": 0, "leanMoves": 0, "tokensRemoved": 0, "compactionsAvoided": 0,
            "usdSaved": 0.0, "usdCacheWrites": 0.0, "usdCompactionsAvoided": 0.0, "usdNet": 0.0, "unpriced": 0,
            "emergencies": 0, "undone": 0, "awaitingNextTurn": 0}


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def strip_effect(before: dict, removed: int, *, horizon: int = 10, prevents: bool | None = None):
    """The cost model's verdict on one recorded strip (occd.policy.cost.rewrite_effect), from what the ledger
    kept: the inputs recorded with it (`before["cost"]`, occd.jobs.apply) or, for older rows, the prediction and
    the input price. None when the prompt the model was sent is unknown (nothing to bound the figures by).
    `prevents`: whether a compaction was avoided (verified: the next turn ran without one); None: as recorded."""
    from occd.policy import cost as cm

    c = before.get("cost") if isinstance(before.get("cost"), dict) else {}
    P = _int(c.get("promptTokens")) or _int(before.get("predictedPromptTokens")) or _int(before.get("contextTokens"))
    if not P:
        return None
    pr = c.get("prices") if isinstance(c.get("prices"), dict) else None
    if pr and isinstance(pr.get("input"), (int, float)):
        prices = cm.complete(pr["input"], pr.get("cacheRead"), pr.get("cacheWrite"), pr.get("output"),
                             pr.get("source") or "recorded")
    elif isinstance(before.get("inputUsdPerMTok"), (int, float)):
        prices = cm.complete(float(before["inputUsdPerMTok"]), source="recorded input price")
    else:
        prices = cm.Prices(**cm.DEFAULT_PRICES, source="default")
    turns = _int(c.get("turns")) or cm.turns_until(before.get("promptBudget"), P, before.get("growthTokens"), horizon)
    if prevents is None:
        prevents = bool(c.get("preventsCompaction", before.get("compactionAvoided")))
    return cm.rewrite_effect(P, removed, prices, prefix_kept_tokens=_int(c.get("prefixKeptTokens")) or
                             _int(before.get("overheadTokens")) or 0, turns=turns, warm=c.get("warm", True) is not False,
                             prevents_compaction=prevents,
                             compaction_history_tokens=_int(c.get("compactionHistoryTokens")) or _int(before.get("promptBudget")),
                             summary_tokens=_int(c.get("summaryTokens")) or cm.DEFAULT_SUMMARY_TOKENS,
                             requests_per_turn=cm.requests_a_turn(c.get("requestsPerTurn"))), prices


def _loads(v) -> dict:
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            return {}
    return v if isinstance(v, dict) else {}


def _counted(a: dict) -> bool:
    """An action whose savings count: an automatic strip, rotation or lean-view boundary move that was done."""
    return (not a.get("dry_run") and a.get("outcome") == "ok" and a.get("trigger") == "auto"
            and a.get("kind") in ("strip", "rotate", "lean-move"))


def _key(a: dict, i: int):
    """effects()' key of an action: its ledger id, else (a row built by hand) its position."""
    return a["id"] if a.get("id") is not None else ("#", i)


def _same_session(a: dict, b: dict) -> bool:
    return a.get("agent_id") == b.get("agent_id") and a.get("session_id") == b.get("session_id")


def undone_ids(actions: list[dict]) -> set:
    """Ids of the actions an `occd restore` or `occd rotate --undo` took back: their savings are withdrawn.

    A restore names what it undid (`after.undoes`: the strips and edits made since the backup it put back);
    an older restore: the actions of the session from the one that made that backup (`backup_path` =
    `after.restoredFrom`) up to the restore, else the newest strip before it. A rotation's undo names its
    rotation (`after.rotationId`, `after.undoes`), else the newest rotation of that session before it."""
    out: set = set()
    rows = sorted(actions, key=lambda a: (a.get("ts") or 0, a.get("id") or 0))
    for i, u in enumerate(rows):
        if u.get("dry_run") or u.get("outcome") != "ok" or u.get("kind") not in ("restore", "rotate-undo"):
            continue
        after = _loads(u.get("after"))
        if isinstance(after.get("undoes"), list):
            out.update(x for x in after["undoes"] if isinstance(x, int))
            continue
        earlier = [a for a in rows[:i] if _same_session(a, u) and not a.get("dry_run") and a.get("outcome") == "ok"]
        if u["kind"] == "rotate-undo":
            rots = [a for a in earlier if a.get("kind") == "rotate"]
            rid = after.get("rotationId")
            match = [a for a in rots if rid is not None and _loads(a.get("after")).get("rotationId") == rid]
            out.update(a.get("id") for a in (match or rots[-1:]))
            continue
        edits = [a for a in earlier if a.get("kind") in ("strip", "edit")]
        src = after.get("restoredFrom")
        anchor = next((j for j, a in enumerate(edits) if src and a.get("backup_path") == src), None)
        out.update(a.get("id") for a in (edits[anchor:] if anchor is not None else edits[-1:]))
    out.discard(None)
    return out


def next_turn_verdicts(actions: list[dict]) -> dict:
    """strip action id -> True when its next turn ran without a compaction, False when OpenClaw compacted
    (the verify job's `verify-strip` records, occd.actions.verify_strip: `after.nextTurnCompacted`; an older
    record: skipped = a compaction came before the next reply). A strip without one is still waiting."""
    out: dict = {}
    for v in actions:
        if v.get("kind") != "verify-strip" or v.get("dry_run"):
            continue
        aid = _loads(v.get("before")).get("actionId")
        if not isinstance(aid, int):
            continue
        after = _loads(v.get("after"))
        if isinstance(after.get("nextTurnCompacted"), bool):
            out[aid] = not after["nextTurnCompacted"]
        elif v.get("outcome") in ("ok", "failed", "skipped"):
            out[aid] = v.get("outcome") != "skipped"
    return out


def effects(actions: Iterable[dict], *, horizon: int = 10, rotation_turns: dict | None = None) -> dict:
    """action id -> what that action saved, for every automatic strip, rotation and lean-view boundary move done
    (module doc): {kind, undone, tokensRemoved, compactionsAvoided, emergencies, awaitingNextTurn, priced, usd*}.

    Only what was saved counts: a compaction is avoided only when the next turn ran without one (a strip: its
    `verify-strip` record, a rotation: `rotation_turns[rotationId]`, True when the new session's first turn
    after the seed ran without a compaction); the money for an avoided compaction only then; an action taken
    back (`occd restore`, `occd rotate --undo`: undone_ids) saves nothing. `actions` must hold the verify and
    undo records that follow the actions (the ledger's history from the first action on)."""
    acts = [dict(a, before=_loads(a.get("before")), after=_loads(a.get("after"))) for a in actions]
    undone = undone_ids(acts)
    verdicts = next_turn_verdicts(acts)
    rotation_turns = rotation_turns or {}
    out: dict = {}
    for i, a in enumerate(acts):
        if not _counted(a):
            continue
        kind, before, after = a["kind"], a["before"], a["after"]
        e = {"kind": kind, "undone": a.get("id") in undone, "tokensRemoved": 0, "compactionsAvoided": 0,
             "emergencies": 0, "awaitingNextTurn": 0, "priced": False,
             **{k: 0.0 for k in MONEY}}
        out[_key(a, i)] = e
        if e["undone"]:
            continue
        if kind == "rotate":
            ok = rotation_turns.get(after.get("rotationId"))
            e["compactionsAvoided"] = 1 if ok is True else 0
            e["awaitingNextTurn"] = 1 if ok is None else 0
            P = _int(before.get("promptTokens"))
            got = strip_effect(before, max(0, (P or 0) - (_int(after.get("seedTokens")) or 0)), horizon=horizon,
                               prevents=ok is True) if P else None
        elif kind == "lean-move":
            got = strip_effect(before, _int(before.get("removedTokens")) or 0, horizon=horizon, prevents=False)
        else:
            removed = context_removed(before, after)
            predicted = bool(before.get("compactionAvoided"))
            ok = verdicts.get(a.get("id"))
            e["compactionsAvoided"] = 1 if predicted and ok is True else 0
            e["awaitingNextTurn"] = 1 if predicted and ok is None else 0
            e["emergencies"] = 1 if before.get("emergency") else 0
            got = strip_effect(before, removed, horizon=horizon, prevents=bool(e["compactionsAvoided"]))
            e["tokensRemoved"] = got[0].removedTokens if got is not None else removed  # bounded by the prompt
        if got is not None:
            eff, prices = got
            e.update(priced=True, priceSource=prices.source, usdSaved=round(eff.savedUsd, 6),
                     usdCacheWrites=round(eff.writeUsd, 6), usdCompactionsAvoided=round(eff.compactionUsd, 6),
                     usdNet=round(eff.netUsd, 6))
    return out


def _add(row: dict, e: dict) -> None:
    if e["undone"]:
        row["undone"] += 1
        return
    row[{"strip": "strips", "rotate": "rotations", "lean-move": "leanMoves"}[e["kind"]]] += 1
    for k in SUMMED:
        row[k] += e[k]
    row["awaitingNextTurn"] += e["awaitingNextTurn"]
    row["unpriced"] += 0 if e["priced"] else 1


def summarize(actions: Iterable[dict], *, horizon: int = 10, rotation_turns: dict | None = None) -> dict:
    """Savings from the ledger's automatic strips, rotations and lean-view boundary moves, per agent and session:
    the sum of each action's `effects` (so `occd history --json`, which shows each action's, adds up to it)."""
    actions = list(actions)
    eff = effects(actions, horizon=horizon, rotation_turns=rotation_turns)
    total = _zero()
    agents: dict = {}
    sessions: dict = {}
    sources: set = set()
    for i, a in enumerate(actions):
        e = eff.get(_key(a, i)) if _counted(a) else None
        if e is None:
            continue
        for r in (total, agents.setdefault(a.get("agent_id"), _zero()),
                  sessions.setdefault((a.get("agent_id"), a.get("session_id")), _zero())):
            _add(r, e)
        if e.get("priceSource") and not e["undone"]:
            sources.add(e["priceSource"])
    for r in [total, *agents.values(), *sessions.values()]:
        for k in MONEY:
            r[k] = round(r[k], 6)
    return {"total": total, "agents": agents,
            "sessions": [{"agent": k[0], "sessionId": k[1], **v} for k, v in sessions.items()],
            "priceSources": sorted(sources)}
