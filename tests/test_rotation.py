"""Session rotation (file era): the seed and its budget, the new transcript as OpenClaw loads it, the index
entry, the archive, undo, the CLI, the daemon job, and the faults the issue lists. Crash-at-every-step tests
are in test_rotation_crash.py; the database era (through a scripted gateway) in test_rotation_db.py."""

from __future__ import annotations

import json
import os
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from occd.actions.archive import archive_path_for, copy_verified, verify_against
from occd.errors import BusyError, OccdError
from occd.rotation.seed import SeedInputs, build_seed, estimate_tokens, rotation_note
from occd.transcript.synth import generate_transcript

KEY = "agent:main:main"


# ---------------------------------------------------------------- fixtures

class State:
    def __init__(self, root: Path):
        self.root = root
        self.sessions = root / "agents" / "main" / "sessions"
        self.sessions.mkdir(parents=True)
        self.workspace = root / "workspace"
        (self.workspace / "memory").mkdir(parents=True)

    def index(self) -> dict:
        return json.loads((self.sessions / "sessions.json").read_text())

    def entry(self) -> dict:
        return self.index()[KEY]

    def transcript(self) -> Path:
        e = self.entry()
        return Path(e["sessionFile"])


def make_state(root: Path, *, turns=12, compactions=3, oracle=None, memory="# Memory\nThe user's cat is Mia.\n",
               context_tokens=None, idle=True) -> State:
    st = State(root)
    if oracle is not None:
        path = oracle.make(st.sessions, "--compactions", str(compactions), turns=turns, plain_every=2)
        sid = path.stem
    else:
        info = generate_transcript(st.sessions, turns=turns, compactions=compactions, plain_every=2)
        path, sid = info.path, info.id
    if idle:
        old = time.time() - 3600
        os.utime(path, (old, old))
    entry = {"sessionId": sid, "updatedAt": 1790000000000, "systemSent": True, "chatType": "direct",
             "compactionCount": compactions, "totalTokens": 150000, "totalTokensFresh": True, "inputTokens": 9,
             "outputTokens": 7, "model": "claude-opus-4-6", "modelProvider": "anthropic", "label": "keep me",
             "lastChannel": "telegram", "sessionFile": str(path), "unknownFutureField": {"x": [1, 2]}}
    if context_tokens:
        entry["contextTokens"] = context_tokens
    (st.sessions / "sessions.json").write_text(json.dumps({KEY: entry, "agent:main:other": {"sessionId": "zzz"}},
                                                          indent=2))
    if memory is not None:
        (st.workspace / "MEMORY.md").write_text(memory)
    today = date.today()
    (st.workspace / "memory" / f"{today.isoformat()}.md").write_text("Today: fixed the boiler.\n")
    (st.workspace / "memory" / f"{(today - timedelta(days=1)).isoformat()}.md").write_text("Yesterday: bought milk.\n")
    return st


@pytest.fixture
def state(isolated_env):
    return make_state(Path(os.environ["OPENCLAW_STATE_DIR"]))


@pytest.fixture
def settings():
    from occd.config import load_settings

    return load_settings()


def rotate(settings, **kw):
    from occd.rotation.rotate import rotate_session

    return rotate_session(settings, ref=KEY, **kw)


def ledger():
    from occd.ledger import Ledger

    return Ledger.open()


def lines_of(p: Path) -> list[dict]:
    return [orjson.loads(x) for x in p.read_bytes().splitlines() if x.strip()]


# ---------------------------------------------------------------- the seed (pure)

def _inputs(mem="m" * 400, ex=5):
    exchanges = [(f"question {i} " + "q" * 200, f"answer {i} " + "a" * 200) for i in range(ex)]
    return SeedInputs(mem, ("2026-11-23.md", "today " * 50), ("2026-11-22.md", "yesterday " * 50), exchanges,
                      rotation_note("old", 3, "/a/b.jsonl", datetime(2026, 11, 23, tzinfo=timezone.utc), "x"))


def test_seed_fits_without_shrinking():
    s = build_seed(_inputs(), 200_000, 15)
    assert s.steps == [] and len(s.exchanges) == 5 and len(s.notes) == 2 and s.memory == "m" * 400
    assert s.tokens() <= s.budget_tokens == 30_000


