"""The lean view after an OpenClaw upgrade: re-install, never edit in place.

Since OpenClaw 2026.10.1 installed plugin files are sealed: editing them in place does nothing; a plugin is
re-installed, then the gateway restarts or `openclaw plugins reload <id>` loads it (../shared/docs/
openclaw-after-9.6.md, "Context-engine plugins"). Non-interactive local installs need `--force
--accept-capabilities` on every install (2026.8+; 2026.7.x has neither flag). So when the release behind the
`openclaw` command differs from the one `occd lean enable` recorded, occd refreshes its own copy of the plugin,
installs it again with OpenClaw's installer and reloads it where the CLI can (`plugins reload`), else says that a
gateway restart loads it. The release is checked first (occd.lean.check_release): a release the plugin does not
support is reported, never installed into.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Mapping

from occd.errors import OccdError


def can_reload(oc) -> bool:
    """The CLI has `openclaw plugins reload <id>` (listed by `openclaw plugins --help`)."""
    p = oc.run(["plugins", "--help"], timeout=120)
    return p.returncode == 0 and any(ln.strip().startswith("reload") for ln in p.stdout.splitlines())


def refresh_after_upgrade(state_dir: Path, env: Mapping[str, str] | None = None) -> dict | None:
    """None when there is nothing to do (the lean view is off, or the release is the recorded one); else
    {from, to, reinstalled, reloaded, hint}. Raises OccdError when the new release cannot take the plugin or the
    install fails (the marker keeps the old release: it is tried again next time)."""
    from occd import lean

    if not lean.is_enabled(state_dir, env):
        return None
    marker = lean._read_json(lean.marker_path(env)) or {}
    binary = lean.openclaw_bin(env)
    pkg = lean.openclaw_package_dir(binary) if binary else None
    if pkg is None:
        return None  # no CLI to compare with: `occd doctor` says so
    support = lean.release_support(pkg)
    if not support.get("version") or support["version"] == marker.get("release"):
        return None
    lean.check_release(support)
    oc = lean._OpenClaw(state_dir, binary, env)
    dest = lean.installed_plugin_dir(env)
    lean._copy_plugin(dest, env)  # occd's own copy, which OpenClaw installs from (never OpenClaw's sealed files)
    p = oc.run(lean.install_args(oc, dest))
    if p.returncode != 0 or lean.slot_owner(lean._load_config(state_dir)) != lean.PLUGIN_ID:
        raise OccdError(f"OpenClaw {support['version']} did not re-install the lean view plugin: {lean._last_line(p)}",
                        "run `occd lean enable` again, or `occd lean disable`", code="OPENCLAW_FAILED")
    reloaded = False
    if lean.gateway_running(state_dir) and can_reload(oc):
        r = oc.run(["plugins", "reload", lean.PLUGIN_ID])
        reloaded = r.returncode == 0
    hint = None if reloaded else "restart the OpenClaw gateway to load it"
    lean.write_json_atomic(lean.marker_path(env), {**marker, "release": support["version"],
                                                   "previousRelease": marker.get("release"),
                                                   "reinstalledAt": time.time(),
                                                   "durableTurnContract": support["durableTurnContract"]})
    return {"from": marker.get("release"), "to": support["version"], "reinstalled": True, "reloaded": reloaded,
            "hint": hint}
