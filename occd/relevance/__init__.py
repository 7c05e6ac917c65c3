"""Session relevance: discovery (OpenClaw agents of both eras + Claude Code), project status (git/gh),
scoring and selection, the litellm worker (a separate short-lived process), and redaction.

Light to import: litellm is only ever imported by `occd.relevance.worker`, which runs in its own process.
"""
