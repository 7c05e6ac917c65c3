"""What occd saved, as `occd stats`, `occd status` and `occd history` show it: one sum (occd.policy.savings) over
the ledger's automatic strips, rotations and lean-view moves, with what verified or undid them."""

from __future__ import annotations


SAVINGS_KINDS = ("strip", "rotate", "lean-move", "verify-strip", "restore", "rotate-undo")  # what savings read


def _savings_rows(led, since, agent: str | None = None) -> list[dict]:
    """The actions occd.policy.savings reads (the savings and what verifies or undoes them) since a time."""
    rows: list[dict] = []
    for kind in SAVINGS_KINDS:
        rows += led.history(agent=agent, kind=kind, since=since, limit=1_000_000)
    rows.sort(key=lambda a: (a["ts"], a["id"]), reverse=True)  # newest first, as history returns them
    return rows


def _rotation_turns(led, since) -> dict:
    from occd.jobs.rotate import rotation_turns

    return rotation_turns(led, None if since is None else since - 86400)  # a rotation starts before its record


def savings_since(led, settings, since) -> dict:
    """What was saved since a time (occd.policy.savings.summarize): the one sum behind `occd status`, `occd stats`
    and the per-action figures of `occd history` (action_savings)."""
    from occd.policy.savings import summarize

    return summarize(_savings_rows(led, since), horizon=settings.cost.horizon_turns,
                     rotation_turns=_rotation_turns(led, since))


def action_savings(led, rows: list[dict], settings=None) -> None:
    """Each automatic strip, rotation or lean-view move among `rows` gets `saved`: what it saved by the same rule
    as `occd stats` (occd.policy.savings.effects), so history's rows add up to the stats of the same period."""
    from occd.policy.savings import _counted, effects

    mine = [a for a in rows if _counted(a)]
    if not mine:
        return
    since = min(a["ts"] for a in mine)
    ctx: dict = {}
    for agent in {a.get("agent_id") for a in mine}:
        for a in _savings_rows(led, since, agent):
            ctx[a["id"]] = a
    eff = effects(list(ctx.values()), horizon=_horizon(settings), rotation_turns=_rotation_turns(led, since))
    for a in mine:
        e = eff.get(a["id"])
        if e is not None:
            a["saved"] = {k: v for k, v in e.items() if k not in ("kind", "priceSource")}


def cost_assumptions(settings, sources: list) -> dict:
    """What the net money figures assume (occd.policy.cost), for `--json`."""
    from occd.policy import cost as cm

    c = settings.cost
    return {"usdNet": ("per action: the cache reads the smaller prompt saves on the following turns + an avoided "
                       "compaction's summary call and rebuilt prompt (only where one is counted avoided) - the cache write the rewrite causes "
                       "(none once the cache expired); negative when it cost more than it saved"),
            "priceSources": sources, "defaultPrices": dict(cm.DEFAULT_PRICES),
            "priceOrder": ["openclaw.json models.providers.*.models[].cost", "litellm price map (JSON file)", "defaults"],
            "cacheTtlSeconds": dict(c.cache_ttl_seconds), "turnsAssumed": c.horizon_turns,
            "turnsRule": "the following turns until the next compaction would have come, at most turnsAssumed",
            "summaryTokens": c.summary_tokens}



def _horizon(settings) -> int:
    """cost.horizon_turns (history loads no settings for speed: read them only when it shows savings)."""
    if settings is None:
        from occd.config import load_settings

        settings = load_settings()
    return settings.cost.horizon_turns
