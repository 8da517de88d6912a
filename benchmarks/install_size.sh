#!/usr/bin/env bash
# Install size and time of judgesweep's two installs, each into a fresh venv in a temporary directory:
#   runtime = what `make run` installs (pip install -e .), dev = what `make test` installs (pip install -e '.[dev]').
# Prints one table row per install with the date, commit and load average, for README "Use judgesweep in your own
# project". Needs the package index pip is configured with (or a warm wheel cache); takes a few minutes.
set -euo pipefail
PYTHON=${PYTHON:-python3}
repo=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
commit=$(git -C "$repo" rev-parse --short HEAD)
echo "date $(date -u +%Y-%m-%d), commit $commit, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
echo "| install | command | packages | venv size | time |"
echo "|---|---|---|---|---|"
for kind in runtime dev; do
    venv="$tmp/$kind"
    spec="$repo"
    [ "$kind" = dev ] && spec="$repo[dev]"
    start=$(date +%s.%N)
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip >/dev/null
    "$venv/bin/python" -m pip install --quiet -e "$spec" >/dev/null 2>&1
    seconds=$(echo "$(date +%s.%N) - $start" | bc)
    size=$(du -sm "$venv" | cut -f1)
    count=$("$venv/bin/python" -m pip list --format=freeze 2>/dev/null | wc -l)
    target=$([ "$kind" = dev ] && echo "make test" || echo "make run")
    printf '| %s | `%s` | %d | %d MB | %.0f s |\n' "$kind" "$target" "$count" "$size" "$seconds"
done
