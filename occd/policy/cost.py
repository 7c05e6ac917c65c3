"""What an action costs and saves once the provider's prompt cache is priced (issue 20). Pure functions.

Providers cache a prompt's prefix: a cache read costs ~0.1x the input price, a write ~1.25x (Anthropic; OpenAI has
no write premium). Anything that rewrites the history (a strip, a rotation, a lean-view boundary move, a
compaction) turns the next prompt from the first changed token on into a cache write.

For one rewrite, with P the prompt the model is sent (tokens), R the tokens the action takes out of it (0 <= R <= P),
b the tokens of P before the first change (still a cache read; 0 <= b <= P - R), H the turns it saves on and r the
model requests a turn makes (every request of a run reads the whole prompt: a run of 12 calls is 13; at least 1):
- cache warm (the session was active within the cache lifetime): the next prompt would have been a read of P;
  now it is b read + (P - R - b) written: extra = (P - R - b) * (write - read) - R * read. Each later request
  reads R fewer tokens: R * read. net = H * r * R * read - (P - R - b) * (write - read);
- cache expired: the next prompt is a write of everything either way, so the rewrite is free:
  net = R * write + (H * r - 1) * R * read.
H is the turns until the next compaction (or rotation) would have rewritten the prompt anyway, at most
`horizon_turns`. A prevented compaction also saves what it would have cost: the summary call (the history it
summarizes at the input price, its summary at the output price) and the rebuilt prompt (a cache write instead of
a read).

Prices (USD per million tokens): OpenClaw's models config (`models.providers.<p>.models[].cost`: input,
cacheRead, cacheWrite, output), else litellm's price map read from its JSON file (never imported), else
DEFAULT_PRICES (Anthropic Sonnet-class list prices). A missing cache price is derived from the input price with the
provider's usual ratio (read 0.1x, write 1.25x).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

DEFAULT_PRICES = {"input": 3.00, "cacheRead": 0.30, "cacheWrite": 3.75, "output": 15.00}
READ_RATIO, WRITE_RATIO, OUTPUT_RATIO = 0.1, 1.25, 5.0
DEFAULT_TTL_S = 300.0           # Anthropic's default prompt-cache lifetime (OpenAI: 5-10 min, up to an hour)
DEFAULT_HORIZON_TURNS = 10      # at most this many following turns are counted
DEFAULT_SUMMARY_TOKENS = 2000   # what a compaction's summary call writes


@dataclass(frozen=True)
class Prices:
    input: float
    cacheRead: float
    cacheWrite: float
    output: float
    source: str  # "openclaw" | "litellm" | "default"

    def as_dict(self) -> dict:
        return asdict(self)


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0 and math.isfinite(v) else None


def complete(input_price: float, read=None, write=None, output=None, source: str = "default") -> Prices:
    """Prices with the missing cache/output figures derived from the input price."""
    return Prices(input=input_price, cacheRead=read if read is not None else input_price * READ_RATIO,
                  cacheWrite=write if write is not None else input_price * WRITE_RATIO,
                  output=output if output is not None else input_price * OUTPUT_RATIO, source=source)


def _ids(model: str | None) -> list[str]:
    if not model:
        return []
    return [model] + ([model.split("/", 1)[1]] if "/" in model else [])


def from_openclaw(cfg: dict | None, model: str | None) -> Prices | None:
    models = (cfg or {}).get("models") if isinstance(cfg, dict) else None
    provs = models.get("providers") if isinstance(models, dict) else None
    if not isinstance(provs, dict) or not model:
        return None
    ids = _ids(model)
    for p in provs.values():
        for m in (p.get("models") if isinstance(p, dict) and isinstance(p.get("models"), list) else []):
            if isinstance(m, dict) and m.get("id") in ids and isinstance(m.get("cost"), dict):
                c = m["cost"]
                inp = _num(c.get("input"))
                if inp is not None:
                    return complete(inp, _num(c.get("cacheRead")), _num(c.get("cacheWrite")), _num(c.get("output")),
                                    "openclaw")
    return None


def from_litellm(table: dict | None, model: str | None) -> Prices | None:
    """From litellm's price map (the parsed JSON file: per-token USD)."""
    if not isinstance(table, dict):
        return None
    for k in _ids(model):
        e = table.get(k)
        if not isinstance(e, dict):
            continue
        inp = _num(e.get("input_cost_per_token"))
        if inp is None:
            continue
        per_m = lambda key: (lambda v: v * 1e6 if v is not None else None)(_num(e.get(key)))  # noqa: E731
        return complete(inp * 1e6, per_m("cache_read_input_token_cost"), per_m("cache_creation_input_token_cost"),
                        per_m("output_cost_per_token"), "litellm")
    return None


