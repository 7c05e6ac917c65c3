"""Metrics for Prometheus (issue 29, point 7): `occd metrics` prints them (OpenMetrics), and the daemon keeps the
same in a node_exporter textfile (`daemon.metrics_textfile`, written atomically after each cycle).

Built with prometheus_client (imported here only, inside the functions: read-only commands stay fast) from the
ledger (compactions seen, actions by kind and outcome, tokens and money saved, net, as `occd stats` counts them,
breakers, open problems) and the daemon's status file (watched and polled folders and agents, cycle durations and
the time from a run's end to occd's decision, histograms the daemon keeps: `DaemonMetrics`).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path

log = logging.getLogger("occd.runtime.metrics")

LATENCY_BUCKETS = (0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0)
CYCLE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0)
BREAKER_STATES = ("closed", "open", "half_open")


class Hist:
    """A histogram's counts (per bucket, the last one +Inf) and sum: what the status file carries."""

    def __init__(self, buckets=LATENCY_BUCKETS):
        self.buckets = tuple(float(b) for b in buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        v = max(0.0, float(v))
        i = next((i for i, b in enumerate(self.buckets) if v <= b), len(self.buckets))
        self.counts[i] += 1
        self.sum += v

    def to_dict(self) -> dict:
        return {"buckets": list(self.buckets), "counts": list(self.counts), "sum": self.sum}


def cumulative(d: dict) -> tuple[list[tuple[str, int]], float] | None:
    """A status-file histogram as prometheus_client's buckets: [(le, cumulative count)], sum."""
    try:
        bounds, counts = [float(b) for b in d["buckets"]], [int(c) for c in d["counts"]]
        total = float(d["sum"])
    except (KeyError, TypeError, ValueError):
        return None
    if len(counts) != len(bounds) + 1:
        return None
    out, n = [], 0
    for b, c in zip(bounds + [float("inf")], counts):
        n += c
        out.append(("+Inf" if b == float("inf") else repr(b), n))
    return out, total


class DaemonMetrics:
    """What the daemon measures for the metrics: when runs ended (the watcher says), when it decided on them,
    how long its cycles take. Thread-safe: the watcher's thread notes run ends, the cycle takes them."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pending: list[float] = []
        self.latency = Hist(LATENCY_BUCKETS)
        self.cycles = Hist(CYCLE_BUCKETS)
        self.last_cycle_s: float | None = None
        self.savings_cache: tuple | None = None  # (newest action id, summary): the daemon re-counts on change only

    def note_run_ends(self, times) -> None:
        with self.lock:
            self.pending.extend(float(t) for t in times)
            del self.pending[:-10000]  # bounded whatever happens

    def take_run_ends(self) -> list[float]:
        with self.lock:
            out, self.pending = self.pending, []
        return out

    def decided(self, ends: list[float], at: float) -> None:
        with self.lock:
            for t in ends:
                self.latency.observe(at - t)

    def cycle_took(self, seconds: float) -> None:
        with self.lock:
            self.cycles.observe(seconds)
            self.last_cycle_s = seconds

    def to_status(self) -> dict:
        with self.lock:
            return {"runEndToDecision": self.latency.to_dict(), "cycleSeconds": self.cycles.to_dict(),
                    "lastCycleSeconds": self.last_cycle_s}


# ---- the families --------------------------------------------------------------------------------------------
def _savings(led, settings, cache_owner=None) -> dict:
    from occd.policy.savings import summarize

    newest = None
    if cache_owner is not None:
        rows = led._rows("SELECT MAX(id) AS m, COUNT(*) AS n FROM actions", ())
        newest = (rows[0]["m"], rows[0]["n"]) if rows else None
        if cache_owner.savings_cache is not None and cache_owner.savings_cache[0] == newest:
            return cache_owner.savings_cache[1]
    s = summarize(led.history(since=None, limit=10_000_000), horizon=settings.cost.horizon_turns)
    if cache_owner is not None:
        cache_owner.savings_cache = (newest, s)
    return s


def families(settings, *, ledger=None, status: dict | None = None, running: bool = False, cache_owner=None) -> list:
    """The metric families (prometheus_client.core) from the ledger and the daemon's status file."""
    from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                        InfoMetricFamily, StateSetMetricFamily)

    from occd import __version__

    out: list = [InfoMetricFamily("occd_build", "occd's version", value={"version": __version__})]
    out.append(GaugeMetricFamily("occd_daemon_up", "1 while the daemon runs", value=1 if running else 0))
    st = status or {}
    if ledger is not None:
        comp = GaugeMetricFamily("occd_compactions_seen", "compactions OpenClaw recorded in the sessions occd "
                                 "observes (archived ones included)", labels=["agent"])
        per: dict[str, int] = {}
        for o in ledger.latest_observations(include_archived=True):
            per[o["agent"]] = per.get(o["agent"], 0) + int(o.get("compaction_count") or 0)
        for a, n in sorted(per.items()):
            comp.add_metric([a], n)
        out.append(comp)
        acts = CounterMetricFamily("occd_actions", "actions recorded in the ledger, by kind and outcome (dry runs: "
                                   "outcome dry_run)", labels=["agent", "kind", "outcome"])
        for a, kinds in sorted(ledger.action_counts_since(0).items()):
            for k, outs in sorted(kinds.items()):
                for o, n in sorted(outs.items()):
                    acts.add_metric([a, k, o or ""], n)
        out.append(acts)
        sv = _savings(ledger, settings, cache_owner)
        tok = GaugeMetricFamily("occd_tokens_saved", "context tokens occd's strips, rotations and lean-view moves "
                                "took out of what the model is sent (as `occd stats`)", labels=["agent"])
        usd = GaugeMetricFamily("occd_money_saved_usd", "money saved, net of the cache writes the rewrites "
                                "caused (as `occd stats`; negative when it cost more)", labels=["agent"])
        avoided = GaugeMetricFamily("occd_compactions_avoided", "compactions occd's actions prevented (as "
                                    "`occd stats`)", labels=["agent"])
        for a, row in sorted((sv.get("agents") or {}).items(), key=lambda x: str(x[0])):
            tok.add_metric([a or ""], row["tokensRemoved"])
            usd.add_metric([a or ""], round(row["usdNet"], 6))
            avoided.add_metric([a or ""], row["compactionsAvoided"])
        out += [tok, usd, avoided]
        brk = StateSetMetricFamily("occd_breaker", "the circuit breaker of automatic actions, per agent and kind",
                                   labels=["agent", "kind"])
        for b in ledger.breakers():
            state = str(b.state).replace("-", "_")
            brk.add_metric([b.agent, b.kind], {s: s == state for s in dict.fromkeys(BREAKER_STATES + (state,))})
        out.append(brk)
        probs = GaugeMetricFamily("occd_problems_open", "open problems (occd check, verifications)",
                                  labels=["code", "severity"])
        counts: dict[tuple, int] = {}
        try:
            for p in ledger.open_problems():
                key = (p["code"], p.get("severity") or "")
                counts[key] = counts.get(key, 0) + 1
        except Exception:  # noqa: BLE001 - an older ledger without the table
            pass
        for (c, s), n in sorted(counts.items()):
            probs.add_metric([c, s], n)
        out.append(probs)
    out += _daemon_families(st if running else {})
    return out


