#!/usr/bin/env bash
# Real-VS-Code test of the ASAP extension as a user installs it: code-server 4.103.2 (VS Code 1.103, the first on npm
# with VS Code 1.101's MCP server API, which the main scenario checks) in headless Chromium, driven by
# playwright-core. The extension is the VSIX `make vsix` builds (with the server wheel it carries), installed into
# each attempt's fresh extensions dir with code-server's --install-extension. Idempotent setup, then three scenarios:
# the features on a copy of examples/ (vscode-e2e.mjs), Restricted Mode (restricted-e2e.mjs), and a first start with
# no ASAP environment at all that runs ASAP: Install Server (install-e2e.mjs).
# Env: ASAP_E2E_PYTHON (default <repo>/.venv/bin/python), E2E_TIMEOUT (seconds for the scenario, default 240).
# Cloud Storage is a real GCS JSON-API server (gcp-storage-emulator, from the venv) on 127.0.0.1, started per attempt
# by gcs_bucket.py with a MaxText-shaped bucket, given to the language server as STORAGE_EMULATOR_HOST in
# code-server's environment (the extension passes its environment on), stopped by its PID.
set -euo pipefail
E2E=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$E2E/../.." && pwd)
PY=${ASAP_E2E_PYTHON:-$ROOT/.venv/bin/python}
OUT=$ROOT/.tmp/e2e
T0=$SECONDS
step() { echo "== [$((SECONDS - T0))s] $*"; }
die() { echo "e2e FAILED: $*" >&2; exit 1; }
# npm state is current when its hidden lockfile is newer than the committed lockfile.
stale() { [ ! -f "$1/node_modules/.package-lock.json" ] || [ "$1/package-lock.json" -nt "$1/node_modules/.package-lock.json" ]; }

