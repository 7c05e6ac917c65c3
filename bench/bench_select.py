"""How right is `occd select`? A labelled set of realistic sessions and tasks, with the right answer for each
(resume which session / start fresh / queue behind which), measured with the keyword fallback and with a
scripted model (tests/fake_llm_server.py, through the real litellm worker).

The state: three git repositories (shop, calc, docs) on their branches; an OpenClaw file-era agent (a run
holding its transcript lock, a session with 3 compactions), an OpenClaw database-era agent (a row with status
running), and Claude Code sessions in the shapes Claude Code 2.1.330 writes (replies split over lines, tool
results, /compact with its summary, slash commands, a live-process file for a busy run, one at 75% of a 200k
window, one on `gitBranch: "HEAD"`). Some sessions are days old, some minutes; some related to a task, some on
the same branch and just active but about something else (the trap of issue 14).

The scripted model answers what a good cheap model would: ~0.85 for the same piece of work, ~0.35 for other
work in the same area, ~0.05 for unrelated work, from the labels below (it sees only the digests occd sends).

Targets: never resume an unrelated session, never recommend the caller, the right answer on >= 90% of cases.

    .venv/bin/python bench/bench_select.py [--no-model] [-v]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

H, D = 3600.0, 86400.0
SAME, NEAR, OTHER = 0.85, 0.35, 0.05     # the scripted model's ratings: same work, same area, unrelated


# ---- sessions ---------------------------------------------------------------------------------------------

def _iso(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(t))


def claude_session(home: Path, repo: Path, sid: str, prompts: list[str], *, branch: str, last: float,
                   model: str = "claude-sonnet-4-5", compact_after: int | None = None, tokens: int = 30_000) -> Path:
    """A Claude Code session as 2.1.330 writes it; the last entry at `last`."""
    from occd.relevance.claude_code import claude_slug

    n_lines = 6 * len(prompts) + (4 if compact_after is not None else 0) + 2
    t = iter(range(n_lines + 5))
    start = last - n_lines * 20

    def ts():
        return _iso(start + 20 * next(t))

    base = {"cwd": str(repo), "sessionId": sid, "gitBranch": branch, "isSidechain": False, "version": "2.1.330"}
    out: list[dict] = [{"type": "queue-operation", "operation": "enqueue", "timestamp": ts(), "sessionId": sid}]
    for i, p in enumerate(prompts):
        out.append({**base, "type": "user", "timestamp": ts(), "message": {"role": "user", "content": p}})
        out.append({**base, "type": "attachment", "timestamp": ts(), "attachment": {"type": "date", "date": "x"}})
        usage = {"input_tokens": 3, "cache_creation_input_tokens": 500, "cache_read_input_tokens": tokens - 600,
                 "output_tokens": 97}
        msg = {"id": f"msg_{sid}_{i}", "role": "assistant", "model": model, "usage": usage}
        out.append({**base, "type": "assistant", "timestamp": ts(),
                    "message": {**msg, "content": [{"type": "text", "text": "Let me look."}]}})
        out.append({**base, "type": "assistant", "timestamp": ts(), "message": {**msg, "content": [
            {"type": "tool_use", "id": f"tu{i}", "name": "Read", "input": {"file_path": str(repo / "README.md")}}]}})
        out.append({**base, "type": "user", "timestamp": ts(), "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": f"tu{i}", "content": "# readme\n" * 40}]}})
        out.append({**base, "type": "assistant", "timestamp": ts(), "message": {
            "id": f"msg_{sid}_{i}b", "role": "assistant", "model": model, "usage": usage,
            "content": [{"type": "text", "text": "Done: " + p[:40]}]}})
        if compact_after == i:
            out.append({**base, "type": "system", "subtype": "compact_boundary", "timestamp": ts(),
                        "content": "Conversation compacted", "compactMetadata": {"trigger": "manual"}})
            out.append({**base, "type": "user", "timestamp": ts(), "isCompactSummary": True,
                        "message": {"role": "user", "content": "This session is being continued ... summary"}})
            out.append({**base, "type": "user", "timestamp": ts(), "message": {"role": "user", "content":
                        "<command-name>/compact</command-name>\n<command-message>compact</command-message>\n"
                        "<command-args></command-args>"}})
            out.append({**base, "type": "user", "timestamp": ts(), "message": {
                "role": "user", "content": "<local-command-stdout>Compacted</local-command-stdout>"}})
    out.append({"type": "last-prompt", "lastPrompt": prompts[-1], "sessionId": sid})
    out.append({"type": "cost-state", "sessionId": sid, "totalCostUSD": 0.12})
    p = home / ".claude" / "projects" / claude_slug(repo) / f"{sid}.jsonl"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("".join(json.dumps(o, separators=(",", ":")) + "\n" for o in out))
    os.utime(p, (time.time(), time.time()))  # every file written just now: only the entries tell their age
    return p


def build(home: Path, now: float) -> dict:
    from test_relevance import git_repo, make_db_agent, make_file_agent  # the test suite's state builders

    shop = git_repo(home / "src" / "shop", "main")
    calc = git_repo(home / "src" / "calc", "main")
    docs = git_repo(home / "src" / "docs", "main")
    state = home / ".openclaw"
    sdir = make_file_agent(state, "main", [
        {"sid": "oc-webhook", "key": "agent:main:webhooks", "cwd": str(shop), "mtime": now - 2 * H, "usage": 30_000,
         "users": ["refactor the webhook handler to verify Stripe signatures", "reject webhooks older than 5 minutes"]},
        {"sid": "oc-invoice", "key": "agent:main:invoices", "cwd": str(shop), "mtime": now - 1 * H, "compactions": 3,
         "users": ["add a CSV export of invoices to the admin page", "include VAT totals in the invoice export"]},
        {"sid": "oc-rota", "key": "agent:main:rota", "cwd": str(shop), "mtime": now - 40 * 60,
         "users": ["plan the holiday rota for the support team in December"]},
        {"sid": "oc-live", "key": "agent:main:main", "cwd": str(shop), "mtime": now - 30,
         "users": ["speed up the product search query with an index"]},
    ])
    from occd.openclaw.locks import proc_starttime

    (sdir / "oc-live.jsonl.lock").write_text(json.dumps({"pid": os.getpid(), "createdAt": _iso(now - 20),
                                                          "starttime": proc_starttime(os.getpid())}))
    make_db_agent(state, "ops", [
        {"sid": "db-tls", "key": "agent:ops:main", "cwd": str(shop), "mtime": now - 5 * 60, "status": "running",
         "users": ["rotate the TLS certificates on the staging servers"]},
        {"sid": "db-backup", "key": "agent:ops:backup", "cwd": str(calc), "mtime": now - 3 * D, "status": "done",
         "users": ["set up nightly database backups to S3"]},
    ])
    claude_session(home, calc, "cc-sub", ["add a subtract function to the calculator",
                                          "handle negative results in subtract"],
                   branch="main", last=now - 30 * 60, compact_after=0)
    claude_session(home, calc, "cc-div", ["handle division by zero in the calculator"], branch="main",
                   last=now - 45 * 60)
    claude_session(home, calc, "cc-init", ["<command-message>init</command-message>\n<command-name>/init</command-name>"],
                   branch="main", last=now - 10 * 60)
    claude_session(home, calc, "cc-parser", ["parse arithmetic expressions with operator precedence",
                                             "support parentheses in the expression parser"],
                   branch="HEAD", last=now - 5 * D, model="claude-opus-4-7")
    claude_session(home, calc, "cc-caller", ["add a multiply function to the calculator"], branch="main",
                   last=now - 20)
    claude_session(home, shop, "cc-hooks-tests", ["write tests for the webhook retry backoff"],
                   branch="main", last=now - 3 * H)
    claude_session(home, docs, "cc-i18n", ["translate the getting started guide into German",
                                           "/translate the installation page too"],
                   branch="main", last=now - 1 * D)
    claude_session(home, docs, "cc-search", ["add full-text search to the docs site"], branch="main",
                   last=now - 2 * H, tokens=150_000)
    claude_session(home, docs, "cc-theme", ["switch the docs theme to dark mode by default"], branch="main",
                   last=now - 15 * 60)
    live = home / ".claude" / "sessions"
    live.mkdir(parents=True)
    me = os.getpid()
    (live / f"{me}.json").write_text(json.dumps({"pid": me, "sessionId": "cc-div", "status": "busy",
                                                 "procStart": proc_starttime(me) and str(proc_starttime(me))}))
    # a finished run whose record was left behind (dead pid): not running
    (live / "999999.json").write_text(json.dumps({"pid": 999999, "sessionId": "cc-theme", "status": "busy"}))
    return {"shop": shop, "calc": calc, "docs": docs, "state": state}


# ---- the labelled cases -----------------------------------------------------------------------------------
# (task, repo, caller, the right answer, the scripted model's view: session -> SAME / NEAR; others OTHER)

CASES = [
    ("add unit tests for the subtract function", "calc", None, ("resume", "cc-sub"),
     {"cc-sub": SAME, "cc-div": NEAR, "cc-caller": NEAR}),
    ("fix the crash when dividing by zero", "calc", None, ("queue", "cc-div"),
     {"cc-div": SAME, "cc-sub": NEAR}),
    ("write the changelog for release 2.4", "calc", None, ("fresh", None), {}),
    ("update the calculator documentation", "calc", None, ("fresh", None),
     {"cc-init": NEAR, "cc-sub": NEAR}),
    ("add a multiply function to the calculator", "calc", "cc-caller", ("fresh", None),
     {"cc-caller": SAME, "cc-sub": NEAR, "cc-div": NEAR}),
    ("support exponent operator in the expression parser", "calc", None, ("resume", "cc-parser"),
     {"cc-parser": SAME}),
    ("check the nightly S3 database backups ran", "calc", None, ("resume", "db-backup"),
     {"db-backup": SAME}),
    ("verify webhook signatures in the Stripe handler", "shop", None, ("resume", "oc-webhook"),
     {"oc-webhook": SAME, "cc-hooks-tests": NEAR}),
    ("add a tests for the webhook retry backoff with jitter", "shop", None, ("resume", "cc-hooks-tests"),
     {"cc-hooks-tests": SAME, "oc-webhook": NEAR}),
    ("export invoices as CSV with VAT totals per month", "shop", None, ("fresh", None),
     {"oc-invoice": SAME}),
    ("renew the staging TLS certificates", "shop", None, ("queue", "db-tls"), {"db-tls": SAME}),
    ("speed up product search with a database index", "shop", None, ("queue", "oc-live"), {"oc-live": SAME}),
    ("speed up product search with a database index", "shop", "agent:main:main", ("fresh", None),
     {"oc-live": SAME}),
    ("migrate the orders table to postgres 16", "shop", None, ("fresh", None), {"oc-invoice": NEAR}),
    ("plan the December holiday rota for support", "shop", None, ("resume", "oc-rota"), {"oc-rota": SAME}),
    ("translate the installation page into German", "docs", None, ("resume", "cc-i18n"), {"cc-i18n": SAME}),
    ("add search to the docs site with a prebuilt index", "docs", None, ("fresh", None), {"cc-search": SAME}),
    ("make dark mode the default docs theme", "docs", None, ("resume", "cc-theme"), {"cc-theme": SAME}),
    ("fix the broken links in the API reference", "docs", None, ("fresh", None), {}),
    ("write a blog post about our new pricing", "docs", None, ("fresh", None), {}),
]

DIGEST_KEYS = {  # a phrase of each session's digest: what the scripted model recognises it by
    "cc-sub": "subtract function", "cc-div": "division by zero", "cc-init": "/init", "cc-parser": "arithmetic expressions",
    "cc-caller": "multiply function", "cc-hooks-tests": "webhook retry backoff", "cc-i18n": "getting started guide",
    "cc-search": "full-text search", "cc-theme": "dark mode", "oc-webhook": "Stripe signatures",
    "oc-invoice": "CSV export of invoices", "oc-rota": "holiday rota", "oc-live": "product search query",
    "db-tls": "TLS certificates", "db-backup": "nightly database backups",
}


def run_cases(env: dict, use_model: bool, srv, verbose: bool) -> dict:
    from occd.config import LLMSettings, load_settings
    from occd.relevance.discovery import Caller
    from occd.relevance.select import select_session

    settings = load_settings()
    if srv is not None:
        settings.llm = LLMSettings(model="openai/fake-model", api_base=srv.base_url, timeout_seconds=30.0)
    right = unrelated_resumes = caller_recs = model_calls = 0
    rows = []
    for task, repo_name, caller_s, want, view in CASES:
        caller = None
        if caller_s:
            caller = Caller(openclaw_key=caller_s) if caller_s.startswith("agent:") else Caller(claude_session_id=caller_s)
        if srv is not None:
            srv.rules = [(DIGEST_KEYS[k], v) for k, v in view.items()]
            srv.default = OTHER
        t0 = time.monotonic()
        r = select_session(settings, task=task, repo=env[repo_name], use_model=use_model, open_ledger=False,
                           caller=caller)
        took = time.monotonic() - t0
        got = (r.decision.action, r.decision.session_id)
        ok = got == want
        right += ok
        rated = view.get(got[1], OTHER) if got[1] else None
        if got[0] == "resume" and rated is not None and rated < 0.3:
            unrelated_resumes += 1
        by = {s.id: s for s in r.sessions}
        if got[1] and by[got[1]].is_self:
            caller_recs += 1
        if use_model and r.relevance.method != "model":
            print(f"  warning: {task!r}: relevance by {r.relevance.method} ({r.relevance.reason})")
        model_calls += r.relevance.calls
        rows.append((ok, task, want, got, r.decision.reason, took))
    n = len(CASES)
    for ok, task, want, got, reason, took in rows:
        if verbose or not ok:
            print(f"  {'ok ' if ok else 'BAD'} {task[:52]:52} want {want[0]} {want[1] or '':14} got {got[0]} "
                  f"{got[1] or '':14} ({took:.1f} s)" + ("" if ok else f"\n      {reason}"))
    return {"cases": n, "right": right, "percent": round(100.0 * right / n, 1), "unrelatedResumes": unrelated_resumes,
            "callerRecommended": caller_recs, "modelCalls": model_calls}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-model", action="store_true", help="only the keyword fallback")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    from fake_llm_server import FakeLLM

    with tempfile.TemporaryDirectory(prefix="occd-bench-select-") as td:
        home = Path(td) / "home"
        home.mkdir()
        for k in list(os.environ):
            if k.startswith(("OCCD_", "CLAUDE", "OPENCLAW_")) or k.endswith("_API_KEY"):
                del os.environ[k]
        os.environ.update(HOME=str(home), OCCD_HOME=str(Path(td) / "occd-home"),
                          OPENCLAW_STATE_DIR=str(home / ".openclaw"), XDG_CACHE_HOME=str(home / ".cache"))
        now = time.time()
        env = build(home, now)
        results = {}
        print(f"{len(CASES)} labelled cases, {sum(1 for _ in (home / '.claude' / 'projects').rglob('*.jsonl'))} "
              "Claude Code sessions, 6 OpenClaw sessions (file and database era), 3 repositories")
        print("keywords:")
        results["keywords"] = run_cases(env, False, None, args.verbose)
        if not args.no_model:
            srv = FakeLLM(default=OTHER).start()
            try:
                print("scripted model (litellm worker → fake OpenAI-compatible server):")
                results["model"] = run_cases(env, True, srv, args.verbose)
            finally:
                srv.stop()
        ok = True
        for name, r in results.items():
            met = r["unrelatedResumes"] == 0 and r["callerRecommended"] == 0 and r["percent"] >= 90
            ok &= met
            print(f"{name:9} right {r['right']}/{r['cases']} = {r['percent']}%  unrelated resumed {r['unrelatedResumes']}  "
                  f"caller recommended {r['callerRecommended']}  model calls {r['modelCalls']}  "
                  f"{'target met' if met else 'TARGET MISSED'}")
        print(json.dumps(results))
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
