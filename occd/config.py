"""occd's settings: one model (plain dataclasses, validated here), one source of truth for defaults and descriptions.

Precedence (lowest to highest): defaults < TOML config file < OCCD_* environment < command-line flags.
Nested fields use `__` in the environment: OCCD_POLICY__MODE=act, OCCD_LLM__MODEL=ollama/llama3.
Per-agent overrides live under [agents.<id>] and are merged over [policy] by `policy_for(agent)`.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, Literal

from occd import paths
from occd.errors import OccdError

# Settings are plain dataclasses with a small validator below, not pydantic models: building a dozen pydantic
# model classes and importing pydantic-settings cost ~0.15 s of CPU, on every command, for a handful of values.
# `Field(default, description=..., ge=..., le=...)` and `model_dump`/`model_validate` keep pydantic's spelling.

_MISSING = dataclasses.MISSING


def Field(default: Any = _MISSING, *, default_factory: Any = _MISSING, description: str | None = None,
          ge: float | None = None, le: float | None = None) -> Any:
    """A dataclass field with a description and bounds (checked by model_validate)."""
    meta = {"description": description, "ge": ge, "le": le}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    if isinstance(default, (list, dict, set)):
        return dataclasses.field(default_factory=lambda d=default: type(d)(d), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


class ValidationError(ValueError):
    """A setting with a bad value or an unknown name. `loc` is its dotted path."""

    def __init__(self, loc: str, msg: str, hint: str | None = None):
        super().__init__(f"{loc}: {msg}")
        self.loc, self.msg, self.hint = loc, msg, hint


class BaseModel:
    """Subclasses become dataclasses (kwargs constructor, defaults, equality) with pydantic-like helpers."""

    _extra_forbid = True

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        cls.__annotations__.pop("model_config", None)
        cls.__annotations__ = {k: v for k, v in cls.__annotations__.items() if not k.startswith("_")}
        dataclasses.dataclass(cls)

    def model_dump(self, *, mode: str = "python", exclude_none: bool = False) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if isinstance(v, BaseModel):
                v = v.model_dump(mode=mode, exclude_none=exclude_none)
            elif isinstance(v, dict):
                v = {k: (x.model_dump(mode=mode, exclude_none=exclude_none) if isinstance(x, BaseModel) else x)
                     for k, x in v.items()}
            elif isinstance(v, list):
                v = list(v)
            elif isinstance(v, Path) and mode == "json":
                v = str(v)
            if exclude_none and v is None:
                continue
            out[f.name] = v
        return out

    @classmethod
    def model_validate(cls, data: Any, loc: str = ""):
        return _convert(cls, data, loc)

    @classmethod
    def model_field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


def _convert(tp: Any, v: Any, loc: str) -> Any:
    """Check and coerce `v` to the annotation `tp` (lax, like pydantic: "60" is a fine float from the env)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if v is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _convert(a, v, loc)
            except ValidationError as e:
                errors.append(e)
        raise errors[0]
    if origin is Literal:
        allowed = typing.get_args(tp)
        if v not in allowed:
            raise ValidationError(loc, f"{v!r} is not one of {', '.join(map(str, allowed))}")
        return v
    if origin is list:
        if isinstance(v, str):
            v = _json_or(v, [x.strip() for x in v.split(",") if x.strip()])
        if not isinstance(v, (list, tuple)):
            raise ValidationError(loc, f"expected a list, got {v!r}")
        (item,) = typing.get_args(tp) or (Any,)
        return [_convert(item, x, f"{loc}[{i}]") for i, x in enumerate(v)]
    if origin is dict:
        if isinstance(v, str):
            v = _json_or(v, None)
        if not isinstance(v, dict):
            raise ValidationError(loc, f"expected a table, got {v!r}")
        _k, val = typing.get_args(tp)
        return {str(k): _convert(val, x, f"{loc}.{k}") for k, x in v.items()}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        if isinstance(v, tp):
            return v
        if isinstance(v, str):
            v = _json_or(v, None)
        if not isinstance(v, dict):
            raise ValidationError(loc, f"expected a table, got {v!r}")
        names = {f.name: f for f in dataclasses.fields(tp)}
        for k in v:
            if k not in names:
                near = difflib.get_close_matches(str(k), list(names), n=1, cutoff=0.5)
                where = f"{loc}.{k}" if loc else str(k)
                raise ValidationError(where, "unknown setting",
                                      f"did you mean {(loc + '.') if loc else ''}{near[0]}?" if near else
                                      "known here: " + ", ".join(names))
        hints = _hints(tp)
        kw = {}
        for k, x in v.items():
            f = names[k]
            sub = f"{loc}.{k}" if loc else k
            val = _convert(hints[k], x, sub)
            lo, hi = f.metadata.get("ge"), f.metadata.get("le")
            if lo is not None and val is not None and val < lo:
                raise ValidationError(sub, f"must be at least {lo:g}, not {val}")
            if hi is not None and val is not None and val > hi:
                raise ValidationError(sub, f"must be at most {hi:g}, not {val}")
            kw[k] = val
        return tp(**kw)
    if tp is Any:
        return v
    if tp is bool:
        if isinstance(v, bool):
            return v
        if isinstance(v, (int, str)) and str(v).strip().lower() in _TRUE | _FALSE:
            return str(v).strip().lower() in _TRUE
        raise ValidationError(loc, f"expected true or false, got {v!r}")
    if tp is int:
        if isinstance(v, bool):
            raise ValidationError(loc, f"expected a whole number, got {v!r}")
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValidationError(loc, f"expected a whole number, got {v!r}") from None
        if f != int(f):
            raise ValidationError(loc, f"expected a whole number, got {v!r}")
        return int(f)
    if tp is float:
        if isinstance(v, bool):
            raise ValidationError(loc, f"expected a number, got {v!r}")
        try:
            return float(v)
        except (TypeError, ValueError):
            raise ValidationError(loc, f"expected a number, got {v!r}") from None
    if tp is str:
        if isinstance(v, (str, int, float)) and not isinstance(v, bool):
            return str(v)
        raise ValidationError(loc, f"expected a string, got {v!r}")
    if tp is Path:
        if isinstance(v, (str, Path)):
            return Path(v).expanduser()
        raise ValidationError(loc, f"expected a path, got {v!r}")
    raise TypeError(f"unsupported setting type {tp!r} at {loc}")  # pragma: no cover