def test_seed_shrink_order():
    inp = _inputs(mem="M" * 1200)
    full = build_seed(inp, 10**9, 100).tokens()
    s1 = build_seed(inp, full - 1, 100)
    assert s1.steps == ["dropped yesterday's note"] and [n for n, _ in s1.notes] == ["2026-11-23.md"]
    s2 = build_seed(inp, s1.tokens() - 1, 100)
    assert s2.steps == ["dropped yesterday's note", "kept 3 exchanges"] and len(s2.exchanges) == 3
    assert s2.exchanges[-1][0].startswith("question 4")  # the newest are kept
    s3 = build_seed(inp, s2.tokens() - 1, 100)
    assert s3.steps[2] == "kept MEMORY.md's first 70% and last 20%"
    for s in (s1, s2, s3):
        assert s.tokens() <= s.budget_tokens


def test_seed_memory_kept_head_and_tail_then_one_exchange():
    mem = "".join(f"line {i:05d}\n" for i in range(3000))  # 33k chars
    inp = _inputs(mem=mem)
    full = build_seed(inp, 10**9, 100)
    no_y = full.tokens() - estimate_tokens("## memory/2026-11-22.md\n\n" + "yesterday " * 50)
    s = build_seed(inp, no_y - 300, 100)  # dropping yesterday and two exchanges is not enough
    assert s.steps == ["dropped yesterday's note", "kept 3 exchanges", "kept MEMORY.md's first 70% and last 20%"]
    assert s.memory.startswith("line 00000") and s.memory.rstrip().endswith("line 02999")
    assert "line 02300" not in s.memory and "line 02099" in s.memory and "line 02400" in s.memory
    s2 = build_seed(inp, s.tokens() - 1, 100)
    assert s2.steps[3] == "kept MEMORY.md and one exchange" and len(s2.exchanges) == 1 and not s2.notes
    assert s2.exchanges[0][0].startswith("question 4") and s2.memory == s.memory
    for x in (s, s2):
        assert x.tokens() <= x.budget_tokens


def test_seed_huge_memory_is_cut_to_budget_and_note_stays():
    inp = _inputs(mem="x" * 2_000_000)
    s = build_seed(inp, 200_000, 15)
    assert s.tokens() <= s.budget_tokens
    assert s.memory and len(s.memory) < 200_000 and s.note in s.context_text()


def test_seed_budget_ladder_smaller_budget_smaller_seed():
    inp = _inputs(mem="y" * 120_000)
    sizes = [build_seed(inp, 200_000, p).tokens() for p in (15, 10, 5)]
    assert sizes[0] > sizes[1] > sizes[2] and sizes[2] <= 10_000


def test_estimate_counts_as_javascript_does():
    assert estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2
    assert estimate_tokens("😀😀") == 1  # 4 UTF-16 code units


# ---------------------------------------------------------------- archive helpers

def test_copy_verified_and_verify(tmp_path):
    src = tmp_path / "s.jsonl"
    generate_transcript(src, turns=3)
    dst = tmp_path / "archive" / "s.jsonl"
    copy_verified(src, dst)
    assert dst.read_bytes() == src.read_bytes() and verify_against(src, dst) is None
    with open(src, "ab") as fh:
        fh.write(b'{"type":"custom","id":"abcd0001","parentId":null,"timestamp":"x"}\n')
    assert "bytes" in verify_against(src, dst)
    assert archive_path_for(src) == tmp_path / "archive" / "s.1.jsonl"


def disk_full_after(limit: int):
    """An archive copy that writes `limit` bytes, then fails like a full disk."""
    left = [limit]

    def copy_range(fd_in, fd_out, offset, count):
        if left[0] <= 0:
            raise OSError(28, "No space left on device")
        data = os.pread(fd_in, min(count, left[0]), offset)
        left[0] -= len(data)
        return os.write(fd_out, data)

    return copy_range


def test_copy_verified_disk_full_leaves_nothing(tmp_path, monkeypatch):
    import occd.transcript.archive as arch

    src = tmp_path / "s.jsonl"
    generate_transcript(src, turns=3)
    before = src.read_bytes()
    monkeypatch.setattr(arch, "_copy_range", disk_full_after(100))
    with pytest.raises(OccdError, match="archive"):
        copy_verified(src, tmp_path / "archive" / "s.jsonl")
    assert src.read_bytes() == before
    assert list((tmp_path / "archive").iterdir()) == []


