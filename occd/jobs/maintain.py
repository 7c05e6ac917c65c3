"""The maintain job (weekly): thin old observations past the retention, refresh statistics, checkpoint the WAL,
and remove temp files crashed occd writes left in the agents' sessions folders (every write also does that in
its own folder)."""

from __future__ import annotations


def run(ctx) -> dict:
    days = ctx.settings.daemon.observation_retention_days
    removed = ctx.ledger.prune_observations(ctx.now() - days * 86400, now=ctx.now())
    ctx.ledger.maintain()
    return {"observationsRemoved": removed, "staleTempFiles": _clean_temps(ctx)}


def _clean_temps(ctx) -> int:
    from occd.transcript.rewrite import clean_stale_temps

    root = getattr(ctx, "state_dir", None)
    n = 0
    try:
        agents = [d for d in (root / "agents").iterdir() if d.is_dir()] if root else []
    except OSError:
        return 0
    for d in agents:
        n += len(clean_stale_temps(d / "sessions"))
    return n
