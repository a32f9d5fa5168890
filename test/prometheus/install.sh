#!/usr/bin/env bash
# Installs promtool (Prometheus's rule checker and rule unit-test runner) into a cache outside the
# repo, once per machine: built with `go install` from the Go module proxy, no binary download.
# Prints the promtool binary. Used by .ci/run and test/deploy/prometheus-rules.test.ts.
set -euo pipefail
# The Go module version of Prometheus 3.16 (github.com/prometheus/prometheus tags v0.3xx.y).
PROMETHEUS_VERSION=v0.316.0
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
dir=$CACHE/promtool-$PROMETHEUS_VERSION
if [[ ! -x $dir/promtool ]]; then
  mkdir -p "$dir"
  GOBIN=$dir go install "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION" >&2
fi
echo "$dir/promtool"
