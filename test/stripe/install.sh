#!/usr/bin/env bash
# Installs stripe-mock (Stripe's OpenAPI-driven mock of its API) with `go install` from the Go
# module proxy, no binary download, into a cache outside the repo, once per machine, with the
# fixtures it was built with beside it (test/helpers/stripe-mock.ts derives its variants from
# them). Prints the directory. Used by .ci/run and by the Stripe tests.
set -euo pipefail
STRIPE_MOCK_VERSION=v0.203.0
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
DIR=$CACHE/stripe-mock-$STRIPE_MOCK_VERSION
if [[ ! -f $DIR/.installed ]]; then
  command -v go >/dev/null || { echo "stripe-mock needs Go (the go command) to install" >&2; exit 1; }
  rm -rf "$DIR"
  mkdir -p "$DIR/bin"
  GOBIN=$DIR/bin GOFLAGS=-mod=mod go install "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION" >&2
  cp "$(go env GOMODCACHE)/github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION/embedded/openapi/fixtures3.json" \
    "$DIR/fixtures3.json"
  chmod u+w "$DIR/fixtures3.json"
  touch "$DIR/.installed"
fi
echo "$DIR"
