"""The built-in demo: an OpenClaw state written to a temp dir (story) and occd run on it (run)."""
