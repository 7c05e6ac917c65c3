"""The daemon runtime with injected fake jobs (the jobs themselves are tested elsewhere): the registry, --once,
the scheduler chain, failing jobs, SIGHUP reload, clock jumps, the watchdog, sd_notify over a real AF_UNIX
socket, and real processes for the single-instance lock and SIGTERM during a slow step."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

import occd.jobs as jobs_mod
from occd.runtime import daemon as dmod
from occd.runtime import lock, notify, statusfile
from occd.cli.main import cli
from occd.config import load_settings
from occd.jobs import AFTER_SCAN, JobContext, JobSpec, available_jobs, run_cycle, run_job
from occd.ledger import Ledger


# --------------------------------------------------------------------------------------------- helpers
class Recorder:
    """Fake jobs that write what they did into a shared list."""

    def __init__(self):
        self.events: list[str] = []
        self.lock = threading.Lock()

    def add(self, e):
        with self.lock:
            self.events.append(e)

    def job(self, name, result=None, fail=False, delay=0.0):
        def run(ctx):
            self.add(f"{name} start")
            if delay:
                time.sleep(delay)
            if fail:
                self.add(f"{name} fail")
                raise RuntimeError(f"{name} exploded")
            self.add(f"{name} end")
            return dict(result or {"n": 1})
        return run

    def count(self, e):
        with self.lock:
            return self.events.count(e)


def spec(name, fn, trigger=AFTER_SCAN, in_cycle=True):
    return JobSpec(name, f"fake.{name}", trigger, in_cycle=in_cycle, func=fn)


def wait_for(pred, timeout=15.0, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def fast_loader(interval=1, **changes):
    def loader():
        s = load_settings()
        s.daemon.scan_interval_seconds = interval  # below the configurable minimum, for tests only
        s.daemon.poll_interval_seconds = max(1, interval)  # these states are not watched (polling): same interval
        for k, v in changes.items():
            setattr(s.policy, k, v)
        return s
    return loader


def start_daemon(d, ledger):
    t = threading.Thread(target=d.run_forever, args=(ledger,), kwargs={"install_signals": False}, daemon=True)
    t.start()
    assert wait_for(lambda: d.scheduler is not None and d.scheduler.running)
    return t


def stop_daemon(d, t):
    d._on_signal(signal.SIGTERM, None)
    t.join(20)
    assert not t.is_alive()


class NotifySocket:
    """A real sd_notify receiver: AF_UNIX datagram socket, by path or in the abstract namespace."""

    def __init__(self, tmp_path: Path, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = f"occd-test-{os.getpid()}-{time.monotonic_ns()}"
            self.sock.bind("\0" + name)
            self.addr = "@" + name
        else:
            self.addr = str(tmp_path / "notify.sock")
            self.sock.bind(self.addr)
        self.sock.settimeout(0.1)
        self.messages: list[str] = []

    def drain(self):
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except (socket.timeout, BlockingIOError):
                return self.messages

    def wait(self, text, timeout=15.0):
        return wait_for(lambda: any(text in m for m in self.drain()), timeout)

    def close(self):
        self.sock.close()


# ------------------------------------------------------------------------------------------- registry
def test_registry_default_jobs_and_order():
    names = [s.name for s in jobs_mod.JOBS]
    assert names == ["scan", "verify", "lean", "apply", "rotate", "prune", "maintain", "score", "check",
                     "check-data"]
    s = load_settings()
    by = {x.name: x for x in jobs_mod.JOBS}
    assert by["apply"].after_scan and by["rotate"].after_scan and by["apply"].interval(s) is None
    assert by["scan"].interval(s) == 300 and by["prune"].interval(s) == 86400
    assert by["maintain"].interval(s) == 7 * 86400 and by["score"].interval(s) == 3600
    assert by["check"].interval(s) == 7 * 86400 and by["check-data"].interval(s) == 30 * 86400
    assert not by["check"].in_cycle and not by["check-data"].in_cycle


def test_missing_job_module_is_not_registered_and_logged_once(caplog):
    caplog.set_level(logging.DEBUG, logger="occd.jobs")
    missing = JobSpec("ghost", "occd.jobs.ghost_job_that_does_not_exist", lambda s: 60)
    assert jobs_mod.job_function(missing) is None
    assert jobs_mod.job_function(missing) is None
    assert [r.levelno for r in caplog.records if "ghost" in r.getMessage()] == [logging.DEBUG]
    assert available_jobs([missing]) == []


def test_broken_job_module_is_an_error_not_a_missing_feature(tmp_path, monkeypatch, caplog, isolated_env):
    (tmp_path / "occd_broken_job.py").write_text("import occd_no_such_dependency\ndef run(ctx):\n    return {}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broken = JobSpec("broken", "occd_broken_job", lambda s: 60)
    assert available_jobs([broken]) == []
    assert any("broken cannot be loaded" in r.getMessage() and r.levelno == logging.ERROR for r in caplog.records)
    with Ledger.open() as led:
        ok, s = run_job(JobContext(load_settings(), led, tmp_path), broken)
        assert not ok and "occd_no_such_dependency" in s["error"]
        assert led.history(kind="job:broken")[0]["outcome"] == "failed"


def test_interval_zero_disables_a_periodic_job():
    s = load_settings()
    s.daemon.score_interval_seconds = 0
    score = JobSpec("score", "x", lambda st: st.daemon.score_interval_seconds, func=lambda ctx: {})
    assert not score.enabled(s) and available_jobs([score], s) == []
    assert available_jobs([score]) != []  # without settings: everything present


# ---------------------------------------------------------------------------------------------- cycles
def test_run_cycle_order_chain_failure_and_stop(isolated_env, tmp_path):
    rec = Recorder()
    reg = [spec("scan", rec.job("scan"), lambda s: 300), spec("apply", rec.job("apply", fail=True)),
           spec("prune", rec.job("prune"), lambda s: 86400), spec("nightly", rec.job("nightly"), lambda s: 60, in_cycle=False)]
    with Ledger.open() as led:
        ctx = JobContext(load_settings(), led, tmp_path)
        res = run_cycle(ctx, jobs=reg)
        assert list(res) == ["scan", "apply", "prune"]  # registry order; not-in-cycle job left out
        assert res["apply"] == (False, {"error": "apply exploded"}) and res["prune"][0]
        fail = led.history(kind="job:apply")
        assert fail[0]["outcome"] == "failed" and "RuntimeError: apply exploded" in fail[0]["error"]
        # a failed scan: the jobs chained after it are skipped, the periodic ones still run
        reg[0] = spec("scan", rec.job("scan", fail=True), lambda s: 300)
        rec.events.clear()
        res = run_cycle(ctx, jobs=reg)
        assert list(res) == ["scan", "prune"] and "apply start" not in rec.events
        ctx.stop.set()
        assert run_cycle(ctx, jobs=reg) == {}


def _patch_registry(monkeypatch, reg):
    monkeypatch.setattr(jobs_mod, "JOBS", tuple(reg))


def test_run_once_cli_exit_codes_and_summary(isolated_env, monkeypatch):
    rec = Recorder()
    reg = [spec("scan", rec.job("scan", {"sessions": 4}), lambda s: 300), spec("apply", rec.job("apply", {"acted": 0})),
           spec("prune", rec.job("prune", {"removed": 2}), lambda s: 86400),
           spec("maintain", rec.job("maintain"), lambda s: 7 * 86400)]
    _patch_registry(monkeypatch, reg)
    r = CliRunner().invoke(cli, ["run", "--once"])  # no OpenClaw state at all: one line, no job runs
    assert r.exit_code == 1 and "does not exist" in r.stderr and rec.events == []
    (isolated_env / ".openclaw").mkdir()
    r = CliRunner().invoke(cli, ["run", "--once"])
    assert r.exit_code == 0, r.output
    assert rec.events == ["scan start", "scan end", "apply start", "apply end", "prune start", "prune end",
                          "maintain start", "maintain end"]
    assert "ok     scan      sessions 4" in r.output and "ok     prune     removed 2" in r.output
    times = json.loads(statusfile.job_times_file().read_text())
    assert set(times) == {"prune", "maintain"}  # the daemon will not redo them right after this
    # one failing job: the others still run, exit 1 with a summary
    reg[2] = spec("prune", rec.job("prune", fail=True), lambda s: 86400)
    _patch_registry(monkeypatch, reg)
    r = CliRunner().invoke(cli, ["run", "--once", "--json"])
    assert r.exit_code == 1
    out = json.loads(r.stdout)
    assert out["success"] is False and out["failed"] == ["prune"] and out["jobs"]["maintain"]["ok"]
    assert out["jobs"]["prune"] == {"ok": False, "error": "prune exploded"}
    r = CliRunner().invoke(cli, ["run", "--once"])
    assert r.exit_code == 1 and "1 job(s) failed: prune" in r.output


def test_run_interval_flag_is_validated(isolated_env):
    r = CliRunner().invoke(cli, ["run", "--once", "--interval", "1s"])
    assert r.exit_code == 2 and "too short" in r.output


# ------------------------------------------------------------------------------------ the scheduler
def test_scheduler_chains_apply_after_scan_and_survives_failures(isolated_env, tmp_path):
    rec = Recorder()
    reg = [spec("scan", rec.job("scan", {"sessions": 2}), lambda s: s.daemon.scan_interval_seconds),
           spec("apply", rec.job("apply")),
           spec("boom", rec.job("boom", fail=True), lambda s: 1)]
    with Ledger.open() as led:
        d = dmod.Daemon(fast_loader(1), jobs=reg, env={})
        t = start_daemon(d, led)
        try:
            assert wait_for(lambda: rec.count("apply end") >= 3 and rec.count("boom fail") >= 2)
        finally:
            stop_daemon(d, t)
        ev = [e for e in rec.events if not e.startswith("boom")]
        # apply always directly after its scan, never interleaved with another scan
        for i, e in enumerate(ev):
            if e == "apply start":
                assert ev[i - 1] == "scan end"
        assert len(led.history(kind="job:boom")) >= 2
        run = led.latest_daemon_run()
        assert run["stopped"] is not None and run["last_cycle"] is not None
    st = statusfile.read_status()
    assert st["pid"] is None and st["jobs"]["boom"]["ok"] is False and st["jobs"]["scan"]["sessions"] == 2


def test_sighup_reloads_settings_and_reschedules(isolated_env, tmp_path):
    rec = Recorder()
    calls = {"n": 0}

    def loader():
        calls["n"] += 1
        if calls["n"] == 3:
            raise ValueError("Invalid setting daemon.scan_interval_seconds")  # a broken config on the 2nd reload
        s = load_settings()
        s.daemon.scan_interval_seconds = s.daemon.poll_interval_seconds = 3600 if calls["n"] == 1 else 7200
        s.policy.mode = "observe" if calls["n"] == 1 else "act"
        return s

    seen = []
    reg = [spec("scan", lambda ctx: seen.append((ctx.settings.policy.mode, ctx.settings.daemon.scan_interval_seconds)) or {},
                lambda s: s.daemon.scan_interval_seconds)]
    sock = NotifySocket(tmp_path)
    with Ledger.open() as led:
        d = dmod.Daemon(loader, jobs=reg, env={"NOTIFY_SOCKET": sock.addr})
        t = start_daemon(d, led)
        try:
            assert wait_for(lambda: seen == [("observe", 3600)])
            d._on_signal(signal.SIGHUP, None)
            assert wait_for(lambda: d.settings.policy.mode == "act")
            assert d.ctx.settings is d.settings
            assert d.scheduler.get_job("scan").trigger.interval_length == 7200
            assert wait_for(lambda: (statusfile.read_status() or {}).get("mode") == "act")
            assert sock.wait("READY=1\nSTATUS=mode act")
            reloading = [m for m in sock.messages if m.startswith("RELOADING=1")]
            assert reloading and "MONOTONIC_USEC=" in reloading[0]
            d._on_signal(signal.SIGHUP, None)  # the config is now broken: the previous settings stay
            assert wait_for(lambda: calls["n"] == 3)
            time.sleep(0.1)
            assert d.settings.policy.mode == "act" and d.scheduler.running
        finally:
            stop_daemon(d, t)
            sock.close()


def test_backward_clock_jump_does_not_stall_the_scan(isolated_env):
    """APScheduler plans in wall time: after the clock goes back 2 h, its next scan would come 2 h late. The
    supervisor sees the jump on the monotonic clock and re-plans: the scan runs now."""
    rec = Recorder()
    offset = [0.0]
    reg = [spec("scan", rec.job("scan"), lambda s: s.daemon.scan_interval_seconds),
           spec("prune", rec.job("prune"), lambda s: 86400)]
    with Ledger.open() as led:
        d = dmod.Daemon(fast_loader(3600), jobs=reg, env={}, clock=lambda: time.time() + offset[0])
        t = start_daemon(d, led)
        try:
            assert wait_for(lambda: rec.count("scan end") == 1 and not d.dispatching)
            before = d.scheduler.get_job("scan").next_run_time.timestamp()
            assert before > time.time() + 3000  # the next scan is an hour away
            offset[0] = -7200.0
            d.wake.set()
            assert wait_for(lambda: rec.count("scan end") == 2 and not d.dispatching, timeout=10)
            assert rec.count("prune end") == 0  # prune is re-planned a day from its (never) last run, not run
            offset[0] = +86400.0 * 3  # and forward (or a resume from suspend): scan now again
            d.wake.set()
            assert wait_for(lambda: rec.count("scan end") == 3, timeout=10)
        finally:
            stop_daemon(d, t)


def test_overdue_scan_is_started_by_the_supervisor(isolated_env):
    rec = Recorder()
    mono = [1000.0]
    reg = [spec("scan", rec.job("scan"), lambda s: s.daemon.scan_interval_seconds)]
    with Ledger.open() as led:
        d = dmod.Daemon(fast_loader(60), jobs=reg, env={}, monotonic=lambda: mono[0])
        t = start_daemon(d, led)
        try:
            assert wait_for(lambda: rec.count("scan end") == 1 and not d.dispatching)
            d.check_overdue()
            time.sleep(0.2)
            assert rec.count("scan end") == 1  # not late yet
            mono[0] += 2 * 60 + 60  # two intervals and more without a scan (monotonic time)
            d.check_overdue()
            assert wait_for(lambda: rec.count("scan end") == 2)
        finally:
            stop_daemon(d, t)


def test_periodic_jobs_are_planned_from_their_last_run(isolated_env):
    reg = [spec("prune", lambda ctx: {}, lambda s: 86400)]
    d = dmod.Daemon(fast_loader(60), jobs=reg, env={}, clock=lambda: 1_000_000.0)
    d.job_times = {"prune": 1_000_000.0 - 3600}
    assert d._due("prune", 86400, 1_000_000.0, True) == 1_000_000.0 - 3600 + 86400
    d.job_times = {"prune": 1_000_000.0 - 10 * 86400}  # long overdue: soon after start, not at once
    assert d._due("prune", 86400, 1_000_000.0, True) == 1_000_000.0 + dmod.FIRST_PERIODIC_DELAY_S
    d.job_times = {"prune": 1_000_000.0 + 50_000}  # "in the future": the clock went back
    assert d._due("prune", 86400, 1_000_000.0, False) == 1_000_000.0 + 86400
    d.job_times = {}
    assert d._due("prune", 86400, 1_000_000.0, True) == 1_000_000.0 + dmod.FIRST_PERIODIC_DELAY_S


# ------------------------------------------------------------------------------------------ sd_notify
@pytest.mark.parametrize("abstract", [False, True])
def test_sd_notify_over_a_real_socket(tmp_path, abstract):
    sock = NotifySocket(tmp_path, abstract=abstract)
    try:
        assert notify.sd_notify("READY=1\nSTATUS=hi", {"NOTIFY_SOCKET": sock.addr})
        assert sock.wait("READY=1\nSTATUS=hi")
    finally:
        sock.close()
    assert notify.sd_notify("READY=1", {}) is False
    assert notify.sd_notify("READY=1", {"NOTIFY_SOCKET": str(tmp_path / "gone.sock")}) is False
    assert notify.sd_notify("READY=1", {"NOTIFY_SOCKET": "vsock:2:1234"}) is False


def test_watchdog_interval():
    assert notify.watchdog_interval({"WATCHDOG_USEC": "120000000"}) == 60.0
    assert notify.watchdog_interval({"WATCHDOG_USEC": "120000000", "WATCHDOG_PID": str(os.getpid())}) == 60.0
    assert notify.watchdog_interval({"WATCHDOG_USEC": "120000000", "WATCHDOG_PID": "1"}) is None
    assert notify.watchdog_interval({"WATCHDOG_USEC": "x"}) is None and notify.watchdog_interval({}) is None


def test_notify_sequence_and_watchdog_withheld_while_a_job_is_stuck(isolated_env, tmp_path, monkeypatch):
    monkeypatch.setattr(dmod, "MIN_STALL_S", 1.5)
    release = threading.Event()
    n = {"scans": 0}

    def scan(ctx):
        n["scans"] += 1
        if n["scans"] == 2:
            release.wait(20)  # stuck (until the test lets go)
        return {"sessions": 1}

    reg = [spec("scan", scan, lambda s: s.daemon.scan_interval_seconds)]
    sock = NotifySocket(tmp_path)
    env = {"NOTIFY_SOCKET": sock.addr, "WATCHDOG_USEC": "400000"}  # ping every ~0.2 s
    with Ledger.open() as led:
        d = dmod.Daemon(fast_loader(0.3), jobs=reg, env=env)
        t = start_daemon(d, led)
        try:
            assert sock.wait("READY=1")
            assert sock.wait("WATCHDOG=1")
            assert sock.wait("STATUS=mode observe, last scan")  # after the first cycle
            assert wait_for(lambda: d.running == "scan" and n["scans"] == 2)
            assert wait_for(lambda: not d.healthy(), timeout=5)
            sock.drain()
            sock.messages.clear()
            time.sleep(1.0)
            assert "WATCHDOG=1" not in sock.drain()  # stuck past the stall limit: systemd may restart us
            release.set()
            assert sock.wait("WATCHDOG=1", timeout=5)  # healthy again
        finally:
            release.set()
            stop_daemon(d, t)
        assert sock.wait("STOPPING=1")
        sock.close()


# ------------------------------------------------------------------------------- real processes
FAKEJOBS = textwrap.dedent('''
    import os, time
    from pathlib import Path
    from occd.jobs import AFTER_SCAN, JobSpec

    D = Path(os.environ["FAKE_DIR"])

    def log(line):
        with open(D / "events.log", "a") as f:
            f.write(line + "\\n")
            f.flush()

    def scan(ctx):
        log(f"scan interval={ctx.settings.daemon.scan_interval_seconds} mode={ctx.settings.policy.mode}")
        for i in range(int(os.environ.get("FAKE_STEPS", "0"))):
            if ctx.stop.is_set():
                log("scan stopped")
                return {"steps": i}
            log(f"begin {i}")
            time.sleep(float(os.environ.get("FAKE_STEP_S", "0.4")))
            log(f"end {i}")
        return {"sessions": 3}

    def apply(ctx):
        log("apply")
        return {"acted": 0}

    JOBS = (JobSpec("scan", "fake.scan", lambda s: s.daemon.scan_interval_seconds, func=scan),
            JobSpec("apply", "fake.apply", AFTER_SCAN, func=apply))
''')

RUNNER = textwrap.dedent('''
    import atexit, json, os, sys
    sys.path.insert(0, os.environ["FAKE_DIR"])
    import occd.jobs
    if os.environ.get("FAKE_REAL_JOBS") != "1":
        import fakejobs
        occd.jobs.JOBS = fakejobs.JOBS

    def heavy():
        names = sorted(m for m in sys.modules if m.split(".")[0] in ("litellm", "openai", "tiktoken"))
        with open(os.path.join(os.environ["FAKE_DIR"], "heavy.json"), "w") as f:
            json.dump(names, f)

    atexit.register(heavy)
    from occd.cli.main import main
    main(sys.argv[1:])
''')


@pytest.fixture
def fake_proc(isolated_env, tmp_path):
    d = tmp_path / "fake"
    d.mkdir()
    (d / "fakejobs.py").write_text(FAKEJOBS)
    (d / "runner.py").write_text(RUNNER)
    env = {**os.environ, "FAKE_DIR": str(d)}
    procs = []

    def start(*args, **extra_env):
        p = subprocess.Popen([sys.executable, str(d / "runner.py"), "run", *args], env={**env, **extra_env},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        return p

    def events():
        f = d / "events.log"
        return f.read_text().splitlines() if f.exists() else []

    start.events = events
    start.dir = d
    start.env = env
    yield start
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_second_instance_exits_75_naming_the_pid(fake_proc):
    p = fake_proc("--interval", "1h")
    assert wait_for(lambda: "apply" in fake_proc.events())
    assert lock.InstanceLock.holder() == p.pid
    second = fake_proc("--once")
    out, err = second.communicate(timeout=30)
    assert second.returncode == 75
    assert f"Error: occd is already running (pid {p.pid})" in err
    assert fake_proc.events().count("apply") == 1  # the second one ran nothing
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 0
    assert lock.InstanceLock.holder() is None


def test_sigterm_during_a_slow_step_finishes_it_then_exits_0(fake_proc):
    p = fake_proc("--interval", "1h", FAKE_STEPS="50", FAKE_STEP_S="0.4")
    assert wait_for(lambda: "begin 1" in fake_proc.events())
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 0, p.stderr.read()
    ev = fake_proc.events()
    begun = [e for e in ev if e.startswith("begin")]
    ended = [e for e in ev if e.startswith("end")]
    assert len(begun) == len(ended) < 50  # the running step finished; no further steps started
    assert ev[-1] == "scan stopped" and "apply" not in ev  # nothing chained after a stopped scan
    st = statusfile.read_status()
    assert st["pid"] is None and st["stopped"]
    with Ledger.open() as led:
        assert led.latest_daemon_run()["exit_reason"] == "SIGTERM"


@pytest.mark.slow
def test_sighup_in_a_real_process_rereads_the_config_file(fake_proc):
    from occd import paths

    cfg = paths.config_file()
    cfg.parent.mkdir(parents=True, exist_ok=True)
    # poll_interval_seconds too: this state is not watched, so the daemon polls (issue 19)
    cfg.write_text("[daemon]\nscan_interval_seconds = 3600\npoll_interval_seconds = 3600\n")
    p = fake_proc()
    assert wait_for(lambda: "scan interval=3600 mode=observe" in fake_proc.events())
    cfg.write_text("[daemon]\nscan_interval_seconds = 600\npoll_interval_seconds = 600\n[policy]\nmode = \"act\"\n")
    p.send_signal(signal.SIGHUP)
    assert wait_for(lambda: (statusfile.read_status() or {}).get("scanIntervalSeconds") == 600)
    assert statusfile.read_status()["mode"] == "act" and p.poll() is None
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=30) == 0


@pytest.mark.slow
def test_once_with_the_real_jobs_never_imports_litellm(fake_proc, isolated_env):
    (isolated_env / ".openclaw").mkdir()
    p = fake_proc("--once", FAKE_REAL_JOBS="1")
    out, err = p.communicate(timeout=120)
    assert p.returncode in (0, 1), err
    assert "scan" in out
    assert json.loads((fake_proc.dir / "heavy.json").read_text()) == []


# ---------------------------------------------------------------------------------------------- logging
class _Stream:
    def __init__(self, tty):
        self.tty, self.parts = tty, []

    def write(self, s):
        self.parts.append(s)

    def flush(self):
        pass

    def isatty(self):
        return self.tty

    def text(self):
        return "".join(self.parts)


@pytest.mark.parametrize("kind", ["journald", "tty", "pipe", "launchd"])
def test_logging_destinations(isolated_env, kind):
    from occd import paths
    from occd.runtime import logging_setup

    env = {**os.environ, **({"INVOCATION_ID": "abc"} if kind == "journald" else {})}
    env.pop("JOURNAL_STREAM", None)
    env.pop("XPC_SERVICE_NAME", None)
    if kind == "launchd":
        env["XPC_SERVICE_NAME"] = "io.occd.daemon"
    if kind != "journald":
        env.pop("INVOCATION_ID", None)
    stream = _Stream(tty=kind == "tty")
    try:
        logging_setup.setup("INFO", env=env, stream=stream)
        lg = logging.getLogger("occd.daemon")
        lg.info("cycle done")
        lg.error("scan failed")
        logging.getLogger("apscheduler.scheduler").info("Added job")  # below WARNING: not shown
        logging.getLogger("apscheduler.executors").warning("Run time of job was missed")
        out = stream.text()
        if kind == "journald":
            assert "<6>occd.daemon: cycle done\n" in out and "<3>occd.daemon: scan failed\n" in out
            assert not any(ch.isdigit() for ch in out.split("cycle done")[0][3:])  # no timestamp of our own
        elif kind == "tty":
            assert "INFO cycle done" in out and "ERROR scan failed" in out
        elif kind == "pipe":  # a foreground `occd run` in a pipe or a container: everything, with timestamps
            assert "INFO occd.daemon: cycle done" in out and "ERROR occd.daemon: scan failed" in out
        else:  # launchd: its plist sends stderr to a file beside the log, which has everything already
            assert "cycle done" not in out and "ERROR occd.daemon: scan failed" in out
        assert "Added job" not in out and "Run time of job was missed" in out
        text = (paths.log_dir() / "occd.log").read_text()
        assert "INFO occd.daemon: cycle done" in text and "WARNING apscheduler.executors" in text
        logging_setup.set_level("WARNING")
        lg.info("quiet now")
        assert "quiet now" not in stream.text()
    finally:
        for name in logging_setup.LOGGERS:
            for h in list(logging.getLogger(name).handlers):
                logging.getLogger(name).removeHandler(h)
                h.close()
            logging.getLogger(name).propagate = True
            logging.getLogger(name).setLevel(logging.NOTSET)


@pytest.mark.slow
def test_scan_now_makes_the_running_daemon_scan(fake_proc):
    from click.testing import CliRunner

    from occd.cli.main import cli

    r = CliRunner().invoke(cli, ["scan-now"])
    assert r.exit_code == 1 and "No occd daemon is running" in r.stderr
    p = fake_proc("--interval", "1h")
    assert wait_for(lambda: fake_proc.events().count("apply") == 1)
    r = CliRunner().invoke(cli, ["scan-now", "--json"])
    assert r.exit_code == 0 and json.loads(r.stdout)["pid"] == p.pid
    assert wait_for(lambda: fake_proc.events().count("apply") == 2)  # a second cycle, an hour early
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=30) == 0
