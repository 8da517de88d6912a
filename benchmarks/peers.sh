#!/usr/bin/env bash
# Install the peers of the `tracking` benchmark scenario into benchmarks/.peers/ (git-ignored), never into the
# project's venv: promptfoo (npm) and inspect-ai (pip, in its own venv, with the openai SDK its openai-api/
# provider needs). `make bench` measures them only when they are installed here; nothing is committed.
#
#   bash benchmarks/peers.sh            # or: make bench-peers (~3 min, ~1.8 GB on disk)
#   PEERS_DIR=/elsewhere bash benchmarks/peers.sh   (then run the bench with the same PEERS_DIR)
set -euo pipefail
cd "$(dirname "$0")/.."
PEERS_DIR="${PEERS_DIR:-benchmarks/.peers}"
PROMPTFOO_VERSION="${PROMPTFOO_VERSION:-0.121.20}"
INSPECT_VERSION="${INSPECT_VERSION:-0.3.285}"
OPENAI_VERSION="${OPENAI_VERSION:-3.57.0}"  # the SDK inspect-ai's openai-api/ provider drives (measured with it)
PYTHON="${PYTHON:-python3}"

# no telemetry, no update checks, no funding/audit chatter during the install itself
export PROMPTFOO_DISABLE_TELEMETRY=1 PROMPTFOO_DISABLE_UPDATE=1 NPM_CONFIG_FUND=false NPM_CONFIG_AUDIT=false \
       NPM_CONFIG_UPDATE_NOTIFIER=false PIP_DISABLE_PIP_VERSION_CHECK=1

mkdir -p "$PEERS_DIR/promptfoo"
npm install --prefix "$PEERS_DIR/promptfoo" --no-save --loglevel=error "promptfoo@$PROMPTFOO_VERSION"

"$PYTHON" -m venv "$PEERS_DIR/inspect-venv"
"$PEERS_DIR/inspect-venv/bin/python" -m pip install --quiet --upgrade pip
"$PEERS_DIR/inspect-venv/bin/python" -m pip install --quiet "inspect-ai==$INSPECT_VERSION" \
    "openai${OPENAI_VERSION:+==$OPENAI_VERSION}"

echo "promptfoo $("$PEERS_DIR/promptfoo/node_modules/.bin/promptfoo" --version 2>/dev/null | tail -1)," \
     "inspect-ai $("$PEERS_DIR/inspect-venv/bin/python" -c 'import inspect_ai; print(inspect_ai.__version__)')" \
     "in $PEERS_DIR"
