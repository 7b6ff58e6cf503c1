#!/usr/bin/env bash
# Neovim (headless) as an independent LSP client of the ASAP server: diagnostics, hover, quick fix.
# Installs Debian's neovim when missing (as root). Bounded by `timeout`; the scratch directory is removed.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PY=${ASAP_E2E_PYTHON:-$ROOT/.venv/bin/python}
if ! command -v nvim >/dev/null; then
  [ "$(id -u)" = 0 ] || { echo "neovim missing; install it as root (apt-get install neovim)" >&2; exit 1; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends neovim >/dev/null
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp "$ROOT/examples/bad-mesh-v5e-256.yml" "$ROOT/examples/common.yml" "$T/"
echo "== neovim: $(nvim --version | head -1)"
(cd "$T" && ASAP_PY="$PY" ASAP_CACHE_DIR="$T/cache" XDG_STATE_HOME="$T/state" XDG_CACHE_HOME="$T/xdg-cache" \
  timeout 120 nvim --headless --clean -u "$ROOT/tests/nvim/asap_e2e.lua" bad-mesh-v5e-256.yml)
echo "== neovim: passed"
