"""occd: the OpenClaw context-cleaner daemon."""

__version__ = "0.1.0"
