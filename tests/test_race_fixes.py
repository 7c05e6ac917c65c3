"""Issue 24 (items 3, 4, 9, 10): the idle-archive and undo fenced against a starting run, idleness judged by
every clock, a linear scan of many missing transcripts, and small robustness fixes."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from occd.jobs import JobContext, run_cycle
from occd.ledger import Ledger


def _missing_state(home: Path, n: int) -> Path:
    state = home / ".openclaw"
    sdir = state / "agents" / "main" / "sessions"
    sdir.mkdir(parents=True, exist_ok=True)
    (state / "openclaw.json").write_text("{}")
    index = {f"agent:main:k{i}": {"sessionId": f"s{i:08d}", "updatedAt": 1_700_000_000_000} for i in range(n)}
    (sdir / "sessions.json").write_text(json.dumps(index))
    return state


def _scan_cycles(state: Path, led, log_file: Path) -> tuple[float, int]:
    """(seconds of the second scan cycle, bytes of log the second cycle wrote)"""
    from occd.config import load_settings

    ctx = JobContext(settings=load_settings({"state_dir": str(state)}), ledger=led, state_dir=state)
    run_cycle(ctx, ["scan"])
    size = log_file.stat().st_size if log_file.exists() else 0
    t0 = time.perf_counter()
    run_cycle(ctx, ["scan"])
    dt = time.perf_counter() - t0
    return dt, (log_file.stat().st_size if log_file.exists() else 0) - size


def test_scan_of_many_missing_transcripts_is_linear_and_logs_a_summary(isolated_env, tmp_path):
    from occd import logging_setup, paths

    logging_setup.setup("INFO", quiet_stderr=True)
    log_file = paths.log_dir() / "occd.log"
    try:
        with Ledger.open() as led:
            small = _missing_state(tmp_path / "a", 2_000)
            t_small, _ = _scan_cycles(small, led, log_file)
            first = log_file.stat().st_size if log_file.exists() else 0
            big = _missing_state(tmp_path / "b", 20_000)
            t_big, grew = _scan_cycles(big, led, log_file)
            total = log_file.stat().st_size - first
    finally:
        for name in logging_setup.LOGGERS:
            for h in list(logging.getLogger(name).handlers):
                logging.getLogger(name).removeHandler(h)
                h.close()
    # 10x the entries: a linear scan takes ~10x (quadratic de-duplication took ~100x); generous for a busy machine
    assert t_big < max(30 * t_small, 0.05) and t_big < 10, (t_small, t_big)
    # the 20k missing transcripts are one summary line (a count and a few examples), not 20k lines
    assert total < 20_000, total
    assert grew < 5_000, grew
    text = log_file.read_text()
    assert "20000 new problems in this scan" in text and "and 19997 more" in text


# ---------------------------------------------------------------------------------------------------------
# item 4: idle means every clock agrees
# ---------------------------------------------------------------------------------------------------------

def test_last_activity_is_the_most_recent_clock_and_the_future_is_not_idle():
    from occd.config import PolicySettings
    from occd.policy.archive import decide_archive, last_activity
    from occd.policy.types import SessionState

    now, day = 1_800_000_000.0, 86400
    assert last_activity((now - 600, now - 56 * day, now - 56 * day), now) == now - 600  # written 10 min ago
    assert last_activity((now - 56 * day, now - 60, now - 56 * day), now) == now - 60    # the index says so
    assert last_activity((now - 30 * day, now - 30 * day, now - 20 * day), now) == now - 20 * day
    assert last_activity((now - 30 * day, None, now + 400 * day), now) == now  # a clock ahead: not idle
    assert last_activity((None, None, None), now) is None and last_activity((0, False, None), now) is None
    p = PolicySettings(mode="act", archive_after_days=14, archive_below_relevance=0.1)
    for times in [(now - 600, now - 56 * day, now - 56 * day), (now - 56 * day, now + 3600, now - 56 * day)]:
        st = SessionState(agent="main", session_key="k", session_id="s", last_activity=last_activity(times, now))
        assert decide_archive(st, p, relevance=0.0, now=now) is None, times
    st = SessionState(agent="main", session_key="k", session_id="s",
                      last_activity=last_activity((now - 30 * day, now - 31 * day, now - 32 * day), now))
    assert decide_archive(st, p, relevance=0.0, now=now).act


def test_score_job_does_not_archive_a_fresh_file_with_old_entry_timestamps(isolated_env):
    from occd.config import load_settings
    from occd.jobs import score as score_job
    from test_relevance import D, make_file_agent

    home, now = isolated_env, time.time()
    state = home / ".openclaw"
    sdir = make_file_agent(state, "main", [
        {"sid": "active", "users": ["refactor the webhook handler"], "cwd": str(home), "mtime": now - 60},
        {"sid": "imported", "users": ["plan the holiday rota"], "cwd": str(home), "mtime": now - 56 * D},
        {"sid": "touched", "users": ["plan the holiday rota"], "cwd": str(home), "mtime": now - 56 * D},
        {"sid": "old-rota", "users": ["plan the holiday rota"], "cwd": str(home), "mtime": now - 30 * D},
    ])
    import os

    os.utime(sdir / "imported.jsonl", (now - 600, now - 600))  # written 10 minutes ago, entries 56 days old
    index = json.loads((sdir / "sessions.json").read_text())
    for e in index.values():
        if e["sessionId"] == "touched":  # the index says OpenClaw used it a minute ago
            e["updatedAt"] = int((now - 60) * 1000)
    (sdir / "sessions.json").write_text(json.dumps(index))
    s = load_settings({"policy": {"mode": "act"}})
    with Ledger.open() as led:
        out = score_job.run(JobContext(settings=s, ledger=led, state_dir=state, clock=lambda: now))
    assert out["archived"] == 1, out
    assert (sdir / "archive" / "old-rota.jsonl").exists()
    assert (sdir / "imported.jsonl").exists() and (sdir / "touched.jsonl").exists()
