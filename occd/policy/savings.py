"""What occd saved: context tokens removed, compactions OpenClaw did not have to do, and NET money once the
provider's prompt cache is priced (occd.policy.cost).

- tokens removed: context tokens, what the model is no longer sent each turn: the session's context figure before
  the strip (what was in the model's context: the active branch since the last compaction, as every command
  shows it) minus the figure after it, never more than the figure before (`context_removed`). Compacted-away
  history and abandoned branches are not sent, so removing them saves no context; and never more than the prompt
  the model was being sent where the strip recorded it;
- a compaction avoided: the trigger predicted OpenClaw would compact within AVOID_HORIZON_TURNS turns
  (predicted estimate + that many turns of growth >= its budget) and the strip brought the estimate under it;
- money (net): per action, what the smaller prompt saves on the following turns (cache reads; until the next
  compaction would have come, at most `cost.horizon_turns`) plus a prevented compaction's summary call and rebuilt
  prompt, minus the cache write the rewrite causes on the next turn (none when the cache had expired). Negative
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


def _zero() -> dict:
    return {"strips": 0, "rotations": 0, "leanMoves": 0, "tokensRemoved": 0, "compactionsAvoided": 0,
            "usdSaved": 0.0, "usdCacheWrites": 0.0, "usdCompactionsAvoided": 0.0, "usdNet": 0.0, "unpriced": 0,
            "emergencies": 0}


def _int(v):
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def strip_effect(before: dict, removed: int, *, horizon: int = 10):
    """The cost model's verdict on one recorded strip (occd.policy.cost.rewrite_effect), from what the ledger
    kept: the inputs recorded with it (`before["cost"]`, occd.jobs.apply) or, for older rows, the prediction and
    the input price. None when the prompt the model was sent is unknown (nothing to bound the figures by)."""
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
    prevents = bool(c.get("preventsCompaction", before.get("compactionAvoided")))
    return cm.rewrite_effect(P, removed, prices, prefix_kept_tokens=_int(c.get("prefixKeptTokens")) or
                             _int(before.get("overheadTokens")) or 0, turns=turns, warm=c.get("warm", True) is not False,
                             prevents_compaction=prevents,
                             compaction_history_tokens=_int(c.get("compactionHistoryTokens")) or _int(before.get("promptBudget")),
                             summary_tokens=_int(c.get("summaryTokens")) or cm.DEFAULT_SUMMARY_TOKENS), prices


def _add(rows, effect) -> None:
    for r in rows:
        r["usdSaved"] += effect.savedUsd
        r["usdCacheWrites"] += effect.writeUsd
        r["usdCompactionsAvoided"] += effect.compactionUsd
        r["usdNet"] += effect.netUsd


def _price(rows, got, sources: set) -> None:
    """Add one action's priced effect (strip_effect's (effect, prices), or None: unpriced) to every row."""
    if got is None:
        for r in rows:
            r["unpriced"] += 1
        return
    _add(rows, got[0])
    sources.add(got[1].source)


def summarize(actions: Iterable[dict], *, horizon: int = 10) -> dict:
    """Savings from the ledger's automatic strips, rotations and lean-view boundary moves, per agent and session,
    with the net money of each (module doc). Each action row is a ledger history row (before/after JSON)."""
    total = _zero()
    agents: dict = {}
    sessions: dict = {}
    sources: set = set()
    for a in actions:
        if a.get("dry_run") or a.get("outcome") != "ok" or a.get("trigger") != "auto":
            continue
        kind = a.get("kind")
        if kind not in ("strip", "rotate", "lean-move"):
            continue
        before = a.get("before") or {}
        after = a.get("after") or {}
        if isinstance(before, str):
            before = json.loads(before)
        if isinstance(after, str):
            after = json.loads(after)
        rows = [total, agents.setdefault(a.get("agent_id"), _zero()),
                sessions.setdefault((a.get("agent_id"), a.get("session_id")), _zero())]
        if kind == "rotate":
            for r in rows:
                r["rotations"] += 1
            got = strip_effect(before, max(0, (_int(before.get("promptTokens")) or 0) - (_int(after.get("seedTokens")) or 0)),
                               horizon=horizon) if _int(before.get("promptTokens")) else None
            _price(rows, got, sources)
            continue
        if kind == "lean-move":
            got = strip_effect(before, _int(before.get("removedTokens")) or 0, horizon=horizon)
            for r in rows:
                r["leanMoves"] += 1
            _price(rows, got, sources)
            continue
        removed = context_removed(before, after)
        got = strip_effect(before, removed, horizon=horizon)
        if got is not None:
            removed = got[0].removedTokens  # bounded by the prompt the model was sent
        for r in rows:
            r["strips"] += 1
            r["tokensRemoved"] += removed
            r["compactionsAvoided"] += 1 if before.get("compactionAvoided") else 0
            r["emergencies"] += 1 if before.get("emergency") else 0
        _price(rows, got, sources)
    for r in [total, *agents.values(), *sessions.values()]:
        for k in ("usdSaved", "usdCacheWrites", "usdCompactionsAvoided", "usdNet"):
            r[k] = round(r[k], 6)
    return {"total": total, "agents": agents,
            "sessions": [{"agent": k[0], "sessionId": k[1], **v} for k, v in sessions.items()],
            "priceSources": sorted(sources)}