def _json_or(text: str, fallback: Any) -> Any:
    t = text.strip()
    if t[:1] in "[{":
        try:
            return json.loads(t)
        except ValueError:
            pass
    return fallback


class PresetConfig(BaseModel):
    keep_turns_with_tools: int = Field(ge=0)
    truncate_percent: float = Field(0, ge=0, le=100)


class BreakerSettings(BaseModel):
    max_actions: int = Field(6, description="actions per agent and kind within window_minutes before the breaker trips")
    max_failures: int = Field(3, description="failures within window_minutes before the breaker trips")
    window_minutes: int = Field(30, description="sliding window for counting actions and failures")
    cooloff_minutes: int = Field(60, description="time open before one trial action is allowed (half-open)")
    max_cooloff_minutes: int = Field(24 * 60, description="backoff cap: each failed trial doubles the cool-off")


class RotationSettings(BaseModel):
    enabled: bool = Field(True, description="rotate sessions that keep compacting (act mode only)")
    rotate_at_compactions: int = Field(3, description="compactions that trigger a rotation")
    min_compactions: int = Field(3, description="cooldown: new compactions needed before the next rotation of a key")
    min_minutes: int = Field(30, description="cooldown: minutes before the next rotation of a key")
    old_session_policy: Literal["archive", "delete"] = Field("archive", description="what happens to the old transcript")
    seed_budget_percent: float = Field(15, description="share of the model's context window the seed may use")
    max_rotations: int = Field(3, description="the rotation breaker (like policy.breaker, for rotations): rotations per agent within window_minutes")
    window_minutes: int = Field(30, description="the rotation breaker's window (not policy.breaker.window_minutes)")
    health_turns: int = Field(10, description="a new session compacting within this many turns means the seed was too big")


class PolicySettings(BaseModel):
    mode: Literal["observe", "act"] = Field("observe", description="observe records what it would do; act does it")
    strip_preset: str = Field("default", description="preset the daemon strips with")
    strip_at_context_percent: float = Field(60, description="strip a session when its context use reaches this share of the window")
    min_idle_minutes: float = Field(10, description="only touch sessions idle at least this long")
    max_actions_per_hour: int = Field(6, description="rate limit: automatic actions per agent per hour, all kinds together (policy.breaker counts per kind)")
    exclude: list[str] = Field(default_factory=list, description="session key globs never touched")
    archive_after_days: float = Field(14, description="archive idle sessions older than this whose relevance is low")
    archive_below_relevance: float = Field(0.1, description="relevance under which an old idle session is archived")
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    rotation: RotationSettings = Field(default_factory=RotationSettings)


