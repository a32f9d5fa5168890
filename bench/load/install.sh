#!/usr/bin/env bash
# The proxy benchmark's load generators and peer, installed once per machine and printed as
# NAME=path lines: wrk (Debian; closed model, maximum throughput), vegeta (Go module
# github.com/tsenart/vegeta/v12, built with `go install`, MIT; open model, latency at a fixed
# arrival rate), nginx (Debian nginx-light; the keep-alive proxy_pass peer) and the wake-up probe
# (bench/load/wake-probe.c, built with the C compiler: the machine's floor for what a hop adds).
# What is missing is installed as root from Debian (golang-go and gcc too, to build the first time).
set -euo pipefail
VEGETA_VERSION=v12.13.0
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
missing=()
command -v wrk >/dev/null || missing+=(wrk)
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx-light)
VEGETA=$CACHE/vegeta-$VEGETA_VERSION/vegeta
# vegeta is built from source with the Go toolchain (Debian golang-go) the first time.
[[ -x $VEGETA ]] || command -v go >/dev/null || missing+=(golang-go)
# The probe is built again whenever its source changes (its path names the source's hash).
PROBE_SRC=$(dirname "${BASH_SOURCE[0]}")/wake-probe.c
WAKE_PROBE=$CACHE/wake-probe-$(sha256sum "$PROBE_SRC" | cut -c1-16)/wake-probe
[[ -x $WAKE_PROBE ]] || command -v cc >/dev/null || missing+=(gcc)
if ((${#missing[@]} > 0)); then
  [[ $(id -u) == 0 ]] || { echo "install ${missing[*]} (Debian packages) first" >&2; exit 1; }
  echo "installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq "${missing[@]}" >&2
  # The package starts nginx on port 80; the bench runs its own.
  if [[ " ${missing[*]} " == *" nginx-light "* ]]; then pkill -x nginx 2>/dev/null || true; fi
fi
if [[ ! -x $VEGETA ]]; then
  echo "building vegeta $VEGETA_VERSION with go install" >&2
  GOBIN=$(dirname "$VEGETA") GOFLAGS=-mod=mod go install "github.com/tsenart/vegeta/v12@$VEGETA_VERSION" >&2
fi
if [[ ! -x $WAKE_PROBE ]]; then
  mkdir -p "$(dirname "$WAKE_PROBE")"
  cc -O2 -o "$WAKE_PROBE.tmp" "$PROBE_SRC" >&2
  mv "$WAKE_PROBE.tmp" "$WAKE_PROBE"
fi
echo "WRK=$(command -v wrk)"
echo "NGINX=$(command -v nginx || echo /usr/sbin/nginx)"
echo "VEGETA=$VEGETA"
echo "WAKE_PROBE=$WAKE_PROBE"
