"""The verify job (after each scan): did what occd did take effect? File era: a strip's prediction against the
next real turn's figure (occd.actions.verify_strip). With the lean view on: the turns OpenClaw stored went
through the plugin's assemble() (occd.lean.check)."""

from __future__ import annotations


def _is_seed(user_text: str, reply_text: str) -> bool:
    """A file-era rotation's seed turn: occd wrote it, no model was called (so no assemble() either)."""
    from occd.rotation.seed import ACK, SEED_MARK

    return SEED_MARK in user_text and reply_text == ACK


def run(ctx) -> dict:
    from occd.actions.verify_strip import verify_strips
    from occd.jobs.scan import ensure_scan
    from occd.lean.check import verify_lean

    sessions = list(ensure_scan(ctx).sessions)
    out = verify_strips(ctx.ledger, sessions, ctx.now())
    out.update(verify_lean(ctx, sessions, _is_seed))
    return out