class DaemonSettings(BaseModel):
    scan_interval_seconds: int = Field(300, ge=5, description="how often the scan job runs")
    prune_interval_hours: float = Field(24, description="how often old backups are pruned")
    maintenance_interval_hours: float = Field(24 * 7, description="how often the ledger is maintained")
    score_interval_seconds: int = Field(3600, description="how often sessions are scored for relevance")
    observation_retention_days: int = Field(400, description="ledger observations older than this are thinned")


class LLMSettings(BaseModel):
    model: str = Field("gpt-4o-mini", description="any litellm model id; ollama/... or an OpenAI-compatible api_base work")
    api_base: str | None = Field(None, description="base URL for a local or OpenAI-compatible server")
    timeout_seconds: float = Field(3.0, description="one scoring call's time limit; then the keyword fallback")
    max_tokens: int = Field(600, description="answer size limit")
    batch_size: int = Field(25, description="sessions per model call")
    resume_threshold: float = Field(0.6, description="score needed to resume rather than start fresh")
    daily_budget_usd: float = Field(0.50, description="model spend per day; then keywords only")
    enabled: bool = Field(True, description="false: always use the keyword fallback")


class AgentOverrides(BaseModel):
    """Any PolicySettings field, per agent (plus the agent's own LLM model)."""

    model_config = {"extra": "forbid"}
    mode: Literal["observe", "act"] | None = None
    strip_preset: str | None = None
    strip_at_context_percent: float | None = None
    min_idle_minutes: float | None = None
    max_actions_per_hour: int | None = None
    exclude: list[str] | None = None
    archive_after_days: float | None = None
    archive_below_relevance: float | None = None
    breaker: BreakerSettings | None = None
    rotation: RotationSettings | None = None
    llm_model: str | None = None


