"""The prune job (daily): keep the newest `backups_keep` backups of every transcript, record what was pruned."""

from __future__ import annotations

import logging
import os
import re

from occd.errors import OccdError

log = logging.getLogger("occd.jobs.prune")
_BACKUP = re.compile(r"^(?P<stem>.+)\.backup\.\d+(\.pinned)?\.jsonl$")


def run(ctx) -> dict:
    from occd.actions import backups
    from occd.openclaw import list_agents

    keep = ctx.settings.backups_keep
    pruned = 0
    try:
        agents = list_agents(ctx.state_dir)
    except OccdError as e:
        log.warning("%s", e.message)
        return {"pruned": 0}
    for agent in agents:
        sdir = agent.dir / "sessions"
        try:
            names = os.listdir(sdir)
        except OSError:
            continue
        stems = {m.group("stem") for n in names if (m := _BACKUP.match(n))}
        for stem in sorted(stems):
            if ctx.stop.is_set():
                return {"pruned": pruned}
            for p in backups.prune(sdir / f"{stem}.jsonl", keep):
                pruned += 1
                ctx.ledger.mark_backup_pruned(p, now=ctx.now())
                log.info("pruned backup %s", p)
    return {"pruned": pruned}
