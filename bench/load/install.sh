#!/usr/bin/env bash
# The proxy benchmark's load generators and peer, installed once per machine and printed as
# NAME=path lines: wrk (Debian; closed model, maximum throughput), vegeta (Go module
# github.com/tsenart/vegeta/v12, built with `go install`, MIT; open model, latency at a fixed
# arrival rate), nginx (Debian nginx-light; the keep-alive proxy_pass peer), the wake-up probe
# (bench/load/wake-probe.c, built with the C compiler: the machine's floor for what a hop adds)
# open-load (bench/load/open-load.c, the same way: an open-model generator in C, for
# `--latency-generator open-load`), the relay (bench/load/relay.c, the same way: a TCP hop
# that only passes bytes, a hop with no HTTP work in the latency trials' own arrangement) and
# the C origin (bench/load/origin.c, the same way: the latency trials' origin, a fixed answer).
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
# The C tools are built again whenever their source changes (each path names the hash of the
# tool's source and of listen.h, which the servers among them include).
LISTEN_H=$(dirname "${BASH_SOURCE[0]}")/listen.h
hashed() { cat "$1" "$LISTEN_H" | sha256sum | cut -c1-16; }
PROBE_SRC=$(dirname "${BASH_SOURCE[0]}")/wake-probe.c
WAKE_PROBE=$CACHE/wake-probe-$(hashed "$PROBE_SRC")/wake-probe
OPEN_LOAD_SRC=$(dirname "${BASH_SOURCE[0]}")/open-load.c
OPEN_LOAD=$CACHE/open-load-$(hashed "$OPEN_LOAD_SRC")/open-load
RELAY_SRC=$(dirname "${BASH_SOURCE[0]}")/relay.c
RELAY=$CACHE/relay-$(hashed "$RELAY_SRC")/relay
ORIGIN_SRC=$(dirname "${BASH_SOURCE[0]}")/origin.c
ORIGIN=$CACHE/origin-$(hashed "$ORIGIN_SRC")/origin
{ [[ -x $WAKE_PROBE ]] && [[ -x $OPEN_LOAD ]] && [[ -x $RELAY ]] && [[ -x $ORIGIN ]]; } || command -v cc >/dev/null || missing+=(gcc)
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
for pair in "$WAKE_PROBE:$PROBE_SRC" "$OPEN_LOAD:$OPEN_LOAD_SRC" "$RELAY:$RELAY_SRC" "$ORIGIN:$ORIGIN_SRC"; do
  tool=${pair%%:*} src=${pair#*:}
  if [[ ! -x $tool ]]; then
    mkdir -p "$(dirname "$tool")"
    cc -O2 -o "$tool.tmp" "$src" >&2
    mv "$tool.tmp" "$tool"
  fi
done
echo "WRK=$(command -v wrk)"
echo "NGINX=$(command -v nginx || echo /usr/sbin/nginx)"
echo "VEGETA=$VEGETA"
echo "WAKE_PROBE=$WAKE_PROBE"
echo "OPEN_LOAD=$OPEN_LOAD"
echo "RELAY=$RELAY"
echo "ORIGIN=$ORIGIN"
