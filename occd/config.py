"""occd's settings: one pydantic-settings model, one source of truth for defaults and descriptions.

Precedence (lowest to highest): defaults < TOML config file < OCCD_* environment < command-line flags.
Nested fields use `__` in the environment: OCCD_POLICY__MODE=act, OCCD_LLM__MODEL=ollama/llama3.
Per-agent overrides live under [agents.<id>] and are merged over [policy] by `policy_for(agent)`.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel as _PydanticModel, ConfigDict, Field, ValidationError
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from occd import paths
from occd.errors import OccdError


class BaseModel(_PydanticModel):
    """Every settings table: an unknown key is an error (a typo must not silently disable a policy)."""

    model_config = ConfigDict(extra="forbid")


class PresetConfig(BaseModel):
    keep_turns_with_tools: int = Field(ge=0)
    truncate_percent: float = Field(0, ge=0, le=100)
    keep_tool_results: int | None = Field(None, ge=0, description="instead of whole turns, keep the newest this many tool calls with their results (a turn of many calls is cut between its calls)")


class BreakerSettings(BaseModel):
    max_actions: int = Field(60, description="actions per agent and kind within window_minutes before the breaker trips (the budget trigger strips a session at most once per agent turn, so a busy agent can need one every turn)")
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
    max_rotations: int = Field(3, description="breaker: rotations per agent within window_minutes")
    window_minutes: int = Field(30, description="breaker window for rotations")
    health_turns: int = Field(10, description="a new session compacting within this many turns means the seed was too big")


class PolicySettings(BaseModel):
    mode: Literal["observe", "act"] = Field("observe", description="observe records what it would do; act does it")
    strip_preset: str = Field("default", description="preset the daemon strips with")
    strip_at_context_percent: float = Field(60, description="strip a session when its context use reaches this share of the window (sessions without OpenClaw's budget figures: database era)")
    strip_at_budget_percent: float = Field(100, gt=0, description="strip when OpenClaw's predicted estimate at the check occd must get ahead of (the next prompt's; a run later where OpenClaw checks mid-run or the session keeps a turn to spare) reaches this share of its compaction budget (window - reserve); lower strips earlier, and more often")
    strip_target_percent: float = Field(50, gt=0, description="strip down to this share of OpenClaw's compaction budget (the gentlest strip that gets there); rotate when no strip can")
    compact_db_sessions: bool = Field(False, description="database era without the lean view: let the budget trigger ask OpenClaw to compact (a lossy summary, earlier than OpenClaw would make it); off: occd records that it would, and `occd lean enable` is the lossless way")
    cache_ttl_minutes: float = Field(5, ge=0, description="how long the provider keeps a prompt cache (Anthropic 5 min or 1 h, OpenAI ~5-10 min): gentle actions (nothing compacts soon) wait until the session has been quiet this long, so the rewrite costs no cache write; urgent ones (OpenClaw predicted to compact within the next turn or two, a spiral, a blocked session) happen as soon as the run ends")
    keep_recent_turns: int = Field(5, ge=0, description="whether to strip, rotate or do nothing: the newest turns with tool calls a strip to the target keeps (what the model just read); when the target cannot be reached while keeping them, a rotation if a fresh session would reach it, else they stay and the rest is stripped. How deep a strip then goes: keep_recent_results")
    keep_recent_results: int = Field(5, ge=0, description="the newest tool results (calls, not turns: a run of 4 calls makes 4) a strip by the budget trigger keeps whole; it strips everything older, so the next strip (a prompt-cache break) comes as late as it can, and keeps fewer only when these would leave OpenClaw no room for the next run")
    min_idle_minutes: float | None = Field(None, ge=0, description="deprecated: a fixed wait before gentle actions instead of cache_ttl_minutes (unset: cache_ttl_minutes)")
    max_actions_per_hour: int = Field(60, description="automatic actions per agent per hour (emergencies are not counted; the breaker still applies)")
    exclude: list[str] = Field(default_factory=list, description="session key globs never touched")
    active_within_hours: float = Field(72, gt=0, description="sessions in use: strips, rotations and the lean view touch only sessions active within this many hours (a weekend's pause included); older history is left alone, and rotation counts only compactions while occd watched or within this window (idle sessions are the idle-archive's, or `occd rotate SESSION` on request)")
    act_on_unseen: bool = Field(False, description="also act on sessions occd has not seen run: they were there at occd's first look at the state and have not run since occd first saw them (off: a first start over a workstation's history changes nothing; a session is acted on once a run of it ends while occd watches, or after it was last seen, and a session or agent that appears later at once; `occd edit` and `occd rotate` act on any session on request)")
    archive_after_days: float = Field(14, description="archive idle sessions older than this whose relevance is low")
    archive_below_relevance: float = Field(0.1, description="relevance under which an old idle session is archived")
    breaker: BreakerSettings = Field(default_factory=BreakerSettings)
    rotation: RotationSettings = Field(default_factory=RotationSettings)

    def gentle_wait_minutes(self) -> float:
        """How long the session must be quiet before a gentle (non-urgent) action: the prompt cache's lifetime,
        or the deprecated min_idle_minutes where a config still sets it."""
        return self.cache_ttl_minutes if self.min_idle_minutes is None else self.min_idle_minutes


class LeanSettings(BaseModel):
    """The rules the daemon gives a session in the lean view (occd/lean) once its policies decide to act."""

    mode: Literal["drop", "stub"] = Field("drop", description="drop old tool calls and results, or stub the results")
    keep_turns: int = Field(5, ge=0, description="newest turns with tool calls the model always sees whole")
    keep_results: int = Field(5, ge=0, description="of those, keep only the newest this many tool results whole (0: all keep_turns): a run of several calls is cut between its calls, calls sent together stay together")
    batch_turns: int = Field(4, ge=1, description="hide old turns in batches of this many (prompt cache breaks once per batch)")
    never_hide: list[str] = Field(default_factory=lambda: ["memory_*"], description="tools never hidden (a trailing * matches a prefix)")
    keep_results_under_chars: int = Field(300, ge=0, description="results this short stay with their call")
    high_water: float = Field(0.9, gt=0, le=1, description="the plugin moves its (sticky) boundary when the lean prompt plus a turn passes this share of OpenClaw's token budget (a safety net: it moves earlier when a move pays, every ~7 turns with 5 kept)")
    low_water: float = Field(0.3, gt=0, le=1, description="... and then hides old tool turns until the prompt is down to this share (one prompt-cache break per move)")
    requests_per_turn: float | None = Field(None, gt=0, description="model requests per turn, for the plugin's cost rule (how often a hidden turn is not read); unset: each session's own, counted in its newest three tool turns (a run of 12 calls is 13; 2 before its first)")


class CostSettings(BaseModel):
    """The prompt-cache cost model (occd.policy.cost): what a rewrite costs and saves."""

    cache_ttl_seconds: dict[str, float] = Field(default_factory=lambda: {"default": 300.0}, description="prompt-cache lifetime per \"provider/model\", model, provider or \"default\" (Anthropic 300 or 3600, OpenAI ~300-3600)")
    horizon_turns: int = Field(10, ge=1, description="a rewrite's saving is counted on at most this many following turns (fewer when a compaction would come sooner)")
    summary_tokens: int = Field(2000, ge=0, description="what a compaction's summary call writes (its output), for the cost of a prevented compaction")
    only_when_it_pays: bool = Field(True, description="skip a strip that costs more in cache writes than it saves before the next compaction (unless it prevents a compaction or a block)")


class DaemonSettings(BaseModel):
    watch: bool = Field(True, description="wake on what OpenClaw writes (transcripts, run locks, the agent database's -wal, the lean view's stats) and evaluate a session when its run ends; false, or where watching cannot start (inotify limits, a network filesystem): polling")
    settle_seconds: float = Field(2, ge=0, le=60, description="events mode: quiet after OpenClaw's last write (and its run lock released) before the daemon looks")
    scan_interval_seconds: int = Field(300, ge=5, description="events mode: the full scan that runs anyway, as a safety net")
    poll_interval_seconds: int = Field(10, ge=1, description="polling mode (no watching): how often the scan runs")
    prune_interval_hours: float = Field(24, description="how often old backups are pruned")
    maintenance_interval_hours: float = Field(24 * 7, description="how often the ledger is maintained")
    score_interval_seconds: int = Field(3600, description="how often sessions are scored for relevance")
    observation_retention_days: int = Field(400, description="ledger observations older than this are thinned")
    metrics_textfile: str | None = Field(None, description="a file the daemon writes its metrics to after each cycle (atomically, Prometheus text format) for node_exporter's textfile collector, e.g. /var/lib/node_exporter/textfile/occd.prom; `occd metrics` prints the same")


class CheckSettings(BaseModel):
    """`occd check` run by the daemon: the cheap form (size and sha256 of every backup and archive, the ledger's
    integrity) and the --read-data form (each file also loaded as its session's transcript)."""

    interval_days: float = Field(7, description="days between the daemon's checks of backups, archives and the ledger (0: never)")
    read_data_interval_days: float = Field(30, description="days between checks that also load every backup and archive (0: never)")


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

    mode: Literal["observe", "act"] | None = None
    strip_preset: str | None = None
    strip_at_context_percent: float | None = None
    strip_at_budget_percent: float | None = None
    strip_target_percent: float | None = None
    min_idle_minutes: float | None = None
    cache_ttl_minutes: float | None = None
    keep_recent_turns: int | None = None
    keep_recent_results: int | None = None
    max_actions_per_hour: int | None = None
    exclude: list[str] | None = None
    archive_after_days: float | None = None
    archive_below_relevance: float | None = None
    breaker: BreakerSettings | None = None
    rotation: RotationSettings | None = None
    llm_model: str | None = None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OCCD_", env_nested_delimiter="__", extra="forbid")

    agent: str | None = Field(None, description="agent used when --agent is not given (else 'main')")
    state_dir: Path | None = Field(None, description="OpenClaw state dir (else resolved as OpenClaw does)")
    preset: str = Field("default", description="preset used by --strip-tools without a value")
    presets: dict[str, PresetConfig] = Field(default_factory=dict, description="custom presets")
    backups_keep: int = Field(5, ge=1, description="backups kept per session")
    idle_seconds: int = Field(3, ge=0, description="a transcript written more recently than this is not rewritten yet (the end of a run settling); whether a run is in progress is told by OpenClaw's run lock, not by this")
    notify_command: str | None = Field(None, description="command run with a JSON summary on stdin after a rotation")
    log_level: str = Field("INFO", description="daemon log level")
    daemon: DaemonSettings = Field(default_factory=DaemonSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    agents: dict[str, AgentOverrides] = Field(default_factory=dict, description="per-agent policy overrides")
    llm: LLMSettings = Field(default_factory=LLMSettings)
    lean: LeanSettings = Field(default_factory=LeanSettings)
    cost: CostSettings = Field(default_factory=CostSettings)
    check: CheckSettings = Field(default_factory=CheckSettings)

    # set by load_settings(); not a setting
    _config_path: Path | None = None
    _sources: dict[str, str] = {}

    @classmethod
    def settings_customise_sources(cls, settings_cls, init_settings, env_settings, dotenv_settings, file_secret_settings):
        toml_path = _CURRENT_TOML.get("path")
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        if toml_path is not None and toml_path.is_file():
            sources.append(TomlConfigSettingsSource(settings_cls, toml_file=toml_path))
        return tuple(sources)

    def policy_for(self, agent: str) -> PolicySettings:
        over = self.agents.get(agent)
        if over is None:
            return self.policy
        data = self.policy.model_dump()
        for k, v in over.model_dump(exclude_none=True).items():
            if k != "llm_model":
                data[k] = v
        return PolicySettings.model_validate(data)

    def llm_model_for(self, agent: str | None) -> str:
        over = self.agents.get(agent) if agent else None
        return (over.llm_model if over and over.llm_model else None) or self.llm.model

    @property
    def config_path(self) -> Path | None:
        return self._config_path


_CURRENT_TOML: dict[str, Path | None] = {"path": None}


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


def load_settings(overrides: dict[str, Any] | None = None, config_path: Path | None = None) -> Settings:
    """Build the effective settings: defaults < TOML file < OCCD_* environment < `overrides` (CLI flags; nested
    dicts allowed; None values ignored), layered by pydantic-settings. An unknown key anywhere is an error naming
    the nearest known one, and every error says where the value came from (the file, a variable, a flag)."""
    path = config_path or paths.config_file()
    shown = paths.display_path(path)
    cli = _drop_none(overrides or {})
    file_data: dict = {}
    if path.is_file():
        try:
            file_data = _read_toml(path)
        except Exception as e:  # a TOML syntax error, an unreadable file
            raise OccdError(f"Cannot read config {shown}: {e}".splitlines()[0], "fix the file or set OCCD_CONFIG",
                            code="BAD_CONFIG") from None
    _CURRENT_TOML["path"] = path if file_data else None
    try:
        s = Settings(**cli)
    except ValidationError as e:
        raise _config_error(e, shown, file_data, cli) from None
    except Exception as e:  # noqa: BLE001 - pydantic-settings' SettingsError: an OCCD_<SECTION> value that is not JSON
        if type(e).__name__ != "SettingsError":
            raise
        m = re.search(r'field "([^"]+)"', str(e))
        var = f"OCCD_{m.group(1).upper()}" if m else "an OCCD_* variable"
        raise OccdError(f"The environment variable {var} is not a JSON object (a whole section is set that way)",
                        f"unset it, or set one setting: {var}__NAME=value (e.g. OCCD_POLICY__MODE=act)",
                        code="BAD_CONFIG") from None
    finally:
        _CURRENT_TOML["path"] = None
    s._config_path = path
    s._sources = _sources(file_data, cli)
    return s


def _read_toml(path: Path) -> dict:
    import tomllib

    with open(path, "rb") as f:
        return tomllib.load(f)


def _config_error(e: ValidationError, shown: str, file_data: dict, cli: dict) -> OccdError:
    """One line for the first problem: which setting, from where, and (for an unknown key) the nearest known one."""
    err = e.errors()[0]
    loc = [str(x) for x in err.get("loc", ())]
    dotted = ".".join(loc)
    if _has(cli, loc):
        where = "the command line"
    elif _has(file_data, loc):
        where = shown
    else:
        where = "OCCD_" + "__".join(loc).upper()
    if err.get("type") == "extra_forbidden":
        known = _known_at(loc[:-1])
        near = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.5)
        prefix = ".".join(loc[:-1]) + "." if len(loc) > 1 else ""
        hint = f"did you mean {prefix}{near[0]}?" if near else ("known here: " + ", ".join(known) if known else
                                                                "`occd config show` lists every setting")
        return OccdError(f"Unknown setting {dotted} in {where}", hint, code="BAD_CONFIG")
    return OccdError(f"Invalid setting {dotted} in {where}: {err.get('msg')}", f"check {where}; `occd config show` "
                     "lists every setting with its default", code="BAD_CONFIG")


def _has(data: Any, loc: list[str]) -> bool:
    for part in loc:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _known_at(loc: list[str]) -> list[str]:
    """The setting names allowed at a (dotted) place: a table's fields; dict-valued tables (presets, agents) by
    their value model."""
    import typing

    model: Any = Settings
    for part in loc:
        fields = getattr(model, "model_fields", None)
        if fields is None:
            return []
        if part in fields:
            ann = fields[part].annotation
        elif typing.get_origin(model) is dict or model is None:
            return []
        else:  # a key of a dict-valued table (presets.<name>, agents.<id>): the value model
            continue
        args = [a for a in typing.get_args(ann) if a is not type(None)]
        if typing.get_origin(ann) is dict:
            model = args[1] if len(args) == 2 else None
            continue
        model = next((a for a in ([ann] + args) if isinstance(a, type) and issubclass(a, _PydanticModel)), None)
    return sorted(getattr(model, "model_fields", {}) or [])


def _sources(file_data: dict, cli: dict) -> dict[str, str]:
    """For each dotted setting, the source that set it: default, file, env or flag."""
    # a table header whose lines are all commented out (`config init` writes every default so) sets nothing: an
    # empty table is not a setting, or every setting under it would read "file"
    found: dict[str, str] = {k: "file" for k, v in _flatten(file_data).items() if v != {}}
    try:
        env = EnvSettingsSource(Settings, env_prefix="OCCD_", env_nested_delimiter="__")()
        for k in _flatten(env):
            found[k] = "env"
    except Exception:  # noqa: BLE001 - the settings loaded; the sources are informative only
        pass
    for k in _flatten(cli):
        found[k] = "flag"
    return found


def effective_items(s: Settings) -> list[tuple[str, Any, str]]:
    """(dotted key, value, source) for every setting, for `occd config show`; credentials redacted (`redact`)."""
    flat = _flatten(s.model_dump(mode="json"))
    rows = []
    for k in sorted(flat):
        src = s._sources.get(k)
        if src is None:  # a parent dict set as a whole (e.g. presets.gentle)
            src = next((v for kk, v in s._sources.items() if k.startswith(kk + ".")), "default")
        rows.append((k, redact(flat[k]), src))
    return rows


_SECRET_WORDS = r"[\w.-]*(?:key|token|secret|passw(?:or)?d|pwd|sig(?:nature)?|auth|credential)[\w.-]*"
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]+:/{1,2})[^/\s?#@]+(?:@[^/\s?#@]*)*@")  # (a path: one slash)
_QUERY = re.compile(r"(?i)([?&;]" + _SECRET_WORDS + r"=|\b(?:api[_-]?key|access[_-]?token|password|secret)=)"
                    r"[^&#\s'\",;)]+")


def redact(value: Any) -> Any:
    """The one redaction of what occd prints of settings, errors and logs: credentials in URLs (the user:password@
    of https://user:secret@host/v1, and ?key= / api_key= / token= query values) become ***. Strings anywhere in
    lists and dicts; other values as they are."""
    if isinstance(value, str):
        if ":/" not in value and "=" not in value:
            return value
        return _QUERY.sub(r"\1***", _USERINFO.sub(r"\1***@", value))
    if isinstance(value, (list, tuple)):
        return type(value)(redact(v) for v in value)
    if isinstance(value, dict):
        return {k: redact(v) for k, v in value.items()}
    return value


def descriptions(model: Any = None, prefix: str = "") -> dict[str, str]:
    """Dotted setting name -> its description (config show, config init)."""
    import typing

    model = model or Settings
    out: dict[str, str] = {}
    for name, f in model.model_fields.items():
        key = f"{prefix}{name}"
        ann = f.annotation
        sub = next((a for a in [ann, *typing.get_args(ann)] if isinstance(a, type) and issubclass(a, _PydanticModel)),
                   None)
        if sub is not None and typing.get_origin(ann) is not dict:
            out.update(descriptions(sub, key + "."))
        elif f.description:
            out[key] = f.description
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
