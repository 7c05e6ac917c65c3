"""The maintain job (weekly): thin old observations past the retention, refresh statistics, checkpoint the WAL."""

from __future__ import annotations


def run(ctx) -> dict:
    days = ctx.settings.daemon.observation_retention_days
    removed = ctx.ledger.prune_observations(ctx.now() - days * 86400, now=ctx.now())
    ctx.ledger.maintain()
    return {"observationsRemoved": removed}
