#!/usr/bin/env bash
# The proxy benchmark's load generators and peer, installed once per machine and printed as
# NAME=path lines: wrk (Debian; closed model, maximum throughput), vegeta (Go module
# github.com/tsenart/vegeta/v12, built with `go install`, MIT; open model, latency at a fixed
# arrival rate) and nginx (Debian nginx-light; the keep-alive proxy_pass peer).
set -euo pipefail
VEGETA_VERSION=v12.13.0
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
if ((${#missing[@]} > 0)); then
  [[ $(id -u) == 0 ]] || { echo "install ${missing[*]} (Debian packages) first" >&2; exit 1; }
  echo "installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "${missing[@]}" >&2
  # The package starts nginx on port 80; the bench runs its own.
  pkill -x nginx 2>/dev/null || true
fi
VEGETA=$CACHE/vegeta-$VEGETA_VERSION/vegeta
if [[ ! -x $VEGETA ]]; then
  command -v go >/dev/null || { echo "vegeta is built with go install: Go is needed" >&2; exit 1; }
  echo "building vegeta $VEGETA_VERSION with go install" >&2
  GOBIN=$(dirname "$VEGETA") GOFLAGS=-mod=mod go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION" >&2
fi
echo "WRK=$(command -v wrk)"
echo "NGINX=$(command -v nginx || echo /usr/sbin/nginx)"
echo "VEGETA=$VEGETA"
