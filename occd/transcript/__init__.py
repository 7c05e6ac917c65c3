"""The OpenClaw transcript format: streaming scan, tree, analysis, byte-preserving rewrite, atomic write.

See docs/design.md ("transcript") and ../shared/docs/openclaw-format.md. Only orjson is imported here.
"""

from occd.transcript.analysis import (RangeSummary, analyze, context_tokens, context_tokens_from_tail,
                                      estimated_tokens, summarize_range, tool_pairing)
from occd.transcript.invariants import check_invariants
from occd.transcript.jsonl import iter_objects
from occd.transcript.model import CURRENT_VERSION, EntryMeta, Malformed, Transcript, Turn, file_stat
from occd.transcript.rewrite import atomic_write, clone_header, rewrite, serialize
from occd.transcript.scan import DEFAULT_MAX_LINE_BYTES, scan

__all__ = [
    "CURRENT_VERSION", "DEFAULT_MAX_LINE_BYTES", "EntryMeta", "Malformed", "RangeSummary", "Transcript", "Turn",
    "analyze", "atomic_write", "check_invariants", "clone_header", "context_tokens", "context_tokens_from_tail",
    "estimated_tokens", "file_stat", "iter_objects", "rewrite", "scan", "serialize", "summarize_range", "tool_pairing",
]
