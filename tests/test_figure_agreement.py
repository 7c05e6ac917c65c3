"""Issue 23 item 8: one function computes each figure. Every command (--json) run on the same state shows the
same figures for the same session: tokens, source, window, percent, compaction point / to compaction and the
compaction count — also after the user lowers the model's contextWindow in openclaw.json, and for a session
whose transcript holds more compactions than OpenClaw's index counts."""

from __future__ import annotations

import json
import os
import time

from click.testing import CliRunner

from occd.cli.main import cli
from tests.statefactory import FileState


def run(*args):
    r = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert r.exit_code == 0, (args, r.output)
    return json.loads(r.stdout)


def _config(window: int) -> dict:
    return {"models": {"providers": {"anthropic": {"models": [{"id": "claude-opus-4-6", "contextWindow": window}]}}}}


def every_figure(sid: str) -> dict[str, dict]:
    """The figures of one session as each command shows them, under one set of names."""
    out = {}
    r = next(x for x in run("list", "--json")["sessions"] if x["id"] == sid)
    out["list"] = dict(tokens=r["tokens"], source=r["tokensSource"], window=r["contextWindow"],
                       percent=r["contextPercent"], point=r["compactionPoint"], to=r["toCompaction"],
                       compactions=r["compactions"])
    i = run("info", sid, "--json")
    c = i["context"]
    out["info"] = dict(tokens=c["tokens"], source=c["source"], window=c["window"], percent=c["percent"],
                       point=c["compactionPoint"], to=c["toCompaction"],
                       compactions=i.get("compactions", i["analysis"]["compactions"]))
    st = run("status", "--json")
    r = next(x for a in st["agents"] for x in a["biggest"] if x["sessionId"] == sid)
    out["status"] = dict(tokens=r["contextTokens"], source=r["tokensSource"], window=r["contextWindow"],
                         percent=r["contextPercent"], point=r["compactionPoint"], to=r["toCompaction"],
                         compactions=r["compactions"])
    r = next(x for x in run("sessions", "--json")["sessions"] if x["id"] == sid)
    out["sessions"] = dict(tokens=r["contextTokens"], source=r["contextSource"], window=r["contextWindow"],
                           percent=r["contextPercent"], compactions=r["compactionCount"])
    return out


def assert_agree(figs: dict[str, dict]) -> dict:
    names = set().union(*figs.values())
    agreed = {}
    for name in sorted(names):
        seen = {cmd: f[name] for cmd, f in figs.items() if name in f}
        assert len(set(map(json.dumps, seen.values()))) == 1, (name, seen)
        agreed[name] = next(iter(seen.values()))
    return agreed


def test_every_command_shows_the_same_figures(isolated_env):
    state = isolated_env / ".openclaw"
    fs = FileState(state, config=_config(128_000))
    past = time.time() - 3600
    cfg = state / "openclaw.json"
    os.utime(cfg, (past - 600, past - 600))
    # a session whose transcript has 2 compactions while OpenClaw's index counts 1, with OpenClaw's budget record
    s = fs.add_session(turns=30, seed=9, compactions=2, compaction_count=1, updated_at=past,
                       entry={"contextTokens": 128_000,
                              "contextBudgetStatus": {"promptBudgetBeforeReserve": 100_000,
                                                      "contextTokenBudget": 128_000, "reserveTokens": 20_000}})
    plain = fs.add_session("agent:main:other", turns=12, seed=10, updated_at=past)
    assert CliRunner().invoke(cli, ["run", "--once"]).exit_code == 0
    for sid in (s.session_id, plain.session_id):
        figs = every_figure(sid)
        a = assert_agree(figs)
        assert a["window"] == 128_000
    assert assert_agree(every_figure(s.session_id))["compactions"] == 1
    # the user lowers the model's window: every command uses the new one, and the budget OpenClaw recorded for
    # the old window is not mixed with the new window
    cfg.write_text(json.dumps(_config(40_000)))
    assert CliRunner().invoke(cli, ["run", "--once"]).exit_code == 0
    for sid in (s.session_id, plain.session_id):
        a = assert_agree(every_figure(sid))
        assert a["window"] == 40_000
        assert a["to"] is None or a["to"] <= 40_000
        assert a["point"] is None or a["point"] <= 40_000


def test_the_one_rules():
    from occd.openclaw.figure import compactions, session_figure, session_window

    e = {"contextTokens": 128_000, "updatedAt": 1_000_000}
    assert session_window(e, 40_000, config_mtime=999.0) == 128_000       # OpenClaw's record is the newer fact
    assert session_window(e, 40_000, config_mtime=1001.0) == 40_000       # the config changed after it
    assert session_window({}, 40_000, 5.0) == 40_000 and session_window(None, None) is None
    assert session_window({}, None, 5.0, default=200_000) == 200_000
    # a config edited after the record that names no window for the model: OpenClaw's record stands
    assert session_window(e, None, 1001.0, default=200_000) == 128_000
    assert compactions(1, 2) == 1 and compactions(None, 2, indexed=True) == 2 and compactions(None, 2) == 2
    assert compactions(None, None, indexed=True) == 0 and compactions(None) is None
    cbs = {"promptBudgetBeforeReserve": 100_000, "contextTokenBudget": 128_000}
    f = session_figure(transcript=(16_000, "usage"), entry={"contextBudgetStatus": cbs}, window=40_000)
    assert f.compact_at <= 40_000 and f.to_compaction < 40_000             # not 41% of 40k and 84k to compaction
    f = session_figure(transcript=(16_000, "usage"), entry={"contextBudgetStatus": cbs}, window=128_000)
    assert f.compact_at == 100_000
