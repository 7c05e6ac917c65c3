"""Health: `occd doctor`'s registry of checks (the result type is occd.checks.CheckResult)."""
