"""Issue 29, point 7: `occd metrics` prints OpenMetrics (prometheus_client) from the ledger and the daemon's status
file, and the daemon keeps the same in a node_exporter textfile (`daemon.metrics_textfile`) after each cycle."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

from click.testing import CliRunner

from occd import __version__
from occd.cli.main import cli
from occd.ledger import Ledger
from occd.policy import breaker as brk

A = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
B = "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5c"


def _strip(led, now, session, *, before_tokens, after_tokens, outcome="ok", dry_run=False, agent="main"):
    return led.record_action("strip", agent, session, f"agent:{agent}:{session[-4:]}", trigger="auto",
                      policy="strip_at_budget_percent", reason="r", outcome=outcome, dry_run=dry_run,
                      before={"size": before_tokens * 4, "compactionAvoided": True, "inputUsdPerMTok": 3.0},
                      after={"tokensBefore": before_tokens, "tokensAfterEstimate": after_tokens}, now=now)


def _ledger(now):
    with Ledger.open() as led:
        led.record_observations([
            dict(agent="main", session_id=A, session_key="agent:main:a", era="file", compaction_count=3,
                 context_tokens=1000, tokens_source="usage", context_window=20_000, size=100),
            dict(agent="main", session_id=B, session_key="agent:main:b", era="file", compaction_count=2,
                 context_tokens=1000, tokens_source="usage", context_window=20_000, size=100),
            dict(agent="ops", session_id=A[:-1] + "d", session_key="agent:ops:d", era="file", compaction_count=1,
                 context_tokens=1000, tokens_source="usage", context_window=20_000, size=100)], now=now - 300)
        done = [_strip(led, now - 100, A, before_tokens=100_000, after_tokens=10_000),
                _strip(led, now - 90, B, before_tokens=50_000, after_tokens=30_000)]
        for aid, sid in zip(done, (A, B)):  # the verify job saw each next turn run without a compaction
            led.record_action("verify-strip", "main", sid, None, trigger="auto", outcome="ok", reason="v",
                              before={"actionId": aid}, after={"nextTurnCompacted": False}, now=now - 85)
        _strip(led, now - 80, A, before_tokens=50_000, after_tokens=0, dry_run=True)
        _strip(led, now - 70, B, before_tokens=50_000, after_tokens=0, outcome="failed")
        led.set_breaker(brk.BreakerState(agent="main", kind="rotate", state=brk.OPEN, opened_at=now - 60,
                                         reason="test: tripped", updated_at=now - 60), now=now - 60)
        led.sync_problems(["check"], [
            {"source": "check", "subject": "backup/1", "code": "BACKUP_DAMAGED", "message": "m"},
            {"source": "check", "subject": "backup/2", "code": "BACKUP_DAMAGED", "message": "m"},
            {"source": "check", "subject": "ledger", "code": "LEDGER_SLOW", "message": "m", "severity": "warn"}],
            now=now)


def _samples(text: str) -> dict:
    """{(sample name, frozenset(labels)): value} from OpenMetrics text, parsed by prometheus_client's parser."""
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    out, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out, types


def test_occd_metrics_prints_openmetrics_from_the_ledger(isolated_env):
    now = time.time()
    _ledger(now)
    r = CliRunner().invoke(cli, ["metrics"])
    assert r.exit_code == 0, r.output
    assert r.output.rstrip().endswith("# EOF")
    s, types = _samples(r.output)
    L = lambda **kw: frozenset(kw.items())  # noqa: E731
    assert s[("occd_build_info", L(version=__version__))] == 1
    assert types["occd_build"] == "info" and types["occd_actions"] == "counter"
    assert types["occd_breaker"] == "stateset"
    assert s[("occd_actions_total", L(agent="main", kind="strip", outcome="ok"))] == 2
    assert s[("occd_actions_total", L(agent="main", kind="strip", outcome="dry_run"))] == 1
    assert s[("occd_actions_total", L(agent="main", kind="strip", outcome="failed"))] == 1
    assert s[("occd_compactions_seen", L(agent="main"))] == 5 and s[("occd_compactions_seen", L(agent="ops"))] == 1
    # tokens and money saved, net: the very figures `occd stats` counts (its savings computation)
    stats = json.loads(CliRunner().invoke(cli, ["stats", "--since", "30d", "--json"]).output)
    main = stats["agents"]["main"]
    assert s[("occd_tokens_saved", L(agent="main"))] == main["tokensRemoved"] == 110_000
    assert abs(s[("occd_money_saved_usd", L(agent="main"))] - main["usdNet"]) < 1e-6
    assert s[("occd_compactions_avoided", L(agent="main"))] == main["compactionsAvoided"] == 2
    assert s[("occd_breaker", L(agent="main", kind="rotate", occd_breaker="open"))] == 1
    assert s[("occd_breaker", L(agent="main", kind="rotate", occd_breaker="closed"))] == 0
    assert s[("occd_problems_open", L(code="BACKUP_DAMAGED", severity="fail"))] == 2
    assert s[("occd_problems_open", L(code="LEDGER_SLOW", severity="warn"))] == 1
    assert s[("occd_daemon_up", L())] == 0
    js = json.loads(CliRunner().invoke(cli, ["metrics", "--json"]).output)
    assert {"occd_actions", "occd_build", "occd_tokens_saved"} <= {m["name"] for m in js["metrics"]}
    prom = CliRunner().invoke(cli, ["metrics", "--format", "prometheus"]).output
    assert "# EOF" not in prom and 'occd_actions_total{agent="main",kind="strip",outcome="ok"} 2.0' in prom


