"""The check-data job (`check.read_data_interval_days`, default 30; 0 = never): `occd check --read-data` —
the cheap check plus every backup and archive loaded as its session's transcript."""

from __future__ import annotations


def run(ctx) -> dict:
    from occd.jobs.check import run_form

    return run_form(ctx, read_data=True)
