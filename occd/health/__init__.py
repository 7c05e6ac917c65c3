"""Checks of what occd keeps and of what it did: `occd check` (backups, archives, the ledger) and the
verifications that an action took effect (rotation resets, strip predictions, the lean view)."""