# ---------------------------------------------------------------- a whole rotation

def test_rotate_file_era(state, settings, oracle):
    old_path = state.transcript()
    old_bytes = old_path.read_bytes()
    old_entry = state.entry()
    res = rotate(settings)
    assert res["success"] and res["state"] == "COOLDOWN"
    e = state.entry()
    new_path = Path(e["sessionFile"])
    # index: same key, new id/file, counters fresh, every other field kept
    assert e["sessionId"] == res["newSessionId"] != old_entry["sessionId"] and new_path.name == f"{e['sessionId']}.jsonl"
    assert e["compactionCount"] == 0 and e["totalTokens"] == 0 and "totalTokensFresh" not in e
    for k in ("systemSent", "chatType", "model", "modelProvider", "label", "lastChannel", "unknownFutureField"):
        assert e[k] == old_entry[k]
    assert state.index()["agent:main:other"] == {"sessionId": "zzz"}
    assert oct((state.sessions / "sessions.json").stat().st_mode & 0o777) == "0o600"
    # archive: the old transcript, byte for byte; the original is gone
    arch = Path(res["archivePath"])
    assert arch.parent == state.sessions / "archive" and arch.name == old_path.name
    assert arch.read_bytes() == old_bytes and not old_path.exists()
    # the new transcript: OpenClaw loads it and sends the seed; it holds an assistant message (writer trap)
    rows = lines_of(new_path)
    assert rows[0]["type"] == "session" and rows[0]["version"] == 3 and rows[0]["id"] == e["sessionId"]
    assert any(r.get("message", {}).get("role") == "assistant" for r in rows[1:])
    assert rows[-1]["message"]["role"] == "assistant"
    chk = oracle.check(new_path)
    assert chk["ok"] and not chk.get("brokenParent") and not chk.get("duplicateIds")
    first_user = next(r for r in rows if r.get("message", {}).get("role") == "user")["message"]["content"]
    assert "The user's cat is Mia." in first_user and "fixed the boiler" in first_user and "bought milk" in first_user
    assert "rotated" in first_user and str(arch) in first_user
    # every seed entry is sent: one user message (the recalled exchanges inside it) and its acknowledgement
    assert chk["roles"] == {"user": 1, "assistant": 1} and chk["sentMessages"] == 2
    assert res["seed"]["exchanges"] == 5
    # the ledger tells the story
    led = ledger()
    r = led.rotations(limit=1)[0]
    assert [(h["from_state"], h["to_state"]) for h in led.rotation_history(r["id"])] == [
        (None, "PENDING"), ("PENDING", "ARCHIVING"), ("ARCHIVING", "ARCHIVED"), ("ARCHIVED", "INJECTED"),
        ("INJECTED", "COOLDOWN")]
    acts = led.history(kind="rotate")
    assert acts[0]["outcome"] == "ok"
    led.close()
    # occd list --archived shows it
    from occd.cli.main import cli

    out = CliRunner().invoke(cli, ["list", "--archived", "--json"])
    assert out.exit_code == 0, out.output
    assert old_path.stem in out.output


def _user_texts(path: Path) -> list[str]:
    """The text of every user message in a transcript (string or text blocks), in file order."""
    out = []
    for r in lines_of(path):
        m = r.get("message") if r.get("type") == "message" else None
        if isinstance(m, dict) and m.get("role") == "user":
            c = m.get("content")
            out.append(c if isinstance(c, str) else "\n".join(b.get("text", "") for b in c or []
                                                                if isinstance(b, dict)))
    return out