def prices(cfg: dict | None, model: str | None, litellm_table: dict | None = None) -> Prices:
    return (from_openclaw(cfg, model) or from_litellm(litellm_table, model)
            or Prices(**DEFAULT_PRICES, source="default"))


def cache_ttl(ttls: dict | None, provider: str | None, model: str | None) -> float:
    """The cache lifetime setting for a model: "provider/model", then "model", then "provider", then "default"."""
    t = ttls or {}
    keys = [f"{provider}/{model}" if provider and model else None, model, provider, "default"]
    for k in keys:
        v = _num(t.get(k)) if k else None
        if v is not None:
            return v
    return DEFAULT_TTL_S


def model_cache_ttl(ttls: dict | None, model: str | None) -> float:
    """cache_ttl for a model as OpenClaw names it ("provider/model", or a bare model without a provider)."""
    provider = model.split("/", 1)[0] if isinstance(model, str) and "/" in model else None
    return cache_ttl(ttls, provider, model)


def cache_warm(last_activity: float | None, now: float, ttl_s: float) -> bool:
    """The provider still holds the prompt: the session was active within the cache lifetime (unknown: warm)."""
    return last_activity is None or now - last_activity < ttl_s


def turns_until(budget: float | None, prompt: float, growth: float | None, horizon: int) -> int:
    """Turns until a prompt growing by `growth` per turn reaches `budget` (the next compaction), at most
    `horizon`; at least 1 (the next turn)."""
    if not budget or not growth or growth <= 0:
        return horizon
    return max(1, min(horizon, math.ceil((budget - prompt) / growth)))


@dataclass(frozen=True)
class Effect:
    promptTokens: int       # P: what the model was being sent
    removedTokens: int      # R, bounded by P
    prefixKeptTokens: int   # b, bounded by P - R
    turns: int              # H
    warm: bool
    writeUsd: float         # the extra cache write the rewrite causes on the next turn (<= 0 when the cache expired)
    savedUsd: float         # what the smaller prompt saves over the H turns
    compactionUsd: float    # a prevented compaction's summary call and rebuilt prompt
    netUsd: float           # savedUsd + compactionUsd - writeUsd (negative: the action cost money)

    def as_dict(self) -> dict:
        d = asdict(self)
        for k in ("writeUsd", "savedUsd", "compactionUsd", "netUsd"):
            d[k] = round(d[k], 6)
        return d


def compaction_cost(history_tokens: float, rebuilt_tokens: float, p: Prices,
                    summary_tokens: float = DEFAULT_SUMMARY_TOKENS) -> float:
    """A compaction: the summary call reads the history (input price) and writes a summary (output price); the
    next prompt, rebuilt around the summary, is all a cache write where it would have been a read."""
    h = max(0.0, history_tokens)
    rebuilt = max(0.0, min(rebuilt_tokens, h))
    return (h * p.input + summary_tokens * p.output + rebuilt * (p.cacheWrite - p.cacheRead)) / 1e6


