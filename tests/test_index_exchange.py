"""sessions.json is written by exchanging it with the new file, so a write that lands between occd's read and
its rename is seen (what came out is not what was read) and put back, never lost."""

import json

import pytest

from occd.openclaw import filestore, swap


def test_exchange_swaps_two_names(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("A")
    b.write_text("B")
    if not swap.exchange(a, b):
        pytest.skip("this platform or filesystem cannot exchange")
    assert (a.read_text(), b.read_text()) == ("B", "A")


def test_a_write_after_the_read_is_put_back(tmp_path):
    d = tmp_path / "s"; d.mkdir(); path = d / "sessions.json"
    path.write_text(json.dumps({"k": {"n": 1}}))
    seen = filestore._index_stat(path)
    path.write_text(json.dumps({"k": {"n": 2}}))  # another writer, after occd read
    assert filestore.write_index_atomic(path, {"k": {"n": 1}, "mine": {}}, expect=seen) is False
    assert json.loads(path.read_text()) == {"k": {"n": 2}}
    assert [p.name for p in d.iterdir()] == ["sessions.json"]  # no temp file left


def test_an_unchanged_index_is_replaced(tmp_path):
    d = tmp_path / "s"; d.mkdir(); path = d / "sessions.json"
    path.write_text(json.dumps({"k": {"n": 1}}))
    path.chmod(0o644)
    seen = filestore._index_stat(path)
    assert filestore.write_index_atomic(path, {"k": {"n": 1}, "mine": {}}, expect=seen) is True
    assert json.loads(path.read_text()) == {"k": {"n": 1}, "mine": {}}
    assert path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in d.iterdir()] == ["sessions.json"]


def test_create_only_when_still_absent(tmp_path):
    d = tmp_path / "s"; d.mkdir(); path = d / "sessions.json"
    assert filestore.write_index_atomic(path, {"a": {}}, expect=None) is True
    assert filestore.write_index_atomic(path, {"b": {}}, expect=None) is False
    assert json.loads(path.read_text()) == {"a": {}}
    assert [p.name for p in d.iterdir()] == ["sessions.json"]
