"""Runtime: the daemon (scheduler, single-instance lock, signals, status file), the background service, logging."""