@pytest.mark.parametrize("with_oracle_writer", [False, True])
def test_file_era_recalled_requests_are_quoted_history_not_turns(isolated_env, settings, oracle, with_oracle_writer):
    """A recalled user request never comes back as a real user turn in the new transcript (a model may carry
    out "READ <path>" again): the only user message is the seed, which holds each recalled request quoted
    ("> ") inside one delimited block said to be finished. OpenClaw's own loader sends exactly that message
    and its acknowledgement."""
    from occd.rotation.seed import HISTORY_CLOSE, HISTORY_OPEN

    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]), oracle=oracle if with_oracle_writer else None,
                    turns=10, compactions=2)
    old_users = [u for u in _user_texts(st.transcript()) if u.strip()]
    res = rotate(settings)
    assert res["seed"]["exchanges"] >= 3
    new_path = Path(res["newPath"])
    users = _user_texts(new_path)
    assert len(users) == 1, "only the seed is a user turn"
    seed = users[0]
    recalled = [u for u in old_users if any(f"> {ln}" in seed for ln in u.strip().splitlines())]
    assert len(recalled) >= res["seed"]["exchanges"]  # the last requests are there, quoted
    for u in old_users:
        assert u not in users, "an old request came back as a real user turn"
        for ln in u.strip().splitlines():  # no old request line at the start of a line, unquoted
            assert ln not in seed.splitlines(), ln
    assert seed.count(HISTORY_OPEN) == 1 and seed.count(HISTORY_CLOSE) == 1
    body = seed[seed.index(HISTORY_OPEN) + len(HISTORY_OPEN):seed.index(HISTORY_CLOSE)]
    assert all(ln.startswith((">", "[exchange ")) for ln in body.splitlines() if ln)
    before = seed[:seed.index(HISTORY_OPEN)]
    assert "already done" in before and "Do not carry out any of them again" in before
    chk = oracle.check(new_path)
    assert chk["ok"] and chk["roles"] == {"user": 1, "assistant": 1} and chk["sentMessages"] == 2
    assert chk["contextChars"] >= len(seed)  # the whole seed is what OpenClaw sends


def test_rotate_with_oracle_session_sends_seed(isolated_env, settings, oracle):
    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]), oracle=oracle, turns=10, compactions=2)
    res = rotate(settings)
    chk = oracle.check(Path(res["newPath"]))
    assert chk["ok"] and chk["contextChars"] > 0
    assert "Mia" in Path(res["newPath"]).read_text()


def test_dry_run_changes_nothing_and_shows_content(state, settings):
    before = {p: p.read_bytes() for p in state.sessions.rglob("*") if p.is_file()}
    res = rotate(settings, dry_run=True)
    assert res["dryRun"] and not res["modelCall"]
    assert {p: p.read_bytes() for p in state.sessions.rglob("*") if p.is_file()} == before
    assert json.loads(res["content"][0])["type"] == "session"
    assert any("Mia" in c for c in res["content"])
    assert res["seed"]["tokens"] > 0 and res["seed"]["budgetTokens"] == 30000


def test_missing_memory(isolated_env, settings):
    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]), memory=None)
    res = rotate(settings)
    assert res["seed"]["memoryChars"] == 0
    text = Path(res["newPath"]).read_text()
    assert "MEMORY.md" not in text and "fixed the boiler" in text


def test_huge_memory_respects_budget(isolated_env, settings):
    st = make_state(Path(os.environ["OPENCLAW_STATE_DIR"]), memory="fact\n" * 400_000, context_tokens=100_000)
    res = rotate(settings)
    seed = res["seed"]
    assert seed["tokens"] <= seed["budgetTokens"] == 15_000
    assert "kept MEMORY.md's first 70% and last 20%" in seed["shrinkSteps"]


def test_corrupt_index_refused_nothing_changed(state, settings):
    before = {p: p.read_bytes() for p in state.sessions.rglob("*") if p.is_file()}
    (state.sessions / "sessions.json").write_text('{"agent:main:main": {"sessionId": ')
    before[state.sessions / "sessions.json"] = (state.sessions / "sessions.json").read_bytes()
    with pytest.raises(OccdError):
        rotate(settings)
    assert {p: p.read_bytes() for p in state.sessions.rglob("*") if p.is_file()} == before


def test_busy_session_deferred(state, settings):
    p = state.transcript()
    os.utime(p, None)  # just written
    with pytest.raises(BusyError):
        rotate(settings)
    assert state.transcript() == p and p.exists()


def test_open_tool_call_deferred(isolated_env, settings):
    st = State(Path(os.environ["OPENCLAW_STATE_DIR"]))
    info = generate_transcript(st.sessions, turns=4, open_call=True, plain_every=0)
    old = time.time() - 3600
    os.utime(info.path, (old, old))
    (st.sessions / "sessions.json").write_text(json.dumps({KEY: {"sessionId": info.id, "sessionFile": str(info.path),
                                                                 "compactionCount": 3}}))
    with pytest.raises(BusyError, match="tool call"):
        rotate(settings)


