"""OpenClaw's config as the scan reads it: parsed again only when the file changed, looked at once per scan (not
once per agent: 2,000 agents read it), and the window the config names for a session's model."""

from __future__ import annotations

import logging
import os

from occd.errors import OccdError
from occd.openclaw import config_mtime

log = logging.getLogger("occd.jobs.scan")

CYCLE_TOKEN_KEY = "scan.cycle"  # set while a scan runs (_begin_cycle .. _end_cycle)
CYCLE_CFG_KEY = "scan.cycle_config"  # (cycle token, config, its mtime): looked at once per scan, not per agent


def _openclaw_config(ctx) -> dict | None:
    """OpenClaw's config (JSON5, slow to parse), parsed again only when the file changed. Within a scan the look
    at the file is made once (scan.run), not once per agent."""
    from occd.openclaw import load_openclaw_config
    from occd.openclaw.state import config_path

    cyc = ctx.cache.get(CYCLE_CFG_KEY)
    if cyc is not None and cyc[0] is ctx.cache.get(CYCLE_TOKEN_KEY):
        return cyc[1]
    p = config_path(ctx.state_dir)
    try:
        st = os.stat(p)
        key = (str(p), st.st_ino, st.st_size, st.st_mtime_ns)
    except OSError:
        key = (str(p), None)
    hit = ctx.cache.get("scan.openclaw_config")
    if hit and hit[0] == key:
        return hit[1]
    try:
        cfg = load_openclaw_config(ctx.state_dir)
    except OccdError as e:
        log.warning("%s: context windows fall back to OpenClaw's default", e.message)
        cfg = None
    ctx.cache["scan.openclaw_config"] = (key, cfg)
    return cfg


def _window(ctx, cfg: dict | None, agent_id: str, info) -> int | None:
    """The window the config names for the session's model (None: none; figure.session_window chooses)."""
    from occd.openclaw import context_window

    return None if cfg is None else context_window(ctx.state_dir, agent=agent_id, model=getattr(info, "model", None),
                                                   provider=getattr(info, "model_provider", None), config=cfg,
                                                   default=None)


def _cycle_config_mtime(ctx) -> float | None:
    cyc = ctx.cache.get(CYCLE_CFG_KEY)
    if cyc is not None and cyc[0] is ctx.cache.get(CYCLE_TOKEN_KEY):
        return cyc[2]
    return config_mtime(ctx.state_dir)


def _begin_cycle(ctx) -> None:
    """OpenClaw's config and its mtime, looked at once for the whole scan (every agent reads them)."""
    ctx.cache.pop(CYCLE_CFG_KEY, None)
    token = ctx.cache[CYCLE_TOKEN_KEY] = object()
    cfg = _openclaw_config(ctx)
    ctx.cache[CYCLE_CFG_KEY] = (token, cfg, config_mtime(ctx.state_dir))


def _end_cycle(ctx) -> None:
    ctx.cache.pop(CYCLE_TOKEN_KEY, None)
    ctx.cache.pop(CYCLE_CFG_KEY, None)
