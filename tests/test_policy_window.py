"""A window too small for its agent (issue 30.5, occd.policy.window): verified (OpenClaw compacted after occd's
strip, and a fresh session would be over the target too), then the strongest strip once, then nothing."""

from __future__ import annotations

from occd.config import PolicySettings
from occd.policy import budget as b
from occd.policy import window as w
from occd.policy.strip import decide_budget_strip
from occd.policy.types import SessionState

NOW = 1_800_000_000.0


def _run(i: int, calls: int, chars: int) -> list[dict]:
    out = [{"role": "user", "content": f"Q{i}: READ {calls} files"}]
    for k in range(calls):
        cid = f"c{i}_{k}"
        out += [{"role": "assistant", "content": [{"type": "toolCall", "id": cid, "name": "read",
                                                   "arguments": {"path": f"/d{i}_{k}"}}]},
                {"role": "toolResult", "toolCallId": cid, "toolName": "read",
                 "content": [{"type": "text", "text": "w" * chars}]}]
    return out + [{"role": "assistant", "content": [{"type": "text", "text": f"done {i}"}]}]


def _state():
    return SessionState(agent="main", session_key="agent:main:main", session_id="s1", last_activity=NOW - 30)


def test_window_too_small_is_verified_then_done_once():
    kw = dict(overhead=17000, budget=28000, window=48000, fresh=25000, target=14000, removed=9000, after=20000)
    assert w.window_too_small(strip_times=[100.0], strongest_times=[], last_compaction=None, **kw) is None
    assert w.window_too_small(strip_times=[100.0], strongest_times=[], last_compaction=90.0, **kw) is None
    assert w.window_too_small(strip_times=[], strongest_times=[], last_compaction=90.0, **kw) is None
    ws = w.window_too_small(strip_times=[100.0], strongest_times=[], last_compaction=130.0, **kw)
    assert ws is not None and not ws.strongest_done
    assert "17000 tokens" in ws.message() and "28000-token budget" in ws.message() and "48000" in ws.message()
    assert w.window_too_small(strip_times=[100.0, 200.0], strongest_times=[200.0], last_compaction=130.0,
                              **kw).strongest_done
    # a fresh session would reach the target (a larger window): not too small, whatever happened
    assert w.window_too_small(strip_times=[100.0], strongest_times=[100.0], last_compaction=130.0,
                              **{**kw, "fresh": 13000}) is None
    # the policy: the strongest strip once, then nothing
    policy = PolicySettings(mode="act")
    ctx = b.estimate_context([m for i in range(3) for m in _run(i, 1, 16000)])
    p = b.predict(ctx, 28000, 17000, growth_floor=9700)
    target = b.strip_to_target(ctx, p, 50, 5, 5)
    d = decide_budget_strip(_state(), policy, now=NOW, prediction=p, target=target, too_small=ws)
    assert d.act and d.details["keepToolResults"] == 0 and "too small" in d.reason
    assert d.details["windowTooSmall"]["overheadTokens"] == 17000
    done = w.WindowTooSmall(**{**kw, "strongest_done": True})
    assert decide_budget_strip(_state(), policy, now=NOW, prediction=p, target=target, too_small=done) is None
    # without the verdict the same session gets an ordinary decision
    assert decide_budget_strip(_state(), policy, now=NOW, prediction=p, target=target) is not None