def rewrite_effect(prompt_tokens: float, removed_tokens: float, p: Prices, *, prefix_kept_tokens: float = 0,
                   turns: int = DEFAULT_HORIZON_TURNS, warm: bool = True, prevents_compaction: bool = False,
                   compaction_history_tokens: float | None = None, summary_tokens: float = DEFAULT_SUMMARY_TOKENS,
                   requests_per_turn: float = 1.0) -> Effect:
    """The cost and saving of one rewrite of the prompt (module doc). Every token figure is bounded by what the
    model was sent: 0 <= R <= P, 0 <= b <= P - R. `requests_per_turn`: the model requests a turn makes (a run of
    12 calls is 13), each of which reads R fewer tokens; the rewrite is written once, by the first."""
    P = max(0.0, float(prompt_tokens or 0))
    R = max(0.0, min(float(removed_tokens or 0), P))
    b = max(0.0, min(float(prefix_kept_tokens or 0), P - R))
    H = max(1, int(turns))
    reads = H * requests_a_turn(requests_per_turn)
    if warm:
        write = ((P - R - b) * (p.cacheWrite - p.cacheRead)) / 1e6
        saved = reads * R * p.cacheRead / 1e6
    else:
        write = -R * p.cacheWrite / 1e6 + R * p.cacheRead / 1e6  # the next turn writes less than it would have
        saved = reads * R * p.cacheRead / 1e6
    comp = 0.0
    if prevents_compaction:
        hist = P if compaction_history_tokens is None else max(P, float(compaction_history_tokens))
        comp = compaction_cost(hist, P - R, p, summary_tokens)
    return Effect(promptTokens=round(P), removedTokens=round(R), prefixKeptTokens=round(b), turns=H, warm=warm,
                  writeUsd=write, savedUsd=saved, compactionUsd=comp, netUsd=saved + comp - write)


def pays(effect: Effect, *, prevents_compaction: bool = False, prevents_block: bool = False) -> bool:
    """Act only when it pays: a rewrite that costs more in cache writes than it saves before the next compaction is
    not done, unless it prevents a compaction or a block. After the cache expired a rewrite is free (its net is
    never negative then)."""
    if prevents_compaction or prevents_block:
        return True
    return effect.netUsd >= 0


@dataclass(frozen=True)
class Economics:
    """What the strip decision needs to price a rewrite: prices, the cache lifetime, the session's last activity."""
    prices: Prices
    ttl_s: float = DEFAULT_TTL_S
    horizon_turns: int = DEFAULT_HORIZON_TURNS
    summary_tokens: int = DEFAULT_SUMMARY_TOKENS


def strip_verdict(details: dict, econ: Economics, *, last_activity: float | None, now: float,
                  prevents_compaction: bool) -> tuple[Effect, dict]:
    """A budget strip's effect (from its decision details: predictedPromptTokens P, removedTokens R,
    overheadTokens b, growthTokens, promptBudget) and the record the ledger keeps of it (`details["cost"]`)."""
    P = details.get("predictedPromptTokens") or 0
    warm = cache_warm(last_activity, now, econ.ttl_s)
    turns = turns_until(details.get("promptBudget"), P, details.get("growthTokens"), econ.horizon_turns)
    requests = requests_a_turn(details.get("requestsPerTurn"))
    eff = rewrite_effect(P, details.get("removedTokens") or 0, econ.prices,
                         prefix_kept_tokens=details.get("overheadTokens") or 0, turns=turns, warm=warm,
                         prevents_compaction=prevents_compaction,
                         compaction_history_tokens=details.get("promptBudget"), summary_tokens=econ.summary_tokens,
                         requests_per_turn=requests)
    rec = {"prices": econ.prices.as_dict(), "ttlSeconds": econ.ttl_s, "warm": warm, "promptTokens": eff.promptTokens,
           "prefixKeptTokens": eff.prefixKeptTokens, "turns": eff.turns, "requestsPerTurn": requests,
           "preventsCompaction": prevents_compaction,
           "compactionHistoryTokens": details.get("promptBudget"), "summaryTokens": econ.summary_tokens,
           "effect": eff.as_dict()}
    return eff, rec


def requests_a_turn(v) -> float:
    """A requests-a-turn figure (at least 1), or 1 for anything else: what records before it assumed."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 1 else 1.0


def record_fields(rec: dict | None) -> dict:
    """The pricing part of an action's `before` record (a rotation's: occd.policy.savings prices it from the
    prompt the model was going to be sent and the recorded cost inputs), or nothing when it was not priced."""
    return {"promptTokens": rec["promptTokens"], "cost": rec} if isinstance(rec, dict) and rec.get("promptTokens") else {}
