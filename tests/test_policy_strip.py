from occd.config import PolicySettings
from occd.policy.archive import decide_archive
from occd.policy.strip import decide_strip
from occd.policy.types import SessionState, excluded

NOW = 1_800_000_000.0


def state(**kw):
    base = dict(agent="main", session_key="agent:main:main", session_id="s1", context_tokens=130_000,
                context_window=200_000, compaction_count=0, last_activity=NOW - 3600)
    base.update(kw)
    return SessionState(**base)


def pol(**kw):
    return PolicySettings(**kw)


def test_below_threshold_no_decision():
    assert decide_strip(state(context_tokens=100_000), pol(mode="act"), now=NOW) is None
    assert decide_strip(state(context_tokens=None), pol(mode="act"), now=NOW) is None
    assert decide_strip(state(context_window=None), pol(mode="act"), now=NOW) is None


def test_threshold_reached_acts_in_act_mode():
    d = decide_strip(state(), pol(mode="act"), now=NOW)
    assert d is not None and d.act and d.action == "strip" and d.policy == "strip_at_context_percent"
    assert "65%" in d.reason and d.details["preset"] == "default" and d.outcome == "ok"


def test_window_argument_overrides_session_window():
    assert decide_strip(state(context_window=None), pol(mode="act"), now=NOW, window_tokens=200_000).act
    assert decide_strip(state(), pol(mode="act"), now=NOW, window_tokens=1_000_000) is None


def test_observe_mode_marks_would_do():
    d = decide_strip(state(), pol(), now=NOW)
    assert d.would_do and not d.act and "observe" in d.reason and d.outcome == "skipped"


def test_not_idle_is_deferred_with_reason():
    d = decide_strip(state(last_activity=NOW - 120), pol(mode="act", min_idle_minutes=10), now=NOW)
    assert d.deferred and not d.act and "idle 2 min < 10 min" in d.reason and d.outcome == "deferred"
    assert decide_strip(state(running=True), pol(mode="act"), now=NOW).deferred
    d = decide_strip(state(pending_tool_call=True), pol(mode="act"), now=NOW)
    assert d.deferred and "tool call" in d.reason
    # exactly at the limit counts as idle
    assert decide_strip(state(last_activity=NOW - 600), pol(mode="act", min_idle_minutes=10), now=NOW).act


def test_exclude_globs():
    p = pol(mode="act", exclude=["agent:main:cron:*", "*:telegram:*"])
    assert decide_strip(state(session_key="agent:main:cron:nightly"), p, now=NOW) is None
    assert decide_strip(state(session_key="agent:main:telegram:123"), p, now=NOW) is None
    assert decide_strip(state(session_key="agent:main:main"), p, now=NOW).act
    assert excluded(None, ["*"]) is None


def test_max_actions_per_hour():
    p = pol(mode="act", max_actions_per_hour=2)
    recent = [NOW - 100, NOW - 200]
    d = decide_strip(state(), p, now=NOW, recent_action_times=recent)
    assert d.blocked and "2 actions in the last hour" in d.reason
    # older than an hour no longer counts
    assert decide_strip(state(), p, now=NOW, recent_action_times=[NOW - 3601, NOW - 100]).act


def test_archive_policy():
    p = pol(mode="act", archive_after_days=14, archive_below_relevance=0.1)
    old = state(last_activity=NOW - 15 * 86400)
    d = decide_archive(old, p, relevance=0.05, now=NOW, relevance_method="model")
    assert d.act and d.action == "archive" and "15.0 days" in d.reason and "(model)" in d.reason
    assert decide_archive(old, p, relevance=0.1, now=NOW) is None  # not under
    assert decide_archive(old, p, relevance=None, now=NOW) is None  # unknown is not irrelevant
    assert decide_archive(state(last_activity=NOW - 13 * 86400), p, relevance=0.0, now=NOW) is None
    assert decide_archive(state(last_activity=NOW - 20 * 86400, archived=True), p, relevance=0.0, now=NOW) is None
    assert decide_archive(old, pol(), relevance=0.0, now=NOW).would_do
    assert decide_archive(state(last_activity=NOW - 20 * 86400, running=True), p, relevance=0.0, now=NOW).deferred
    assert decide_archive(state(last_activity=NOW - 20 * 86400, session_key="x:cron"),
                          pol(mode="act", exclude=["*:cron"]), relevance=0.0, now=NOW) is None
