#!/usr/bin/env bash
# The system tools the tests run for real: nats-server (the cluster tests), bubblewrap (the
# shell sandbox), prometheus (the metrics test) and chromium (the web view's test). Installed from Debian's packages when missing and this is a root shell with
# apt-get (a fresh machine or container); otherwise the missing ones are named, and the tests that
# need them fail saying so (never a silent skip).
set -euo pipefail
missing=()
command -v nats-server >/dev/null || missing+=(nats-server)
command -v bwrap >/dev/null || missing+=(bubblewrap)
command -v prometheus >/dev/null || missing+=(prometheus)
[ -x /usr/bin/chromium ] || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "test prerequisites: installing ${missing[*]} (apt-get)"
  apt-get install -y "${missing[@]}" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "${missing[@]}" >/dev/null; }
else
  echo "test prerequisites: missing ${missing[*]}; install them (e.g. sudo apt-get install -y ${missing[*]}), or the tests that need them fail" >&2
fi
