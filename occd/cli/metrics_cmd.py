"""`occd metrics`: what the daemon did and how it runs, for Prometheus (occd.runtime.metrics)."""

from __future__ import annotations

import sys

import click

from occd.cli.common import emit_json, handle_errors, json_option, load_settings_from_ctx


@click.command("metrics")
@click.option("--format", "fmt", type=click.Choice(["openmetrics", "prometheus"]), default="openmetrics",
              show_default=True, help="OpenMetrics, or Prometheus' text format 0.0.4 (what node_exporter reads).")
@json_option
@handle_errors
def metrics_cmd(fmt, as_json):
    """Print occd's metrics: compactions seen, actions by kind and outcome, tokens and money saved (net, as
    `occd stats`), breakers, open problems, watched and polled folders, cycle durations and the time from a run's
    end to occd's decision (histograms the running daemon keeps), occd_build_info.

    The daemon writes the same after each cycle to daemon.metrics_textfile when set (node_exporter's textfile
    collector).

    \b
    Examples:
      occd metrics
      occd metrics --format prometheus > /var/lib/node_exporter/textfile/occd.prom
      occd metrics --json | jq '.metrics[].name'
    """
    from occd.runtime import metrics

    reg = metrics.current(load_settings_from_ctx())
    if as_json:
        emit_json({"metrics": metrics.as_json(reg)})
        return
    sys.stdout.buffer.write(metrics.render(reg, fmt))
    sys.stdout.flush()
