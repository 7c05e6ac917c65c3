"""Tool stripping: presets → a strip plan (pure), and the truncation rules. See occd.cleaner.plan."""

from occd.cleaner.plan import EntryEdit, StripPlan, TurnRange, check_running, plan_strip
from occd.cleaner.truncate import truncate_args, truncate_result_content

# Presets (names -> keep_turns_with_tools / truncate_percent) live in occd.config (BUILTIN_PRESETS, resolve_preset).

__all__ = ["EntryEdit", "StripPlan", "TurnRange", "check_running", "plan_strip",
           "truncate_args", "truncate_result_content"]
