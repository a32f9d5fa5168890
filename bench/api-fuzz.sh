#!/usr/bin/env bash
# Schema fuzzing of the control plane's API: schemathesis (PyPI) generates requests from
# /openapi.json, valid and invalid, NUL bytes included, and sends them with a sandbox key, a live
# key and no key to `npm start` on embedded defaults (live payments go to stripe-mock), on loopback
# only. Bounded by examples per operation and by time; stops the service itself. Writes bench/results/api-fuzz.{md,json} and
# exits non-zero when any answer was a 5xx, or the service stopped answering during a run.
#
#   FUZZ_MAX_SECONDS=600 bash bench/api-fuzz.sh  # 100 examples per operation, fuzzing repeated for 600 s per key
#   FUZZ_MAX_EXAMPLES=20 FUZZ_SEED=1 bash bench/api-fuzz.sh   # CI: a quick pass, reproducible
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
examples=${FUZZ_MAX_EXAMPLES:-100}
# With a time budget schemathesis repeats its fuzzing until the budget is spent; without one it
# runs each phase once.
time_args=()
[[ -n ${FUZZ_MAX_SECONDS:-} ]] && time_args=(--max-time "$FUZZ_MAX_SECONDS")
seed_args=()
[[ -n ${FUZZ_SEED:-} ]] && seed_args=(--seed "$FUZZ_SEED" --generation-deterministic)
version=4.32.5
cache=${MCPMETER_CACHE:-$HOME/.cache/mcp-meter}
venv=$cache/schemathesis-$version

if [[ ! -x $venv/bin/schemathesis ]]; then
  echo "[fuzz] installing schemathesis $version into $venv"
  mkdir -p "$cache"
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$version"
fi

work=$(mktemp -d)
# Embedded PostgreSQL runs as user postgres when we are root: its data directory must be reachable.
chmod 755 "$work"
free_port() { node -e "const s=require('net').createServer().listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"; }
port=$(free_port)
proxy_port=$(free_port)
base=http://127.0.0.1:$port
# Live payments go to stripe-mock on loopback (a fuzzed key may connect Stripe), never to Stripe.
stripe_mock=$(bash test/stripe/install.sh)/bin/stripe-mock
stripe_port=$(free_port)
"$stripe_mock" -http-addr "127.0.0.1:$stripe_port" -https-addr "127.0.0.1:$(free_port)" > "$work/stripe-mock.log" 2>&1 &
stripe=$!
export DATA_DIR=$work/data PORT=$port PROXY_PORT=$proxy_port LOG_LEVEL=warn WEBHOOKS_ENABLED=false \
  STRIPE_API_URL=http://127.0.0.1:$stripe_port
node --max-semi-space-size=64 --min-semi-space-size=32 --heap-growing-percent=300 deploy/start.mjs > "$work/serve.log" 2>&1 &
service=$!
cleanup() {
  kill -TERM "$service" 2>/dev/null || true
  wait "$service" 2>/dev/null || true
  kill -TERM "$stripe" 2>/dev/null || true
  wait "$stripe" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

for _ in $(seq 1 180); do
  curl -sf "$base/healthz" >/dev/null && break
  kill -0 "$service" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 1
done
curl -sf "$base/healthz" >/dev/null || { echo "[fuzz] the service did not become healthy"; cat "$work/serve.log"; exit 1; }

keys=$(node --import ./deploy/loader.mjs control-plane/src/admin/cli.ts provider create --name "Fuzz Co")
sandbox=$(node -e 'console.log(JSON.parse(process.argv[1]).sandboxKey)' "$keys")
live=$(node -e 'console.log(JSON.parse(process.argv[1]).liveKey)' "$keys")

# The MCP proxy's paths are in the document for readers and clients, but are served by the proxy
# and speak JSON-RPC: the proxy has its own fuzzing (npm run fuzz:proxy), so they are left out here.
run() {
  local who=$1
  shift
  echo "[fuzz] $who: up to $examples examples per operation"
  # Exit status is read from the report, which also counts the 5xx.
  timeout "${FUZZ_TIMEOUT_SECONDS:-1800}" "$venv/bin/schemathesis" run "$base/openapi.json" "$@" \
    --checks not_a_server_error --phases examples,coverage,fuzzing --max-examples "$examples" \
    --exclude-tag 'mcp proxy' \
    "${time_args[@]}" --workers 2 --generation-allow-x00 true --suppress-health-check all \
    --request-timeout 30 --no-color --output-truncate true "${seed_args[@]}" \
    --report ndjson --report-ndjson-path "$work/$who.ndjson" > "$work/$who.log" 2>&1 || true
  # The fuzzer's own closing lines, less pytest's "=== … in 19s ===" banner: the table below counts.
  grep -v '^=' "$work/$who.log" | tail -n 8
}
run sandbox -H "Authorization: Bearer $sandbox"
run live -H "Authorization: Bearer $live"
run none

# What the service did not answer is not "no 5xx": a service that died or stopped answering
# during a run fails it, with the end of its log.
unreachable=""
for who in sandbox live none; do
  grep -q 'Failed to establish a new connection\|Connection refused\|Max retries exceeded' "$work/$who.log" &&
    unreachable="$unreachable $who"
done
if [[ -n $unreachable ]] || ! kill -0 "$service" 2>/dev/null || ! curl -sf "$base/healthz" >/dev/null; then
  echo "[fuzz] the service stopped answering (runs:${unreachable:- none unreachable}); the end of its log:"
  tail -n 80 "$work/serve.log"
  exit 1
fi

out=${FUZZ_RESULTS_DIR:-$root/bench/results}
node bench/fuzz/report.mjs "$out" "$work/sandbox.ndjson" "$work/live.ndjson" "$work/none.ndjson"
