from hypothesis import given, settings, strategies as st

from occd.config import BreakerSettings, PolicySettings
from occd.policy import breaker as b

NOW = 1_800_000_000.0
S = BreakerSettings(max_actions=3, max_failures=2, window_minutes=30, cooloff_minutes=60, max_cooloff_minutes=200)


def fresh():
    return b.BreakerState(agent="main", kind="strip")


def test_closed_allows_until_window_full_then_trips():
    g = b.gate(fresh(), S, [(NOW - 60, "ok"), (NOW - 120, "ok")], NOW)
    assert g.allowed and not g.transitions
    g = b.gate(fresh(), S, [(NOW - 60, "ok"), (NOW - 120, "ok"), (NOW - 180, "ok")], NOW)
    assert not g.allowed and g.state.state == "open" and g.state.opened_at == NOW
    (t,) = g.transitions
    assert (t.from_state, t.to_state, t.agent, t.kind) == ("closed", "open", "main", "strip")
    assert "3 actions in 30 min" in t.reason
    # actions outside the window do not count
    assert b.gate(fresh(), S, [(NOW - 31 * 60, "ok")] * 5, NOW).allowed


def test_failures_trip():
    st1, tr = b.record_result(fresh(), S, False, [(NOW, "failed")], NOW)
    assert st1.state == "closed" and st1.failures == 1 and not tr
    st2, tr = b.record_result(st1, S, False, [(NOW - 60, "failed"), (NOW, "failed")], NOW)
    assert st2.state == "open" and tr[0].to_state == "open" and "2 failures" in tr[0].reason


def test_full_cycle_with_backoff():
    g = b.gate(fresh(), S, [(NOW - i, "ok") for i in range(3)], NOW)
    st0 = g.state
    # still cooling off
    g1 = b.gate(st0, S, [], NOW + 59 * 60)
    assert not g1.allowed and "trial in 1 min" in g1.reason
    # cool-off passed: one trial
    t1 = NOW + 60 * 60
    g2 = b.gate(st0, S, [], t1)
    assert g2.allowed and g2.trial and g2.state.state == "half_open" and g2.transitions[0].to_state == "half_open"
    # a second action while the trial runs is refused
    assert not b.gate(g2.state, S, [], t1 + 10).allowed
    # trial fails: open again, cool-off doubled
    st3, tr = b.record_result(g2.state, S, False, [(t1, "failed")], t1 + 20)
    assert st3.state == "open" and st3.cooloff_minutes == 120 and tr[0].from_state == "half_open"
    assert b.retry_at(st3, S) == t1 + 20 + 120 * 60
    # next trial fails again: doubled but capped at 200
    g4 = b.gate(st3, S, [], t1 + 20 + 120 * 60)
    st5, _ = b.record_result(g4.state, S, False, [], t1 + 20 + 120 * 60 + 1)
    assert st5.cooloff_minutes == 200
    # a successful trial closes and resets the cool-off
    t6 = st5.opened_at + 200 * 60
    g6 = b.gate(st5, S, [], t6)
    st7, tr = b.record_result(g6.state, S, True, [(t6, "ok")], t6 + 1)
    assert st7.state == "closed" and st7.cooloff_minutes is None and tr[0].reason == "trial succeeded"
    assert b.cooloff(st7, S) == 60


def test_stuck_trial_expires():
    st0 = b.BreakerState("main", "strip", state="half_open", trial_started_at=NOW - 2 * 3600, cooloff_minutes=60)
    g = b.gate(st0, S, [], NOW)
    assert g.allowed and g.trial and g.state.trial_started_at == NOW


def test_clock_jump_back_reanchors():
    st0 = b.BreakerState("main", "strip", state="open", opened_at=NOW + 10 * 86400, cooloff_minutes=60)
    g = b.gate(st0, S, [], NOW)
    assert not g.allowed and g.state.opened_at == NOW
    assert b.gate(g.state, S, [], NOW + 3600).allowed


def test_reset_and_trip():
    st0 = b.BreakerState("main", "rotate", state="open", opened_at=NOW, failures=2, cooloff_minutes=120)
    st1, tr = b.reset(st0, NOW + 1)
    assert st1.state == "closed" and st1.failures == 0 and st1.cooloff_minutes is None
    assert tr[0].from_state == "open" and tr[0].reason == "manual reset"
    assert b.reset(st1, NOW + 2) == (st1, ())
    st2, tr = b.trip(st1, S, "backoff", NOW + 3)
    assert st2.state == "open" and tr[0].reason == "backoff"
    assert b.trip(st2, S, "again", NOW + 4) == (st2, ())


def test_rotation_breaker_settings_and_describe():
    p = PolicySettings()
    rs = b.rotation_breaker_settings(p)
    assert (rs.max_actions, rs.window_minutes) == (p.rotation.max_rotations, p.rotation.window_minutes)
    g = b.gate(b.BreakerState("a", "rotate"), rs, [(NOW - i * 60, "ok") for i in range(3)], NOW)
    assert not g.allowed  # a fourth rotation within 30 minutes is refused
    d = b.describe(g.state, rs, NOW + 60)
    assert d["state"] == "open" and d["retryInSeconds"] == 3600 - 60


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["gate", "ok", "fail", "reset"]), st.floats(0, 7200)), max_size=40))
def test_invariants_under_any_sequence(steps):
    """Whatever happens: the state is valid, transitions chain, an open breaker never allows before its
    cool-off, and in any window at most max_actions actions pass the gate while closed."""
    st0, now, log = fresh(), NOW, []
    for op, dt in steps:
        now += dt
        prev = st0
        if op == "gate":
            g = b.gate(st0, S, log, now)
            if prev.state == "open" and g.allowed:
                assert now >= (min(prev.opened_at, now)) + b.cooloff(prev, S) * 60
            st0, trans = g.state, g.transitions
            if g.allowed:
                log.append((now, "ok"))
                if prev.state == "closed":
                    assert sum(1 for t, _ in log if now - S.window_minutes * 60 < t <= now) <= S.max_actions
        elif op in ("ok", "fail"):
            if log:
                log[-1] = (log[-1][0], "ok" if op == "ok" else "failed")
            st0, trans = b.record_result(st0, S, op == "ok", log, now)
        else:
            st0, trans = b.reset(st0, now)
        assert st0.state in b.STATES
        cur = prev.state
        for t in trans:
            assert t.from_state == cur and t.to_state != cur
            cur = t.to_state
        assert cur == st0.state
        if st0.state == "open":
            assert st0.opened_at is not None
