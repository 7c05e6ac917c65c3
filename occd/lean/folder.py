"""The lean view's plugin folder on disk: switched in one atomic step, and checked for being complete (what
`occd lean enable` and `occd doctor` rely on; see occd.lean)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

PLUGIN_FILES = ("index.js", "recall.js", "safefs.js", "sticky.js", "openclaw.plugin.json", "package.json")


def switch_plugin(new: Path, dest: Path) -> None:
    """`new` (a complete plugin folder beside `dest`) becomes `dest` in ONE atomic step, so OpenClaw's configured
    path never names a missing or half-copied folder, whenever occd is killed: a plain rename when there is no
    `dest` yet, else an exchange of the two names (renameat2 RENAME_EXCHANGE / renamex_np RENAME_SWAP); the old
    copy, now under `new`'s name, is removed after. Only where the filesystem cannot exchange: two renames,
    with the old copy put back if the second one fails."""
    from occd.openclaw.swap import exchange

    if not os.path.lexists(dest):
        os.replace(new, dest)
        return
    if not exchange(new, dest):
        old = dest.parent / f".plugin.{os.getpid()}.old"
        shutil.rmtree(old, ignore_errors=True)
        os.replace(dest, old)
        try:
            os.replace(new, dest)
        except BaseException:
            os.replace(old, dest)
            raise
        new = old
    shutil.rmtree(new, ignore_errors=True)


def configured_plugin_paths(config: dict) -> list[str]:
    """OpenClaw's `plugins.load.paths` (the folders it loads at start; a missing one stops it)."""
    plugins = config.get("plugins") if isinstance(config.get("plugins"), dict) else {}
    load = plugins.get("load") if isinstance(plugins.get("load"), dict) else {}
    ps = load.get("paths")
    return [p for p in ps if isinstance(p, str)] if isinstance(ps, list) else []


def plugin_folder_problem(folder: Path) -> str | None:
    """Why `folder` is not a complete plugin folder, or None: the manifests, index.js and every module the
    folder's own modules import (an older copy that imports fewer modules is complete as it is)."""
    if not folder.is_dir():
        return "path missing"
    missing = [f for f in ("index.js", "openclaw.plugin.json", "package.json") if not (folder / f).is_file()]
    seen, todo = set(), ["index.js"]
    while todo and not missing:
        name = todo.pop()
        seen.add(name)
        try:
            code = (folder / name).read_text(errors="replace")[:200_000] if (folder / name).is_file() else None
        except OSError:
            code = None
        if code is None:
            missing.append(name)
            continue
        todo += [m for m in re.findall(r'from\s+"\./([\w.-]+\.js)"', code) if m not in seen and m not in todo]
    return f"incomplete (no {', '.join(missing)})" if missing else None
