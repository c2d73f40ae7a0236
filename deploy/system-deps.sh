#!/usr/bin/env bash
# What the tests need beyond the venv: Java (local Spark) and Chromium (the
# Commits page driven in a browser). Installs what is missing when it can (as
# root, with apt-get). Otherwise it says what it could not install and the
# tests that need it are skipped, each saying why; with --strict (CI) it fails.
set -euo pipefail
strict=0
[ "${1:-}" = "--strict" ] && strict=1
missing=()
java -version >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} (apt-get)..." >&2
  apt-get update -qq && apt-get install -y -qq "${missing[@]}" >/dev/null && exit 0
fi
echo "could not install ${missing[*]} (needs root and apt-get); the tests that need" \
     "them will be skipped, each saying why" >&2
exit $strict
