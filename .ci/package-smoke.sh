#!/usr/bin/env bash
# The package as users get it: `npm pack`, then the tarball installed globally into a temp prefix
# (`npm i -g`) and run through `npx`, under the Node whose bin folder is $1 (default: the one on
# PATH). Checks what the tarball ships, `subagentd run` against the offline scripted model with the
# README's relative `examples/` path from an unrelated folder, and the client's exports.
# Needs a build in dist/ (npm test or npm run build first).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${1:-}" ]; then export PATH="$1:$PATH"; fi
echo "package smoke on node $(node --version)"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/subagentd-pack.XXXXXX")"
socket="$tmp/run/daemon.sock"
cleanup() {
  "$tmp/prefix/bin/subagentd" stop --socket "$socket" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "package smoke: $*" >&2; exit 1; }

tarball="$tmp/$(npm pack --silent --pack-destination "$tmp" | tail -1)"
listing="$(tar tzf "$tarball")"
for must in package/LICENSE package/README.md package/docs/operations.md package/examples/hello.json package/dist/cli/main.js package/dist/client/index.js; do
  grep -qx "$must" <<<"$listing" || fail "the tarball lacks $must"
done
if grep -qE '^package/dist/(test|bench)/' <<<"$listing"; then fail "the tarball ships tests or benchmarks"; fi
# The build strips comments from the JavaScript (less source text for a daemon to hold); `prepack`
# writes the declarations again with their doc comments, which is what the tarball must ship.
# Outputs are read whole before grep: `cmd | grep -q` under pipefail fails when grep exits at the
# match before cmd has written everything (cmd then dies of SIGPIPE).
declarations="$(tar xzf "$tarball" -O package/dist/daemon/daemon.d.ts)"
grep -q '/\*\* Trusted same-process providers' <<<"$declarations" || fail 'the tarball'"'"'s .d.ts lack their doc comments'
[ "$(node -p "require('$PWD/package.json').license")" = MIT ] || fail 'package.json does not state the MIT licence'

npm i -g --prefix "$tmp/prefix" --no-audit --no-fund "$tarball" >/dev/null
mkdir -p "$tmp/work" "$tmp/run" && chmod 700 "$tmp/run"
cd "$tmp/work"
[ "$("$tmp/prefix/bin/subagentd" --version)" = "subagentd $(node -p "require('$OLDPWD/package.json').version")" ] || fail '--version'
answer="$("$tmp/prefix/bin/subagentd" run --quiet --socket "$socket" --state-dir "$tmp/state" \
  --model scripted:examples/hello.json "Summarise this repository")"
grep -q 'This repository is subagentd' <<<"$answer" || fail "run printed: $answer"

# npx from the tarball (its own install in npm's cache, not the global one above).
npx_version="$(npx --yes --package "$tarball" -- subagentd --version)"
grep -q '^subagentd ' <<<"$npx_version" || fail "npx subagentd --version printed: $npx_version"

# The library: the client's exports resolve from an installed package.
cat >"$tmp/prefix/lib/probe.mjs" <<'JS'
import { defaultSocketPath, ensureDaemon, connect } from 'subagentd/client';
const socket = process.argv[2];
if (!defaultSocketPath().endsWith('daemon.sock')) throw new Error('defaultSocketPath');
if ((await ensureDaemon({ socket })) !== 'running') throw new Error('ensureDaemon should find the running daemon');
const client = await connect({ socket });
console.log(client.daemon.name);
await client.close();
JS
[ "$(node "$tmp/prefix/lib/probe.mjs" "$socket")" = subagentd ] || fail 'subagentd/client exports'
"$tmp/prefix/bin/subagentd" stop --socket "$socket" >/dev/null
echo "package smoke: ok ($(basename "$tarball"), $(wc -l <<<"$listing") files)"
