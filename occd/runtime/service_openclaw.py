"""Which `openclaw` the background service runs, decided when it is installed.

A service manager starts occd with its own short PATH (systemd's user manager: /usr/local/bin:/usr/bin:/bin…),
so an `openclaw` installed under nvm or a per-user npm prefix (~/.local/bin, ~/.npm-global/bin) is found in the
user's shell and not by the service: every gateway call and the lean view would fail only when run as a service.
`occd service install` therefore resolves `openclaw` in the installing shell (OCCD_OPENCLAW_BIN wins, as
everywhere in occd) and writes it into the unit / plist as OCCD_OPENCLAW_BIN, with a PATH that holds its folder
and, when it is a script started through `#!/usr/bin/env node`, node's folder too. `occd doctor` compares what
the service will use with what the shell finds (compare()).

Pure functions of an environment mapping; no import of occd.runtime.service (it imports this module).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass

from occd.paths import display_path

# What the systemd user manager gives a unit that sets no PATH (systemd.exec(5), "Environment variables").
SYSTEMD_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class OpenClawBin:
    path: str                      # absolute, as found (a link is kept: npm updates replace its target)
    source: str                    # "OCCD_OPENCLAW_BIN" or "PATH"
    interpreter: str | None = None  # "node" when the script starts with `#!/usr/bin/env node`
    interpreter_dir: str | None = None
    problem: str | None = None     # e.g. the interpreter is not on PATH

    @property
    def dirs(self) -> list[str]:
        """The folders the service's PATH needs: openclaw's, then its interpreter's."""
        return [os.path.dirname(self.path)] + ([self.interpreter_dir] if self.interpreter_dir else [])

    def to_json(self) -> dict:
        return {"bin": self.path, "source": self.source, "interpreter": self.interpreter,
                "interpreterDir": self.interpreter_dir, "problem": self.problem}


def env_interpreter(path: str) -> str | None:
    """The program a script's `#!/usr/bin/env [-S] [VAR=x] PROG …` line looks up on PATH, else None."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words or os.path.basename(words[0]) != "env":
        return None
    for w in words[1:]:
        if w.startswith("-") or "=" in w:  # env's options (-S) and assignments
            continue
        return w
    return None


def resolve_openclaw(environ=None, which=shutil.which) -> OpenClawBin | None:
    """The `openclaw` this environment runs: OCCD_OPENCLAW_BIN when set, else the first on its PATH."""
    env = os.environ if environ is None else environ
    search = env.get("PATH")
    explicit = env.get("OCCD_OPENCLAW_BIN")
    if explicit:
        found = os.path.expanduser(explicit) if os.sep in explicit else which(explicit, path=search)
        source = "OCCD_OPENCLAW_BIN"
    else:
        found, source = which("openclaw", path=search), "PATH"
    if not found:
        return None
    path = os.path.abspath(found)
    interp = env_interpreter(path)
    if not interp:
        return OpenClawBin(path, source)
    where = which(interp, path=search)
    if not where:
        return OpenClawBin(path, source, interp, None, f"it starts with `env {interp}` and no {interp} is on PATH")
    return OpenClawBin(path, source, interp, os.path.dirname(os.path.abspath(where)))


def service_path(openclaw: OpenClawBin | None, occd_dir: str, base: str, user_bin: str | None = None) -> str:
    """The PATH written into the unit / plist: openclaw's folder (and node's), occd's own, the user's
    ~/.local/bin (the XDG folder for per-user programs: pipx, pip --user, an npm prefix of ~/.local put them
    there, so an openclaw installed there after the service is found too), then `base`."""
    dirs = (openclaw.dirs if openclaw else []) + [occd_dir] + ([user_bin] if user_bin else []) + base.split(":")
    out: list[str] = []
    for d in dirs:
        if d and d not in out:
            out.append(d)
    return ":".join(out)


def _same(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def compare(service_env: dict[str, str], shell: OpenClawBin | None, which=shutil.which) -> dict:
    """What the service will run against what this shell finds. `service_env`: the variables the service gets
    (its unit's or plist's environment and the env file; PATH defaults to the manager's). Returns
    {status: ok|warn|fail, detail, hint, service: OpenClawBin-json or None, shell: … or None}."""
    env = dict(service_env)
    env.setdefault("PATH", SYSTEMD_DEFAULT_PATH)
    svc = resolve_openclaw(env, which)
    data = {"service": svc.to_json() if svc else None, "shell": shell.to_json() if shell else None}

    def out(status, detail, hint=None):
        return {"status": status, "detail": detail, "hint": hint, **data}

    sp, hp = (display_path(svc.path) if svc else None), (display_path(shell.path) if shell else None)
    again = "`occd service install` again (from the shell that runs openclaw) writes it into the service"
    if svc is None:
        if shell is None:
            return out("warn", "no openclaw found, neither by the service nor by this shell",
                       "install OpenClaw (gateway calls and the lean view need it), then `occd service install`")
        return out("fail", f"the service finds no openclaw; this shell runs {hp}", again)
    if not os.path.isfile(svc.path) or not os.access(svc.path, os.X_OK):
        return out("fail", f"the service's openclaw {sp} does not exist or is not executable", again)
    if svc.problem:
        return out("fail", f"the service runs {sp}, but {svc.problem} in the service's environment", again)
    if shell is None:
        return out("warn", f"the service runs {sp}; this shell finds no openclaw")
    if not _same(svc.path, shell.path):
        return out("warn", f"the service runs {sp}, this shell {hp}",
                   "`occd service install` again makes the service use the shell's")
    return out("ok", f"the service runs {sp}, as this shell does")