def test_openclaw_appends_during_rotation_aborts_nothing_lost(state, settings, monkeypatch):
    """OpenClaw writes to the session between the archive and the switch: abort, the session is untouched
    (with the appended line), no archive copy or new file left behind, retried later."""
    import occd.rotation.machine as m

    old_path = state.transcript()
    real = m.FileRotation.step_inject
    extra = b'{"type":"custom","customType":"x","data":{},"id":"feedbeef","parentId":null,"timestamp":"t"}\n'

    def appended(self, write_new):
        with open(old_path, "ab") as fh:
            fh.write(extra)
        return real(self, write_new)

    monkeypatch.setattr(m.FileRotation, "step_inject", appended)
    before = old_path.read_bytes()
    with pytest.raises(BusyError):
        rotate(settings)
    assert old_path.read_bytes() == before + extra and state.entry()["sessionId"] == old_path.stem
    assert not any((state.sessions / "archive").iterdir())
    assert sorted(p.name for p in state.sessions.iterdir() if p.suffix == ".jsonl") == [old_path.name]
    led = ledger()
    r = led.rotations(limit=1)[0]
    assert r["state"] == "IDLE" and "wrote to the session" in r["error"]
    assert led.history(kind="rotate")[0]["outcome"] == "deferred"
    led.close()


