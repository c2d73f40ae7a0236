#!/usr/bin/env bash
# What the tests need beyond the venv: Java (local Spark) and Chromium (the
# Commits page driven in a browser). Installs what is missing when it can (as
# root, with apt-get). Otherwise it says what it could not install and the
# tests that need it are skipped, each saying why; with --strict (CI) it fails.
set -euo pipefail
strict=0
[ "${1:-}" = "--strict" ] && strict=1
missing() {
  local out=()
  java -version >/dev/null 2>&1 || out+=(openjdk-17-jre-headless)
  command -v chromium >/dev/null 2>&1 || out+=(chromium)
  echo "${out[@]:-}"
}
wanted=$(missing)
[ -z "$wanted" ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing $wanted (apt-get)..." >&2
  # shellcheck disable=SC2086 # one word per package
  apt-get update -qq && apt-get install -y -qq $wanted >/dev/null || true
  wanted=$(missing)  # an installed package may still leave no program on PATH
  [ -z "$wanted" ] && exit 0
fi
echo "could not install $wanted (needs root and apt-get, and the program on PATH); the" \
     "tests that need them will be skipped, each saying why" >&2
exit $strict