def test_metrics_without_a_ledger_still_say_the_build(isolated_env):
    r = CliRunner().invoke(cli, ["metrics"])
    assert r.exit_code == 0, r.output
    s, _ = _samples(r.output)
    assert s[("occd_build_info", frozenset({("version", __version__)}))] == 1


def test_the_daemon_writes_the_textfile_atomically_each_cycle_with_the_latency(isolated_env, tmp_path, monkeypatch):
    from prometheus_client.parser import text_string_to_metric_families

    from occd.config import load_settings
    from occd.runtime import metrics
    from occd.runtime.daemon import Daemon
    from occd.runtime.lock import InstanceLock
    from simrun import SimAgent

    agent = SimAgent(isolated_env, turns=2)
    out_dir = tmp_path / "textfile"
    out_dir.mkdir()
    target = out_dir / "occd.prom"
    replaced = []
    real_replace = os.replace

    def spy(src, dst):  # os.replace everywhere: keep the renames onto the textfile
        if str(dst) == str(target):
            replaced.append((str(src), str(dst), open(src).read()))
        return real_replace(src, dst)

    monkeypatch.setattr(metrics.os, "replace", spy)

    def loader():
        return load_settings({"state_dir": str(agent.state), "daemon": {"metrics_textfile": str(target),
                                                                        "settle_seconds": 0.3}})

    def values():
        fams = {f.name: f for f in text_string_to_metric_families(target.read_text())}
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in fams.values() for s in f.samples}

    with Ledger.open() as led, InstanceLock():
        d = Daemon(loader)
        t = threading.Thread(target=d.run_forever, args=(led,), kwargs={"install_signals": False}, daemon=True)
        t.start()
        try:
            end = time.monotonic() + 30
            while not target.exists() and time.monotonic() < end:
                time.sleep(0.05)
            assert target.exists()
            v = values()
            assert v[("occd_cycle_duration_seconds_count", ())] >= 1
            assert v[("occd_daemon_up", ())] == 1 and v[("occd_watch_folders", (("mode", "watched"),))] >= 1
            assert v[("occd_build_info", (("version", __version__),))] == 1
            assert (target.stat().st_mode & 0o777) == 0o644
            # each write: a temp file beside it (not *.prom: node_exporter ignores it), then one rename
            assert replaced and all(os.path.dirname(s) == str(out_dir) and not s.endswith(".prom") and dst == str(target)
                                    for s, dst, _ in replaced)
            assert all(body.endswith("\n") and "occd_build_info" in body for _, _, body in replaced)
            agent.start_run()
            agent.append_turn()
            agent.end_run()
            end = time.monotonic() + 20
            while time.monotonic() < end and values().get(("occd_run_end_to_decision_seconds_count", ()), 0) < 1:
                time.sleep(0.1)
            v = values()
            assert v[("occd_run_end_to_decision_seconds_count", ())] >= 1
            assert 0 < v[("occd_run_end_to_decision_seconds_sum", ())] < 20
            assert [n for n in os.listdir(out_dir)] == ["occd.prom"]  # no temp file left behind
            r = CliRunner().invoke(cli, ["metrics"], env={"OPENCLAW_STATE_DIR": str(agent.state)})
            s, _ = _samples(r.output)
            assert s[("occd_daemon_up", frozenset())] == 1
            assert s[("occd_run_end_to_decision_seconds_count", frozenset())] >= 1
        finally:
            d._on_signal(signal.SIGTERM, None)
            t.join(40)
