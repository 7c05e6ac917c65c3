"""Optional parts of occd, installed as extras: which module each needs, and how to add it.

    pip install 'occd[llm]'   model-rated relevance for `occd select` and the daemon's score job (litellm)
    pip install 'occd[mcp]'   the MCP server (`occd mcp`)

Without them occd works: relevance falls back to keyword overlap and says why; `occd mcp` exits 1 with the line
to install it. `occd doctor` lists what is installed.
"""

from __future__ import annotations

import importlib.util

from occd.errors import OccdError

# extra -> (module it needs, what it adds)
EXTRAS: dict[str, tuple[str, str]] = {
    "llm": ("litellm", "model-rated relevance for `occd select` and the score job (else keyword overlap)"),
    "mcp": ("mcp", "the MCP server, `occd mcp`"),
}


def installed(extra: str) -> bool:
    module = EXTRAS[extra][0]
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def install_hint(extra: str) -> str:
    return f"pip install 'occd[{extra}]' (in occd's environment; pipx: pipx inject occd {EXTRAS[extra][0]})"


def missing_message(extra: str) -> str:
    """One line: what is missing and how to add it."""
    return f"the optional part '{extra}' ({EXTRAS[extra][1]}) is not installed: {install_hint(extra)}"


def require(extra: str, feature: str) -> None:
    """Raise a one-line error (exit 1) when `extra` is not installed."""
    if not installed(extra):
        raise OccdError(f"{feature} needs the optional part '{extra}', which is not installed",
                        install_hint(extra), code="MISSING_EXTRA")
