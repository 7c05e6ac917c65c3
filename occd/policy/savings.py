"""What occd saved: context tokens removed, compactions OpenClaw did not have to do, money on the next turns.

- tokens removed: context tokens, what the model is no longer sent each turn: the session's context figure before
  the strip (what was in the model's context: the active branch since the last compaction, as every command
  shows it) minus the figure after it, never more than the figure before (`context_removed`). Compacted-away
  history and abandoned branches are not sent, so removing them saves no context;
- a compaction avoided: the trigger predicted OpenClaw would compact within AVOID_HORIZON_TURNS turns
  (predicted estimate + that many turns of growth >= its budget) and the strip brought the estimate under it;
- money: tokens removed x the model's input price x SAVINGS_HORIZON_TURNS following turns (the price from
  OpenClaw's models config, `models.providers.<p>.models[].cost.input` in USD per million tokens, else litellm's
  cost map read from the installed package's JSON file; litellm itself is never imported here).
"""

from __future__ import annotations

import json
import os
from typing import Iterable

AVOID_HORIZON_TURNS = 3
SAVINGS_HORIZON_TURNS = 5
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
        for m in (p or {}).get("models") or [] if isinstance(p, dict) else []:
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
    for k in _model_ids(model):
        v = (table.get(k) or {}).get("input_cost_per_token") if isinstance(table.get(k), dict) else None
        if isinstance(v, (int, float)):
            return float(v) * 1e6
    return None


def input_price_per_mtok(cfg: dict | None, model: str | None, cache: dict | None = None) -> float | None:
    p = price_from_openclaw(cfg, model)
    return p if p is not None else price_from_litellm(model, cache)


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
    return {"strips": 0, "rotations": 0, "tokensRemoved": 0, "compactionsAvoided": 0, "usdSaved": 0.0,
            "emergencies": 0}


def summarize(actions: Iterable[dict]) -> dict:
    """Savings from the ledger's automatic strips (and rotations), per agent and session. Each action row is a
    ledger history row (before/after JSON)."""
    total = _zero()
    agents: dict = {}
    sessions: dict = {}
    for a in actions:
        if a.get("dry_run") or a.get("outcome") != "ok" or a.get("trigger") != "auto":
            continue
        kind = a.get("kind")
        if kind not in ("strip", "rotate"):
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
            continue
        removed = context_removed(before, after)
        price = before.get("inputUsdPerMTok")
        usd = removed * price / 1e6 * SAVINGS_HORIZON_TURNS if isinstance(price, (int, float)) else 0.0
        for r in rows:
            r["strips"] += 1
            r["tokensRemoved"] += removed
            r["compactionsAvoided"] += 1 if before.get("compactionAvoided") else 0
            r["usdSaved"] += usd
            r["emergencies"] += 1 if before.get("emergency") else 0
    return {"total": total, "agents": agents,
            "sessions": [{"agent": k[0], "sessionId": k[1], **v} for k, v in sessions.items()]}
