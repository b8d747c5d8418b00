#!/usr/bin/env bash
# `npm run build` for `npm start`, quietly: one line while it builds, and the build's own output
# (tsc, rspack, npm's warnings) only when it fails, then also kept in a file.
set -uo pipefail
cd "$(dirname "$0")/.."
log="$(mktemp "${TMPDIR:-/tmp}/ferry-build.XXXXXX")"
printf 'Building Ferry (a minute or two the first time)...' >&2
start=$SECONDS
if npm run build --silent --loglevel=error >"$log" 2>&1; then
  printf ' done in %ss\n' $((SECONDS - start)) >&2
  rm -f "$log"
  exit 0
else
  status=$?
  printf ' failed:\n' >&2
  cat "$log" >&2
  printf 'The build failed (exit %s); its output is kept in %s\n' "$status" "$log" >&2
  exit "$status"
fi