def test_disk_full_while_archiving(state, settings, monkeypatch):
    import occd.transcript.archive as arch

    old_path = state.transcript()
    before = old_path.read_bytes()
    def no_links(a, b):
        raise OSError(18, "Invalid cross-device link")

    with monkeypatch.context() as mp:  # where hard links are impossible the archive is a copy: the disk fills up
        mp.setattr(arch, "_link", no_links)
        mp.setattr(arch, "_copy_range", disk_full_after(len(before) // 2))
        with pytest.raises(OccdError):
            rotate(settings)
    assert old_path.read_bytes() == before and state.entry()["sessionId"] == old_path.stem
    led = ledger()
    assert led.rotations(limit=1)[0]["state"] == "ARCHIVING"  # resumable; recovery redoes the archive
    led.close()
    from occd.rotation.recovery import resume_all

    led = ledger()
    out = resume_all(settings, led, state_dir=Path(os.environ["OPENCLAW_STATE_DIR"]))
    assert out["resumed"] == 1 and led.rotations(limit=1)[0]["state"] == "COOLDOWN"
    led.close()
    assert (state.sessions / "archive" / old_path.name).read_bytes() == before


def test_archive_by_link_needs_no_disk_space(state, settings, monkeypatch):
    import occd.transcript.archive as arch

    old_path = state.transcript()
    before = old_path.read_bytes()
    ino = old_path.stat().st_ino
    monkeypatch.setattr(arch, "_copy_range", disk_full_after(0))
    res = rotate(settings)
    a = Path(res["archivePath"])
    assert a.read_bytes() == before and a.stat().st_ino == ino and a.stat().st_nlink == 1


def test_archive_copy_when_links_are_impossible(state, settings, monkeypatch, oracle):
    import occd.transcript.archive as arch

    def no_links(a, b):
        raise OSError(18, "Invalid cross-device link")

    old_path = state.transcript()
    before = old_path.read_bytes()
    monkeypatch.setattr(arch, "_link", no_links)
    res = rotate(settings)
    assert Path(res["archivePath"]).read_bytes() == before and not old_path.exists()
    led = ledger()
    assert led.rotations()[0]["details"]["archivedBy"] == "copy"
    led.close()


def test_undo(state, settings, oracle):
    old_path = state.transcript()
    before = old_path.read_bytes()
    res = rotate(settings)
    from occd.rotation.rotate import undo_rotation

    u = undo_rotation(settings, ref=KEY)
    e = state.entry()
    assert e["sessionId"] == old_path.stem and Path(e["sessionFile"]) == old_path and e["compactionCount"] == 3
    assert old_path.read_bytes() == before
    assert (state.sessions / "archive" / Path(res["newPath"]).name).exists() and not Path(res["newPath"]).exists()
    assert not (state.sessions / "archive" / old_path.name).exists()
    led = ledger()
    assert led.rotations(limit=1)[0]["state"] == "UNDONE"
    by_id = {r["session_id"]: r for r in led.sessions()}
    assert by_id[old_path.stem]["archived_at"] is None  # live again: status lists it
    assert by_id[Path(res["newPath"]).stem]["archived_at"] is not None
    led.close()


def test_undo_refused_after_new_turn(state, settings):
    res = rotate(settings)
    new = Path(res["newPath"])
    rows = lines_of(new)
    with open(new, "ab") as fh:
        fh.write(orjson.dumps({"type": "message", "id": "0badf00d", "parentId": rows[-1]["id"], "timestamp": "t",
                               "message": {"role": "user", "content": "new turn", "timestamp": 1}}) + b"\n")
    from occd.rotation.rotate import undo_rotation

    with pytest.raises(OccdError, match="turns beyond its seed"):
        undo_rotation(settings, ref=KEY)
    assert state.entry()["sessionId"] == res["newSessionId"]


def test_delete_policy_removes_archive_only_after_success(state, settings, monkeypatch):
    monkeypatch.setenv("OCCD_POLICY__ROTATION__OLD_SESSION_POLICY", "delete")
    from occd.config import load_settings

    s = load_settings()
    assert s.policy_for("main").rotation.old_session_policy == "delete"
    res = rotate(s)
    assert res["archivePath"] is None and not any((state.sessions / "archive").glob("*.jsonl"))
    assert Path(res["newPath"]).exists()


def test_second_rotation_of_same_key_while_unfinished_is_refused(state, settings):
    from occd.rotation.rotate import rotate_session

    led = ledger()
    led.rotation_upsert(agent_id="main", session_key=KEY, era="file", state="ARCHIVING")
    with pytest.raises(BusyError, match="already in progress"):
        rotate_session(settings, ref=KEY, ledger=led)
    led.close()


def test_notify_command_gets_json(state, settings, tmp_path, monkeypatch):
    out = tmp_path / "notified.json"
    monkeypatch.setenv("OCCD_NOTIFY_COMMAND", f"sh -c 'cat > {out}'")
    from occd.config import load_settings

    res = rotate(load_settings())
    data = json.loads(out.read_text())
    assert data["sessionKey"] == KEY and data["newSessionId"] == res["newSessionId"]
    assert "notify_command" in res["notified"]


# ---------------------------------------------------------------- CLI

def test_cli_dry_run_and_rotate_json(state):
    from occd.cli.main import cli

    r = CliRunner().invoke(cli, ["rotate", KEY, "--dry-run"])
    assert r.exit_code == 0, r.output
    assert "Would rotate" in r.output and "Mia" in r.output and "tokens" in r.output
    r = CliRunner().invoke(cli, ["rotate", KEY, "--json"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["state"] == "COOLDOWN"
    r = CliRunner().invoke(cli, ["status", "--rotations", "--json"])
    assert r.exit_code == 0 and json.loads(r.output)["rotations"][0]["state"] == "COOLDOWN"
    r = CliRunner().invoke(cli, ["history", "--kind", "rotate", "--json"])
    assert r.exit_code == 0 and "rotate" in r.output
    r = CliRunner().invoke(cli, ["rotate", KEY, "--undo", "--json"])
    assert r.exit_code == 0, r.output


def test_cli_busy_exit_75(state):
    from occd.cli.main import cli

    os.utime(state.transcript(), None)
    r = CliRunner().invoke(cli, ["rotate", KEY])
    assert r.exit_code == 75


# ---- issue 32 §14: a seed never quotes OpenClaw's own replies -----------------------------------------------------

def test_seed_never_quotes_openclaws_overflow_notice(tmp_path):
    """The last exchange answered only by OpenClaw's overflow notice (api "cli", zero usage) or a refusal to
    compact: the seed quotes the last exchange the model answered, never the notice."""
    from occd.rotation.newsession import read_old
    from occd.transcript.treebuilder import TreeBuilder

    b = TreeBuilder()
    b.user("what is the boiler's pressure?")
    b.assistant("1.4 bar, within range.")
    b.user("and the radiator valve?")
    b.overflow_notice()
    b.user("hello?")
    b.overflow_notice()
    path = b.write(tmp_path / "s.jsonl")
    ex = read_old(path)["exchanges"]
    assert ex and ex[-1] == ("what is the boiler's pressure?", "1.4 bar, within range.")
    assert not any("Context overflow" in a for _, a in ex)
