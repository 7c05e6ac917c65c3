"""Report: what occd saw and did, read back for people and --json (status, session info, backups)."""
