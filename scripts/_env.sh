# Sourced by scripts/serve and scripts/test: find Python >= 3.11, make .venv, install when requirements change.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

find_python() {
  for candidate in "${PYTHON:-}" python3.13 python3.12 python3.11 python3; do
    [ -n "$candidate" ] || continue
    if command -v "$candidate" >/dev/null 2>&1 &&
      "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      command -v "$candidate"
      return 0
    fi
  done
  echo "loopmem needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

ensure_venv() {  # $1: requirements file
  local requirements="$1"
  if [ ! -x .venv/bin/python ]; then
    "$(find_python)" -m venv .venv
  fi
  local stamp=".venv/.installed-$(basename "$requirements" .txt)"
  local digest
  digest="$(cat requirements/*.txt | sha256sum | cut -d' ' -f1)"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$digest" ]; then
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r "$requirements"
    echo "$digest" >"$stamp"
  fi
}
