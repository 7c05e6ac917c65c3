from occd.config import PolicySettings, RotationSettings
from occd.policy import breaker as b
from occd.policy.rotation import PastRotation, assess_health, decide_rotation, next_seed_budget, seed_ladder
from occd.policy.types import SessionState

NOW = 1_800_000_000.0


def state(**kw):
    base = dict(agent="main", session_key="agent:main:main", session_id="s1", compaction_count=3,
                last_activity=NOW - 3600)
    base.update(kw)
    return SessionState(**base)


ACT = PolicySettings(mode="act")


def test_trigger_and_threshold():
    assert decide_rotation(state(compaction_count=2), ACT, now=NOW) is None
    d = decide_rotation(state(), ACT, now=NOW)
    assert d.act and d.action == "rotate" and d.policy == "rotate_at_compactions"
    assert d.details["seedBudgetPercent"] == 15 and "15% seed" in d.reason
    assert d.details["breaker"].state == "closed" and d.details["transitions"] == ()


def test_disabled_excluded_observe():
    off = PolicySettings(mode="act", rotation=RotationSettings(enabled=False))
    assert decide_rotation(state(), off, now=NOW) is None
    assert decide_rotation(state(), PolicySettings(mode="act", exclude=["agent:main:*"]), now=NOW) is None
    d = decide_rotation(state(), PolicySettings(), now=NOW)
    assert d.would_do and "observe mode" in d.reason and "breaker" not in d.details


def test_busy_is_deferred():
    d = decide_rotation(state(running=True), ACT, now=NOW)
    assert d.deferred and "run is in progress" in d.reason
    d = decide_rotation(state(last_activity=NOW - 60), ACT, now=NOW)
    assert d.deferred and "idle 1 min" in d.reason


def test_cooldown_needs_minutes_and_compactions():
    last = [PastRotation(started=NOW - 20 * 60, finished=NOW - 19 * 60, state="COOLDOWN", seed_budget_percent=15)]
    d = decide_rotation(state(), ACT, now=NOW, history=last)
    assert d.blocked and d.policy == "rotation_cooldown" and "19/30 min" in d.reason
    # minutes passed: fine
    last_old = [PastRotation(started=NOW - 40 * 60, finished=NOW - 35 * 60, state="IDLE")]
    assert decide_rotation(state(), ACT, now=NOW, history=last_old).act
    # compactions requirement separately
    p = PolicySettings(mode="act", rotation=RotationSettings(min_compactions=5))
    d = decide_rotation(state(compaction_count=4), p, now=NOW, history=last_old)
    assert d.blocked and "4/5 new compactions" in d.reason


def test_in_progress_rotation_defers():
    hist = [PastRotation(started=NOW - 60, state="ARCHIVING")]
    d = decide_rotation(state(), ACT, now=NOW, history=hist)
    assert d.deferred and "in progress (ARCHIVING)" in d.reason


def test_breaker_trips_on_fourth_rotation_in_window():
    recent = [(NOW - 5 * 60 * i, "ok") for i in range(1, 4)]
    d = decide_rotation(state(), ACT, now=NOW, recent_rotations=recent)
    assert d.blocked and d.policy == "rotation_breaker"
    assert d.details["breaker"].state == "open" and d.details["transitions"][0].to_state == "open"
    # two in the window: allowed
    assert decide_rotation(state(), ACT, now=NOW, recent_rotations=recent[:2]).act
    # an open breaker blocks until its cool-off passes, then allows one trial
    opened = d.details["breaker"]
    assert decide_rotation(state(), ACT, now=NOW + 60, breaker=opened).blocked
    d2 = decide_rotation(state(), ACT, now=NOW + 3601, breaker=opened)
    assert d2.act and d2.details["trial"] and d2.details["breaker"].state == "half_open"


def test_health_assessment():
    r = RotationSettings()
    assert assess_health(4, 4, r) == "unhealthy"
    assert assess_health(10, 12, r) == "unhealthy"
    assert assess_health(11, 12, r) == "healthy"
    assert assess_health(None, 11, r) == "healthy"
    assert assess_health(None, 5, r) is None


def test_seed_backoff_ladder_then_trip():
    r = RotationSettings()
    assert seed_ladder(15) == (15, 10, 5)
    u = lambda pct: PastRotation(started=NOW - 7200, finished=NOW - 7000, state="IDLE", seed_budget_percent=pct,
                                 health="unhealthy")
    h = PastRotation(started=NOW - 9000, finished=NOW - 8000, state="IDLE", health="healthy")
    assert next_seed_budget([], r) == 15
    assert next_seed_budget([u(15)], r) == 10
    assert next_seed_budget([u(10), u(15)], r) == 5
    assert next_seed_budget([u(5), u(10), u(15)], r) is None
    assert next_seed_budget([h, u(5), u(10)], r) == 15  # a healthy rotation resets the ladder
    assert next_seed_budget([PastRotation(NOW, "PENDING"), u(15)], r) == 10
    d = decide_rotation(state(), ACT, now=NOW, history=[u(10), u(15)])
    assert d.act and d.details["seedBudgetPercent"] == 5
    d = decide_rotation(state(), ACT, now=NOW, history=[u(5), u(10), u(15)])
    assert d.blocked and d.policy == "rotation_backoff"
    assert d.details["breaker"].state == "open" and d.details["transitions"][0].reason.startswith("rotation backoff")
    d = decide_rotation(state(), PolicySettings(), now=NOW, history=[u(5), u(10), u(15)])
    assert d.would_do and "would trip" in d.reason


def test_decision_is_pure():
    br = b.BreakerState("main", "rotate")
    a = decide_rotation(state(), ACT, now=NOW, breaker=br)
    c = decide_rotation(state(), ACT, now=NOW, breaker=br)
    assert a == c and br.state == "closed"
