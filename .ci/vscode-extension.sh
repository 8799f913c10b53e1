#!/usr/bin/env bash
# CI stage: the VS Code extension (vscode-extension/) built, packaged and tested in real VS Code.
# Call from .ci/run after the Python suite (it reuses .venv; `make install` is a no-op when current).
# Installs the Debian packages it needs, then runs vscode-extension/scripts/e2e.sh, which installs
# Node 24 + code-server into ~/.cache/fixpoint/code-server on first use (npm registry only, ~2 min),
# runs the unit tests, packages the .vsix, runs the integration tests inside VS Code against the real
# language server (flash-and-verify on qemu-m4 when CMSIS-NN and QEMU are present) and saves the
# workbench screenshots in vscode-extension/test-artifacts/. Exit code: the stage's.
set -euo pipefail
cd "$(dirname "$0")/.."

# chromium: the headless browser the workbench runs in (no browser download); build-essential,
# python3, libkrb5-dev: code-server's native modules; npm: the extension's build.
missing=()
for pkg in chromium build-essential python3 libkrb5-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo ".ci/vscode-extension.sh: installing ${missing[*]}"
  sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo ".ci/vscode-extension.sh: root (or sudo) is needed to install them" >&2; exit 1; }
    sudo=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 update
  "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=900 install -y --no-install-recommends "${missing[@]}"
fi

make install
bash vscode-extension/scripts/e2e.sh
