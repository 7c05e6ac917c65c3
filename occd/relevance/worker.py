"""The litellm worker: `python -m occd.relevance.worker` reads one JSON request on stdin, makes the model
calls, writes one JSON answer on stdout, and exits. It is the only place litellm is imported, so the daemon
and the CLI never carry it (seconds to import, ~180 MB resident).

Request:  {"model", "api_base"?, "timeout", "max_tokens", "retries", "concurrency",
           "calls": [{"messages": [...], "response_format"?: {...}}], "mock_response"?: str}
Answer:   {"results": [{"ok", "content", "prompt_tokens", "completion_tokens", "cost_usd", "error_kind",
           "error", "duration_ms", "attempts"}], "rss_kb"}
error_kind: no_key | timeout | rate_limit | http | error. The caller validates the content.
"""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # the bundled price map: never fetched
os.environ.setdefault("LITELLM_LOG", "ERROR")


def _rss_kb() -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _retry_after(exc) -> float | None:
    resp = getattr(exc, "response", None)
    headers = getattr(resp, "headers", None)
    if headers is None:
        return None
    try:
        v = headers.get("retry-after")
        return float(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _one(litellm, req: dict, call: dict) -> dict:
    t0 = time.monotonic()
    timeout = float(req.get("timeout") or 3.0)
    retries = int(req.get("retries", 2))
    deadline = t0 + timeout * (1 + retries)
    kwargs = dict(model=req["model"], messages=call["messages"], temperature=0, timeout=timeout,
                  max_tokens=int(req.get("max_tokens") or 600), max_retries=0, drop_params=True)
    if call.get("response_format"):
        kwargs["response_format"] = call["response_format"]
    if req.get("api_base"):
        kwargs["api_base"] = req["api_base"]
        if req.get("placeholder_key"):
            kwargs["api_key"] = req["placeholder_key"]
    if req.get("mock_response") is not None:
        kwargs["mock_response"] = req["mock_response"]
    out = {"ok": False, "content": None, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0,
           "error_kind": None, "error": None, "attempts": 0}
    attempt = 0
    while True:
        attempt += 1
        out["attempts"] = attempt
        try:
            resp = litellm.completion(**kwargs)
        except litellm.RateLimitError as e:
            wait = min(_retry_after(e) or 0.25 * 2 ** (attempt - 1), 2.0)
            if attempt <= retries and time.monotonic() + wait < deadline:
                time.sleep(wait)
                continue
            out.update(error_kind="rate_limit", error=str(e).splitlines()[0][:300])
            break
        except litellm.Timeout as e:
            out.update(error_kind="timeout", error=str(e).splitlines()[0][:300])
            break
        except litellm.AuthenticationError as e:
            out.update(error_kind="no_key", error=str(e).splitlines()[0][:300])
            break
        except Exception as e:  # noqa: BLE001 - any provider error is an answer, never a crash
            name = type(e).__name__
            kind = "timeout" if "Timeout" in name else ("http" if getattr(e, "status_code", None) else "error")
            out.update(error_kind=kind, error=f"{name}: {str(e).splitlines()[0] if str(e) else ''}"[:300])
            break
        try:
            out["content"] = resp.choices[0].message.content
            u = getattr(resp, "usage", None)
            out["prompt_tokens"] = int(getattr(u, "prompt_tokens", 0) or 0)
            out["completion_tokens"] = int(getattr(u, "completion_tokens", 0) or 0)
            try:
                out["cost_usd"] = float(litellm.completion_cost(completion_response=resp) or 0.0)
            except Exception:  # noqa: BLE001 - a model missing from the price map costs "unknown" = 0
                out["cost_usd"] = 0.0
            out["ok"] = True
        except Exception as e:  # noqa: BLE001
            out.update(error_kind="error", error=f"unexpected response: {e}"[:300])
        break
    out["duration_ms"] = round((time.monotonic() - t0) * 1000, 1)
    return out


def handle(req: dict) -> dict:
    # keep litellm's own chatter off stdout (the answer channel)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr
    try:
        try:
            import litellm
        except ImportError:
            from occd.relevance.extras import missing_message

            return {"error": missing_message("llm")}

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        litellm.drop_params = True
        calls = req.get("calls") or []
        conc = max(1, min(int(req.get("concurrency") or 4), 8, len(calls) or 1))
        if conc == 1:
            results = [_one(litellm, req, c) for c in calls]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(conc) as ex:
                results = list(ex.map(lambda c: _one(litellm, req, c), calls))
    finally:
        sys.stdout = real_stdout
    return {"results": results, "rss_kb": _rss_kb()}


def main() -> int:
    try:
        req = json.loads(sys.stdin.read() or "{}")
    except ValueError as e:
        sys.stdout.write(json.dumps({"error": f"bad request: {e}"}) + "\n")
        return 2
    try:
        ans = handle(req)
    except Exception as e:  # noqa: BLE001
        ans = {"error": f"{type(e).__name__}: {e}"[:500]}
    sys.stdout.write(json.dumps(ans) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