class Settings(BaseModel):
    agent: str | None = Field(None, description="agent used when --agent is not given (else 'main')")
    state_dir: Path | None = Field(None, description="OpenClaw state dir (else resolved as OpenClaw does)")
    preset: str = Field("default", description="preset used by --strip-tools without a value")
    presets: dict[str, PresetConfig] = Field(default_factory=dict, description="custom presets")
    backups_keep: int = Field(5, ge=1, description="backups kept per session")
    idle_seconds: int = Field(120, ge=0, description="a session changed more recently than this is considered active")
    notify_command: str | None = Field(None, description="command run with a JSON summary on stdin after a rotation")
    log_level: str = Field("INFO", description="daemon log level")
    daemon: DaemonSettings = Field(default_factory=DaemonSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    agents: dict[str, AgentOverrides] = Field(default_factory=dict, description="per-agent policy overrides")
    llm: LLMSettings = Field(default_factory=LLMSettings)

    # set by load_settings(); not settings
    _config_path: Path | None = None
    _sources: dict[str, str] = {}

    def policy_for(self, agent: str) -> PolicySettings:
        over = self.agents.get(agent)
        if over is None:
            return self.policy
        kw = {k: v for k, v in dataclasses.asdict(over).items() if v is not None and k != "llm_model"}
        for k in ("breaker", "rotation"):
            if k in kw:
                kw[k] = getattr(over, k)
        return dataclasses.replace(self.policy, **kw)

    def llm_model_for(self, agent: str | None) -> str:
        over = self.agents.get(agent) if agent else None
        return (over.llm_model if over and over.llm_model else None) or self.llm.model

    @property
    def config_path(self) -> Path | None:
        return self._config_path


ENV_PREFIX = "OCCD_"
# OCCD_* variables that are not settings (paths, debugging, tests): never read as settings.
_ENV_NOT_SETTINGS = {"home", "config", "debug", "shared_dir"}


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            key = f"{prefix}.{k}" if prefix else str(k)
            if isinstance(v, dict) and v:
                out.update(_flatten(v, key))
            else:
                out[key] = v
    return out


def _drop_none(d: dict) -> dict:
    return {k: (_drop_none(v) if isinstance(v, dict) else v) for k, v in d.items() if v is not None}


def _deep_merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for k, v in over.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def read_toml(path: Path) -> dict:
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def env_settings(env: dict | None = None) -> dict:
    """OCCD_* variables as a nested dict: OCCD_POLICY__MODE=act → {"policy": {"mode": "act"}} (names are
    case-insensitive; `__` nests). Variables whose first part is no top-level setting are not settings."""
    env = os.environ if env is None else env
    top = set(Settings.model_field_names())
    out: dict = {}
    for name, value in env.items():
        if not name.upper().startswith(ENV_PREFIX):
            continue
        parts = [p for p in name[len(ENV_PREFIX):].lower().split("__")]
        if not parts[0] or parts[0] in _ENV_NOT_SETTINGS or parts[0] not in top or not all(parts):
            continue
        d = out
        for p in parts[:-1]:
            d = d.setdefault(p, {}) if isinstance(d.get(p, {}), dict) else {}
        d[parts[-1]] = value
    return out


def load_settings(overrides: dict[str, Any] | None = None, config_path: Path | None = None) -> Settings:
    """Build the effective settings: defaults < TOML file < OCCD_* environment < `overrides` (CLI flags; nested
    dicts allowed; None values ignored). An unknown key anywhere is an error naming the nearest known one."""
    path = config_path or paths.config_file()
    cli = _drop_none(overrides or {})
    shown = paths.display_path(path)
    file_data: dict = {}
    if path.is_file():
        try:
            file_data = read_toml(path)
        except Exception as e:  # a TOML syntax error, an unreadable file
            raise OccdError(f"Cannot read config {shown}: {e}".splitlines()[0], "fix the file or set OCCD_CONFIG",
                            code="BAD_CONFIG") from None
    env = env_settings()
    layers = (("file", file_data), ("env", env), ("flag", cli))
    merged: dict = {}
    for _src, data in layers:
        merged = _deep_merge(merged, data)
    try:
        s = Settings.model_validate(merged)
    except ValidationError as e:
        src = next((name for name, data in reversed(layers) if _has(data, e.loc)), "file")
        where = {"file": shown, "env": "OCCD_" + e.loc.upper().replace(".", "__"), "flag": "the command line"}[src]
        if e.msg == "unknown setting":
            raise OccdError(f"Unknown setting {e.loc} in {where}", e.hint, code="BAD_CONFIG") from None
        raise OccdError(f"Invalid setting {e.loc} in {where}: {e.msg}", e.hint or f"check {where}",
                        code="BAD_CONFIG") from None
    s._config_path = path
    s._sources = {k: src for src, data in layers for k in _flatten(data)}
    return s


def _has(data: dict, loc: str) -> bool:
    d: Any = data
    for part in loc.split("."):
        part = part.split("[")[0]
        if not isinstance(d, dict) or part not in d:
            return False
        d = d[part]
    return True


def effective_items(s: Settings) -> list[tuple[str, Any, str]]:
    """(dotted key, value, source) for every setting, for `occd config show`."""
    flat = _flatten(s.model_dump(mode="json"))
    rows = []
    for k in sorted(flat):
        src = s._sources.get(k)
        if src is None:  # a parent dict set as a whole (e.g. presets.gentle)
            src = next((v for kk, v in s._sources.items() if k.startswith(kk + ".")), "default")
        rows.append((k, flat[k], src))
    return rows


def descriptions(cls: type = None, prefix: str = "") -> dict[str, str]:
    """Dotted setting name → its description (config show, config init)."""
    cls = cls or Settings
    out = {}
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        key = f"{prefix}{f.name}"
        tp = hints[f.name]
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            out.update(descriptions(tp, key + "."))
        elif f.metadata.get("description"):
            out[key] = f.metadata["description"]
    return out


BUILTIN_PRESETS: dict[str, PresetConfig] = {
    "default": PresetConfig(keep_turns_with_tools=20, truncate_percent=50),
    "aggressive": PresetConfig(keep_turns_with_tools=10, truncate_percent=50),
    "extreme": PresetConfig(keep_turns_with_tools=0, truncate_percent=0),
}


def resolve_preset(s: Settings, name: str | None) -> tuple[str, PresetConfig]:
    name = name or s.preset
    if name in s.presets:
        return name, s.presets[name]
    if name in BUILTIN_PRESETS:
        return name, BUILTIN_PRESETS[name]
    names = sorted(set(BUILTIN_PRESETS) | set(s.presets))
    raise OccdError(f"Unknown preset '{name}'", "presets: " + ", ".join(names), code="UNKNOWN_PRESET")
