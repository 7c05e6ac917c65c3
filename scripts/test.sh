#!/usr/bin/env bash
# Installs everything the tests need on a fresh machine (Python 3.11+, pip, node) and runs them.
# Idempotent: a second run reuses .venv and the installed oracle. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip setuptools wheel >/dev/null
.venv/bin/python -m pip install -q -e '.[test]'

# OpenClaw's own transcript loader (../shared/oracle), installed outside the repo with npm ci.
SHARED=${OCCD_SHARED_DIR:-$(cd .. && pwd)/shared}
export OCCD_SHARED_DIR="$SHARED"
export ORACLE_DIR=${ORACLE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/occd-oracle}
if [ -f "$SHARED/oracle/package-lock.json" ]; then
  if ! cmp -s "$SHARED/oracle/package-lock.json" "$ORACLE_DIR/package-lock.json" 2>/dev/null \
     || [ ! -d "$ORACLE_DIR/node_modules/@mariozechner/pi-coding-agent" ]; then
    mkdir -p "$ORACLE_DIR"
    cp "$SHARED/oracle/package.json" "$SHARED/oracle/package-lock.json" "$ORACLE_DIR/"
    (cd "$ORACLE_DIR" && npm ci --no-audit --no-fund --loglevel=error)
  fi
fi
# systemd-analyze verifies the service unit in the tests (Debian package "systemd"); install it when we can.
if ! command -v systemd-analyze >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && apt-get install -y -qq --no-install-recommends systemd) >/dev/null 2>&1 || true
fi
# Real OpenClaw releases for the end-to-end tests are installed on first use by ../shared/openclaw-e2e/setup.sh;
# OCCD_E2E_RELEASES chooses them (default: 2026.7.1 2026.7.35 2026.8.1 2026.9.5 2026.9.6, see tests/e2e_harness.py)
export OC_CACHE=${OC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/occd-openclaw-e2e}
# ... and the real Claude Code CLI (../shared/claude-code-e2e/setup.sh) into CC_CACHE
export CC_CACHE=${CC_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/occd-claude-code-e2e}

exec .venv/bin/python -m pytest "$@"