def _daemon_families(st: dict) -> list:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

    w = st.get("watch") or {}
    folders = GaugeMetricFamily("occd_watch_folders", "folders the daemon watches (the OS tells it of writes) or "
                                "polls (they could not be watched)", labels=["mode"])
    agents = GaugeMetricFamily("occd_watch_agents", "agents watched or polled", labels=["mode"])
    since = GaugeMetricFamily("occd_watch_agent_since_seconds", "since when each agent is watched or polled "
                              "(epoch seconds)", labels=["agent", "mode"])
    per = w.get("agents") or {}
    polling_all = w.get("mode") == "polling"
    for mode in ("watched", "polled"):
        folders.add_metric([mode], int(w.get(mode) or 0))
        agents.add_metric([mode], sum(1 for v in per.values() if v.get("mode") == mode))
    for a, v in sorted(per.items()):
        since.add_metric([a, v.get("mode") or ""], float(v.get("since") or 0))
    out = [folders, agents, since]
    out.append(GaugeMetricFamily("occd_watch_polling", "1 when the daemon watches nothing and polls (its scan "
                                 "every daemon.poll_interval_seconds)", value=1 if polling_all else 0))
    out.append(CounterMetricFamily("occd_wakes", "wakes on a run's end", value=int(w.get("wakes") or 0)))
    m = st.get("metrics") or {}
    for key, name, doc in (("cycleSeconds", "occd_cycle_duration_seconds", "the daemon's scan cycles (scan and "
                                                                           "the jobs chained after it)"),
                           ("runEndToDecision", "occd_run_end_to_decision_seconds",
                            "from a run's end (its last write, its lock released) to occd's decision on it")):
        h = cumulative(m.get(key) or {})
        if h is not None:
            fam = HistogramMetricFamily(name, doc)
            fam.add_metric([], h[0], sum_value=h[1])
            out.append(fam)
    if m.get("lastCycleSeconds") is not None:
        out.append(GaugeMetricFamily("occd_last_cycle_duration_seconds", "the last cycle's duration",
                                     value=float(m["lastCycleSeconds"])))
    if st.get("lastCycle"):
        out.append(GaugeMetricFamily("occd_last_cycle_timestamp_seconds", "when the last cycle ended",
                                     value=float(st["lastCycle"])))
    return out


