"""The registry behind `occd doctor`: its context, the @check decorator, running the checks, and the small
formatters they share. Checks register from occd/health/doctor.py (see its docstring)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from occd import paths
from occd.checks import CheckResult
from occd.config import redact


Result = CheckResult  # the name checks registered here use (see above)


@dataclass
class DoctorContext:
    now: float
    settings: Any = None            # None when the config could not be loaded
    settings_error: Any = None
    env: dict = field(default_factory=lambda: dict(os.environ))
    cache: dict = field(default_factory=dict)
    online: bool = False            # `doctor --online`: checks may use the network (the LLM reachability probe)

    def ledger(self):
        """The ledger opened read-only, or None when there is none (never created by the doctor)."""
        if "ledger" not in self.cache:
            led = None
            if paths.ledger_path().exists():
                from occd.ledger import Ledger

                try:
                    led = Ledger.open(readonly=True)
                except Exception:  # noqa: BLE001 - the ledger check reports why
                    led = None
            self.cache["ledger"] = led
        return self.cache["ledger"]

    def daemon(self) -> tuple[int | None, dict]:
        """(the pid holding the daemon's lock or None, its status file's contents or {}), read once per doctor run
        for the checks that look at the daemon (service, heartbeat, watch, daemon-log)."""
        if "daemon" not in self.cache:
            from occd.runtime.lock import InstanceLock
            from occd.runtime.statusfile import read_status

            self.cache["daemon"] = (InstanceLock.holder(), read_status() or {})
        return self.cache["daemon"]

    def demo(self) -> dict | None:
        """The mark `occd demo` leaves in a home it made (a kept demo state), or None."""
        if "demo" not in self.cache:
            import json

            try:
                d = json.loads((paths.data_dir() / "demo.json").read_text())
            except (OSError, ValueError):
                d = None
            self.cache["demo"] = d if isinstance(d, dict) and d.get("demo") else None
        return self.cache["demo"]

    def state_dir(self) -> Path:
        from occd.openclaw.state import resolve_state_dir

        return resolve_state_dir(state_dir=getattr(self.settings, "state_dir", None))

    def close(self) -> None:
        led = self.cache.get("ledger")
        if led is not None:
            led.close()


CHECKS: list[tuple[int, str, Callable[[DoctorContext], Any]]] = []


def check(name: str, order: int = 50):
    """Register a check function (see the module docstring)."""

    def deco(fn):
        CHECKS.append((order, name, fn))
        CHECKS.sort(key=lambda x: x[0])
        return fn

    return deco


def run_checks(ctx: DoctorContext, only: list[str] | None = None) -> list[Result]:
    out: list[Result] = []
    for _order, name, fn in list(CHECKS):
        if only and name not in only:
            continue
        try:
            res = fn(ctx)
        except Exception as e:  # noqa: BLE001 - a broken check is a failed line, not a crashed doctor
            msg = getattr(e, "message", None) or f"{type(e).__name__}: {e}"
            res = Result(name, "fail", str(msg).splitlines()[0] if str(msg) else type(e).__name__,
                         getattr(e, "hint", None))
        if res is None:
            continue
        for r in res if isinstance(res, list) else [res]:  # settings in a line (llm.api_base): credentials redacted
            r.detail, r.hint = redact(r.detail), redact(r.hint)
            out.append(r)
    return out


def _age(secs: float) -> str:
    secs = max(0.0, secs)
    if secs < 120:
        return f"{secs:.0f}s"
    if secs < 7200:
        return f"{secs / 60:.0f}m"
    if secs < 172800:
        return f"{secs / 3600:.1f}h"
    return f"{secs / 86400:.0f}d"


def _size(n: int) -> str:
    from occd.units import human_bytes

    return human_bytes(n)


# ---- the checks -----------------------------------------------------------------------------------------
