"""occd.units: the one reading of the times OpenClaw writes (ISO text, epoch seconds or ms), for every layer."""

from datetime import datetime, timezone

from hypothesis import given, strategies as st

from occd.units import epoch_seconds, iso_seconds


def test_iso_seconds_reads_openclaws_iso_times_and_nothing_else():
    assert iso_seconds("2026-11-29T02:31:18.500Z") == datetime(2026, 11, 29, 2, 31, 18, 500000, timezone.utc).timestamp()
    assert iso_seconds("2026-11-29T03:31:18+01:00") == iso_seconds("2026-11-29T02:31:18Z")
    assert iso_seconds(" 2026-11-29T02:31:18Z\n") == iso_seconds("2026-11-29T02:31:18Z")
    for bad in ("", "yesterday", "2026-13-01T00:00:00Z", None, 1_800_000_000, b"2026-11-29", ["2026-11-29"]):
        assert iso_seconds(bad) is None, bad


def test_epoch_seconds_takes_ms_seconds_and_iso():
    assert epoch_seconds(1_800_000_000_000) == 1_800_000_000.0
    assert epoch_seconds(1_800_000_000) == 1_800_000_000.0
    assert epoch_seconds(1_800_000_000.5) == 1_800_000_000.5
    assert epoch_seconds("2027-01-15T08:00:00Z") == datetime(2027, 1, 15, 8, tzinfo=timezone.utc).timestamp()
    for bad in (True, False, None, "", "soon", {}):
        assert epoch_seconds(bad) is None, bad


@given(st.datetimes(min_value=datetime(2001, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc)))
def test_the_three_forms_of_one_time_agree(dt):
    s = dt.timestamp()
    ms = round(s * 1000)
    iso = dt.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    assert abs(epoch_seconds(iso) - s) < 1e-3
    assert abs(epoch_seconds(ms) - s) < 1e-3
    assert abs(epoch_seconds(s) - s) < 1e-6