step "Debian packages"
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v rg >/dev/null || missing+=(ripgrep)
command -v pkg-config >/dev/null || missing+=(pkg-config)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
if ((${#missing[@]})); then
  [ "$(id -u)" = 0 ] || die "missing Debian packages (${missing[*]}); install them as root"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

step "code-server + playwright-core"
if stale "$E2E" || [ ! -x "$E2E/node_modules/.bin/code-server" ]; then
  # code-server's @vscode/ripgrep (1.15.14 in 4.103.2) downloads rg from GitHub in postinstall: seed its cache with
  # Debian's rg.
  RGC=${TMPDIR:-/tmp}/vscode-ripgrep-cache-1.15.14
  mkdir -p "$RGC"
  tar czf "$RGC/ripgrep-v13.0.0-13-x86_64-unknown-linux-musl.tar.gz" -C "$(dirname "$(command -v rg)")" rg
  # Native modules compile against the system Node headers. code-server 4.103 asks for Node 22 and its postinstall
  # refuses another major unless FORCE_NODE_VERSION names it; it runs on Debian's Node 20 (the three scenarios pass).
  (cd "$E2E" && FORCE_NODE_VERSION=$(node -p 'process.versions.node.split(".")[0]') npm_config_yes=true \
    npm_config_unsafe_perm=true npm_config_nodedir=/usr timeout 900 npm ci --no-audit --no-fund -s)
fi
CS=$E2E/node_modules/.bin/code-server
[ -x "$CS" ] || die "code-server is not installed in $E2E/node_modules"

step "the VSIX (make vsix: the bundles, the server wheel it carries)"
if stale "$ROOT/extension"; then timeout 600 npm --prefix "$ROOT/extension" ci --no-audit --no-fund -s; fi
VERSION=$(node -p 'require(process.argv[1]).version' "$ROOT/extension/package.json")
VSIX=$ROOT/extension/asap-$VERSION.vsix
# rebuilt when anything it packs is newer: the extension's sources, the server's, the knowledge notes
if [ ! -f "$VSIX" ] || [ -n "$(find "$ROOT/extension/src" "$ROOT/extension/package.json" "$ROOT/extension/scripts" \
  "$ROOT/server" "$ROOT/kb" "$ROOT/pyproject.toml" -newer "$VSIX" -print -quit)" ]; then
  timeout 600 make -s -C "$ROOT" vsix >/dev/null
fi
[ -f "$VSIX" ] || die "$VSIX was not built"

step "server interpreter: $PY"
[ -x "$PY" ] || die "$PY does not exist (make venv, or set ASAP_E2E_PYTHON)"
(cd / && timeout 60 "$PY" -c 'import server, pygls') || die "$PY cannot import server (pip install -e $ROOT)"

# What the editor and the server said, for a failed attempt: the extension's ASAP channel (the server's log
# lines and stderr), the extension host's log and code-server's.
show_logs() {
  local f
  for f in "$1"/user/logs/*/exthost*/asap-dev.asap/ASAP.log "$1"/user/logs/*/exthost*/remoteexthost.log "$1/code-server.log" \
    "$1/gcs/gcs-server.log"; do
    [ -f "$f" ] || continue
    echo "---- ${f#"$1"/} (last 60 lines)" >&2
    tail -60 "$f" >&2
  done
}

# Stop the process group whose leader is $1: TERM, KILL after 5 s.
stop_group() {
  kill -- -"$1" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL -- -"$1" 2>/dev/null || true
}
PGID= GCS_PID=
cleanup() {
  if [ -n "$PGID" ]; then stop_group "$PGID"; PGID=; fi
  if [ -n "$GCS_PID" ]; then stop_group "$GCS_PID"; GCS_PID=; fi
}
trap cleanup EXIT
# The bucket: gs://$GCS_BUCKET/run holds two profiled sessions; Link Profile must pick the newer.
GCS_BUCKET=asap-e2e-runs GCS_OLDER=2026_11_30_09_00_00 GCS_NEWER=2026_12_01_10_00_00

# The VSIX installed as a user installs it, into the attempt's extensions dir ($1/ext) and profile ($1/user).
install_vsix() {
  HOME=$1/home timeout 120 "$CS" --user-data-dir "$1/user" --extensions-dir "$1/ext" --install-extension "$VSIX" \
    >"$1/install-extension.log" 2>&1 || { cat "$1/install-extension.log" >&2; return 1; }
  [ -f "$1/ext/asap-dev.asap-$VERSION/package.json" ] || { echo "the VSIX did not install into $1/ext" >&2; return 1; }
}

# code-server for the attempt in $1 (its ws/, user/, ext/ and home/), workspace trust "on" or "off" ($2), with the
# environment assignments that follow (VAR=value ...); sets PORT (a free one, 127.0.0.1) and PGID, and returns once
# /healthz answers. No job control here, so setsid execs in place: $! is the leader of a new process group.
start_code_server() {
  local dir=$1 trust=$2
  shift 2
  PORT=$(node -e 'const s = require("net").createServer().listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
  printf 'bind-addr: 127.0.0.1:%s\nauth: none\ncert: false\n' "$PORT" >"$dir/config.yaml"
  local flags=(--disable-telemetry --disable-update-check --disable-getting-started-override)
  [ "$trust" = on ] || flags+=(--disable-workspace-trust)
  step "code-server on 127.0.0.1:$PORT, workspace trust $trust (log: $dir/code-server.log)"
  env "$@" HOME="$dir/home" XDG_CONFIG_HOME="$dir/home/.config" XDG_DATA_HOME="$dir/home/.local/share" \
    XDG_CACHE_HOME="$dir/home/.cache" setsid "$CS" --config "$dir/config.yaml" --user-data-dir "$dir/user" \
    --extensions-dir "$dir/ext" "${flags[@]}" "$dir/ws" >"$dir/code-server.log" 2>&1 &
  PGID=$!
  local deadline=$((SECONDS + 60))
  until curl -fs -o /dev/null "http://127.0.0.1:$PORT/healthz"; do
    kill -0 "$PGID" 2>/dev/null || { tail -20 "$dir/code-server.log" >&2; echo "code-server exited" >&2; return 1; }
    ((SECONDS < deadline)) || { echo "code-server not healthy after 60 s" >&2; return 1; }
    sleep 0.2
  done
}

# One attempt: a fresh profile, workspace and extensions dir, a fresh code-server, the scenario.
attempt() {
  step "fresh profile, workspace and extensions dir in $OUT/run (screenshots in $OUT)"
  D=$OUT/run
  rm -rf "$D"
  mkdir -p "$D/user/User" "$D/home" "$D/ext"
  cp -r "$ROOT/examples" "$D/ws"
  # The interpreter twice over: the asap.python user setting below, and a workspace .venv the extension finds by
  # itself. code-server can start the extension host before it has read the user settings (seen here, with CI's
  # symptom of the last submission, no first diagnostic in 90 s:
  # the ASAP channel logged "asap.python is not set" and no configuration change followed), and a test of the
  # editor must not hang on that race.
  mkdir -p "$D/ws/.venv/bin"
  printf '#!/bin/sh\nexec "%s" "$@"\n' "$PY" >"$D/ws/.venv/bin/python"
  chmod +x "$D/ws/.venv/bin/python"
  install_vsix "$D"
  # MaxText's train_compile as the LSP tests' stand-in (tests/support/fake_maxtext.py), every compile held while the
  # file `hold` exists: Verify runs until the scenario cancels it from its progress notification.
  "$PY" -c 'import pathlib, sys; sys.path.insert(0, sys.argv[1]); from support import fake_maxtext
fake_maxtext.write(pathlib.Path(sys.argv[2]))' "$ROOT/tests" "$D/maxtext"
  touch "$D/maxtext/hold"
  # The demo again under another name (Quick Open of llama3-8b-v6e-16.yml stays unambiguous), for the step where
  # Verify withdraws its fsdp=16 proposal (the stand-in's out-of-memory); that step lifts the gates in $D/maxtext,
  # passed to the scenario as ASAP_E2E_MAXTEXT_DIR.
  cp "$ROOT/examples/llama3-8b-v6e-16.yml" "$D/ws/verify-demo.yml"
  # The config the scenario links to gs://$GCS_BUCKET/run (the mesh of tests/lsp/test_gcs_profile_lsp.py). A link kept in
  # the workspace's links file is anchored on line 0: the profile's hover is on this comment.
  printf '%s\n' '# A MaxText config whose profile is a run in Cloud Storage (ASAP: Link Profile...)' \
    'model_name: llama2-7b' 'compile_topology: v5e-4' 'per_device_batch_size: 1' 'ici_fsdp_parallelism: 4' \
    >"$D/ws/gcs-demo.yml"
  # A launch file (VS Code's shellscript by its extension): one MaxText run over two lines whose ICI product (128)
  # is not its slice's 256 (ASAP101 on ici_fsdp_parallelism=8), after the comment and export the fix must keep.
  cat >"$D/ws/train.sh" <<'EOF'
#!/bin/bash
# llama2-7b on a v5e-256 slice
export LIBTPU_INIT_ARGS="--xla_tpu_enable_data_parallel_all_reduce_opt=true"
python3 -m MaxText.train MaxText/configs/base.yml model_name=llama2-7b per_device_batch_size=4 \
    ici_fsdp_parallelism=8 ici_tensor_parallelism=16 compile_topology=v5e-256
EOF
  PY="$PY" MAXTEXT="$D/maxtext/python" node -e '
    const settings = {
      "asap.python": process.env.PY, "asap.maxtextPython": process.env.MAXTEXT,
      "workbench.startupEditor": "none", "security.workspace.trust.enabled": false, "telemetry.telemetryLevel": "off",
      "extensions.autoUpdate": false, "extensions.autoCheckUpdates": false, "update.mode": "none",
      "workbench.tips.enabled": false, "editor.renderWhitespace": "none", "chat.disableAIFeatures": true,
      "git.openRepositoryInParentFolders": "never",
    };
    require("fs").writeFileSync(process.argv[1], JSON.stringify(settings, null, 2));' "$D/user/User/settings.json"

  step "Cloud Storage: gcp-storage-emulator with gs://$GCS_BUCKET (log: $D/gcs/gcs-server.log)"
  mkdir -p "$D/gcs"
  local gcs
  gcs=$(timeout 60 "$PY" "$E2E/gcs_bucket.py" "$D/gcs" "$GCS_BUCKET" "$GCS_OLDER" "$GCS_NEWER") \
    || { echo "gcs_bucket.py failed (log: $D/gcs/gcs-server.log)" >&2; return 1; }
  GCS_PORT=${gcs% *} GCS_PID=${gcs#* }
  [[ $GCS_PORT =~ ^[0-9]+$ && $GCS_PID =~ ^[0-9]+$ ]] || { echo "gcs_bucket.py printed '$gcs'" >&2; return 1; }

  start_code_server "$D" off STORAGE_EMULATOR_HOST="http://127.0.0.1:$GCS_PORT" || return 1

  step "scenario"
  local rc=0
  HOME=$D/home ASAP_E2E_MAXTEXT_DIR=$D/maxtext ASAP_E2E_GCS_BUCKET=$GCS_BUCKET ASAP_E2E_GCS_OLDER=$GCS_OLDER \
    ASAP_E2E_GCS_NEWER=$GCS_NEWER timeout "${E2E_TIMEOUT:-240}" node "$E2E/vscode-e2e.mjs" "http://127.0.0.1:$PORT/?folder=$D/ws" "$OUT" || rc=$?
  ((rc == 0)) || show_logs "$D"
  cleanup
  return "$rc"
}

# Restricted Mode: workspace trust on and the folder not trusted (no prompt). The workspace is a cloned repository
# that tries to choose the interpreter: a .vscode/settings.json asap.python and a .venv/bin/python, both a trap that
# records that it ran. The user's asap.python (and, for the settings race above, the venv next to the installed
# extension) is the real one. The scenario sees a diagnostic and the restricted status item; the trap never ran, and
# the extension offered VS Code no MCP server.
attempt_restricted() {
  local R=$OUT/restricted
  step "Restricted Mode: fresh profile and untrusted workspace in $R"
  rm -rf "$R"
  mkdir -p "$R/user/User" "$R/home" "$R/ext/.venv/bin" "$R/ws/.venv/bin" "$R/ws/.vscode"
  cp "$ROOT/examples/bad-mesh-v5e-256.yml" "$R/ws/"
  printf '#!/bin/sh\ntouch "%s"\nexit 1\n' "$R/trap-ran" >"$R/ws/.venv/bin/python"
  printf '#!/bin/sh\nexec "%s" "$@"\n' "$PY" >"$R/ext/.venv/bin/python"
  chmod +x "$R/ws/.venv/bin/python" "$R/ext/.venv/bin/python"
  printf '{"asap.python": "%s", "asap.maxtextPython": "%s"}\n' "$R/ws/.venv/bin/python" "$R/ws/.venv/bin/python" \
    >"$R/ws/.vscode/settings.json"
  install_vsix "$R"
  PY="$PY" node -e '
    const settings = {
      "asap.python": process.env.PY, "workbench.startupEditor": "none", "telemetry.telemetryLevel": "off",
      "security.workspace.trust.enabled": true, "security.workspace.trust.startupPrompt": "never",
      "security.workspace.trust.banner": "never", "extensions.autoUpdate": false, "extensions.autoCheckUpdates": false,
      "update.mode": "none", "workbench.tips.enabled": false, "chat.disableAIFeatures": true,
      "git.openRepositoryInParentFolders": "never",
    };
    require("fs").writeFileSync(process.argv[1], JSON.stringify(settings, null, 2));' "$R/user/User/settings.json"
  start_code_server "$R" on || return 1
  step "restricted scenario"
  local rc=0
  HOME=$R/home timeout 120 node "$E2E/restricted-e2e.mjs" "http://127.0.0.1:$PORT/?folder=$R/ws" "$OUT" || rc=$?
  if ((rc == 0)) && [ -e "$R/trap-ran" ]; then
    echo "the untrusted workspace's .venv/bin/python (or its asap.python) was run" >&2
    rc=1
  fi
  # No MCP server offered in Restricted Mode (extension/src/mcp.ts): what the extension answered when VS Code asked,
  # after the language client had found its interpreter (before the diagnostic the scenario waited for)
  local said
  said=$(cat "$R"/user/logs/*/exthost*/asap-dev.asap/ASAP.log 2>/dev/null || true)
  if ((rc == 0)) && { ! grep -q 'no ASAP MCP server offered: the workspace is not trusted' <<<"$said" ||
    grep -q 'MCP: offering' <<<"$said"; }; then
    echo "Restricted Mode: the extension offered its MCP server, or VS Code did not ask for it (the ASAP log follows)" >&2
    rc=1
  fi
  ((rc == 0)) || show_logs "$R"
  cleanup
  return "$rc"
}

# A user's first start: the VSIX installed, no asap.python, no .venv in the workspace or beside the extension, no
# Python extension. The scenario runs ASAP: Install Server from the extension's offer and picks the machine's own
# Python by its path; pip installs the carried wheel with its
# dependencies from the machine's configured index (pip.conf, PIP_* as the user has them). Afterwards the server venv
# is in the extension's global storage and has the VSIX's ASAP version.
attempt_install() {
  local I=$OUT/install
  step "first start without ASAP: fresh profile, workspace and extensions dir in $I"
  rm -rf "$I"
  mkdir -p "$I/user/User" "$I/home" "$I/ext"
  cp -r "$ROOT/examples" "$I/ws"
  install_vsix "$I"
  # the machine's Python (Debian's has venv and ensurepip; else the one python3 runs)
  local base=/usr/bin/python3
  "$base" -c 'import venv, ensurepip' 2>/dev/null || base=$(python3 -c 'import sys; print(sys._base_executable)')
  base=$(readlink -f "$base") # the list names each interpreter once, by its real path
  node -e '
    const settings = {
      "workbench.startupEditor": "none", "security.workspace.trust.enabled": false, "telemetry.telemetryLevel": "off",
      "extensions.autoUpdate": false, "extensions.autoCheckUpdates": false, "update.mode": "none",
      "workbench.tips.enabled": false, "chat.disableAIFeatures": true, "git.openRepositoryInParentFolders": "never",
    };
    require("fs").writeFileSync(process.argv[1], JSON.stringify(settings, null, 2));' "$I/user/User/settings.json"
  step "the Python to pick: $base"
  start_code_server "$I" off || return 1
  step "install scenario"
  local rc=0
  HOME=$I/home ASAP_E2E_BASE_PYTHON=$base timeout 420 node "$E2E/install-e2e.mjs" \
    "http://127.0.0.1:$PORT/?folder=$I/ws" "$OUT" || rc=$?
  local venv_py=$I/user/User/globalStorage/asap-dev.asap/server-venv/bin/python
  if ((rc == 0)); then
    local got
    got=$(cd / && "$venv_py" -c 'from importlib.metadata import version; print(version("asap"))' 2>&1) || got="none ($got)"
    [ "$got" = "$VERSION" ] || { echo "the server venv $venv_py has ASAP $got, not the VSIX's $VERSION" >&2; rc=1; }
  fi
  # the MCP server definition followed the language server into the new venv (extension/src/mcp.ts's change event)
  if ((rc == 0)) && ! grep -qF "MCP: offering $venv_py -m server mcp" "$I"/user/logs/*/exthost*/asap-dev.asap/ASAP.log; then
    echo "after Install Server the extension did not offer VS Code the MCP server on $venv_py" >&2
    rc=1
  fi
  ((rc == 0)) || show_logs "$I"
  cleanup
  # the venv is about 1.2 GB: kept for a failed attempt only (code-server, and the server with it, stopped above)
  ((rc != 0)) || rm -rf "$(dirname "$(dirname "$venv_py")")"
  return "$rc"
}

# A browser driving a workbench can lose a race that is not ASAP's; a second failure is a failure. The first
# attempt's logs are printed either way. ASAP_E2E_ONLY=main|restricted|install runs one scenario (while developing it).
# The install scenario runs beside the other two (its own code-server, profile and port; its output to
# $OUT/install.log, printed at the end): it mostly waits on pip, the others mostly on the browser, and one after the
# other they took 45 s more of make test's wall time.
only() { [ -z "${ASAP_E2E_ONLY:-}" ] || [ "$ASAP_E2E_ONLY" = "$1" ]; }
rm -rf "$OUT"
mkdir -p "$OUT"
INSTALL_PID=
if only install; then
  (
    PGID= GCS_PID=
    trap cleanup EXIT
    trap 'exit 143' TERM # run.sh stopping early (a failed scenario): the EXIT trap stops this one's code-server
    if ! attempt_install; then
      step "the install scenario failed (logs above); a second attempt from scratch"
      attempt_install || die "install scenario failed twice (screenshots in $OUT; logs in $OUT/install)"
    fi
  ) >"$OUT/install.log" 2>&1 &
  INSTALL_PID=$!
  # when run.sh exits before waiting for it: TERM to it and to its children (the scenario's timeout, code-server),
  # whose ends let its TERM trap run
  trap 'cleanup; kill "$INSTALL_PID" 2>/dev/null && pkill -TERM -P "$INSTALL_PID"; true' EXIT
  step "install scenario started beside the others (output: $OUT/install.log)"
fi
if only main && ! attempt; then
  step "the scenario failed (logs above); a second attempt from scratch"
  attempt || die "scenario failed twice (screenshots in $OUT; logs in $OUT/run/code-server.log and $OUT/run/user/logs)"
fi
if only restricted && ! attempt_restricted; then
  step "the restricted scenario failed (logs above); a second attempt from scratch"
  attempt_restricted || die "restricted scenario failed twice (screenshots in $OUT; logs in $OUT/restricted)"
fi
if [ -n "$INSTALL_PID" ]; then
  rc=0
  wait "$INSTALL_PID" || rc=$?
  INSTALL_PID=
  step "install scenario (its output follows)"
  cat "$OUT/install.log"
  ((rc == 0)) || die "install scenario failed (output above)"
fi
step "passed"
