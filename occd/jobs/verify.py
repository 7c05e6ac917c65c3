"""The verify job (after each scan): did what occd did take effect? File era: a strip's prediction against the
next real turn's figure (occd.health.strip_check). Database era with the lean view: the turns OpenClaw stored
went through the plugin's assemble() (occd.health.lean_check)."""

from __future__ import annotations

import logging

log = logging.getLogger("occd.jobs.verify")


def run(ctx) -> dict:
    from occd.health.strip_check import verify_strips

    from occd.jobs.scan import ensure_scan

    sessions = list(ensure_scan(ctx).sessions)
    out = verify_strips(ctx.ledger, sessions, ctx.now())
    from occd.health.lean_check import verify_lean

    out.update(verify_lean(ctx, sessions))
    return out