def registry(fams: list):
    from prometheus_client import CollectorRegistry

    class _Fixed:
        def collect(self):
            return iter(fams)

    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Fixed())
    return reg


def render(reg, fmt: str = "openmetrics") -> bytes:
    """OpenMetrics (what `occd metrics` prints), or Prometheus' text format 0.0.4 (what node_exporter's textfile
    collector reads: no `# EOF`, no info or stateset types)."""
    if fmt == "openmetrics":
        from prometheus_client.openmetrics.exposition import generate_latest

        return generate_latest(reg)
    from prometheus_client.exposition import generate_latest as text

    return text(reg)


def as_json(reg) -> list[dict]:
    return [{"name": f.name, "type": f.type, "help": f.documentation,
             "samples": [{"name": s.name, "labels": dict(s.labels), "value": s.value} for s in f.samples]}
            for f in reg.collect()]


def current(settings) -> object:
    """`occd metrics`: the registry from the ledger (read-only; none yet: the build and daemon families only) and
    the running daemon's status file."""
    from occd import paths
    from occd.runtime.lock import InstanceLock
    from occd.runtime.statusfile import read_status

    running = InstanceLock.holder() is not None
    st = read_status() or {}
    if not paths.ledger_path().exists():
        return registry(families(settings, status=st, running=running))
    from occd.ledger import Ledger

    with Ledger.open(readonly=True) as led:
        return registry(families(settings, ledger=led, status=st, running=running))


def write_textfile(path: Path, data: bytes) -> None:
    """Atomically (a temp file beside it that node_exporter ignores, fsync, rename), keeping the file's mode
    (0644 for a new one: node_exporter often runs as another user)."""
    path = Path(path).expanduser()
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o644
    from occd import paths

    paths.write_atomic(path, data, mode)


def write_daemon_textfile(daemon, status: dict) -> None:
    """After a cycle, when `daemon.metrics_textfile` is set: the same metrics, for node_exporter."""
    target = getattr(daemon.settings.daemon, "metrics_textfile", None)
    if not target or daemon.ctx is None:
        return
    try:
        fams = families(daemon.settings, ledger=daemon.ctx.ledger, status=status, running=True,
                        cache_owner=daemon.metrics)
        write_textfile(Path(target), render(registry(fams), "text"))
    except Exception as e:  # noqa: BLE001 - metrics never stop the daemon
        log.warning("metrics not written to %s: %s", target, str(e).splitlines()[0] if str(e) else e)


__all__ = ["DaemonMetrics", "Hist", "as_json", "current", "families", "registry", "render", "write_textfile"]
