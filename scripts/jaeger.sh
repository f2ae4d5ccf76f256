#!/usr/bin/env bash
# Builds (if missing) and runs a local Jaeger v2 all-in-one for the end-to-end
# tests of minitrace-jaeger, with every port bound to 127.0.0.1 and in-memory
# storage, as configured in scripts/jaeger-v2.yaml.
#
#   bash scripts/jaeger.sh install  # build it if missing (the set-up step's part `jaeger`)
#   bash scripts/jaeger.sh start    # start, wait until it answers (default); never builds
#   bash scripts/jaeger.sh stop     # stop the Jaeger this script started
#   bash scripts/jaeger.sh status   # exit 0 when the query API answers
#
# Ports: Jaeger Thrift UDP compact 6831 and binary 6832 (what the v1 agent
# took), Thrift HTTP 14268, OTLP gRPC 4317 and HTTP 4318, query HTTP 16686
# (the v1 JSON API; the UI is a placeholder, its assets are not in a plain
# `go build`) and gRPC 16685, health check 13133 (`/status`), Prometheus
# metrics 8888 (`/metrics`). Sized for the tests: 200 000 traces in memory,
# a 10 000-datagram UDP queue, and 4 MiB UDP receive buffers where the kernel
# allows (net.core.rmem_max caps them).
#
# The binary is $JAEGER_BINARY if set, else target/jaeger-v2/bin/jaeger-$VERSION,
# built by `install` (scripts/setup.sh runs it): Jaeger v2 ships from the Go module
# github.com/jaegertracing/jaeger, whose tags stay v1.x (v1.76.0 is a 2.x
# release), and `go install` refuses it (replace directives), so it is built
# in a scratch module under target/jaeger-v2/build. That takes 4 to 8 minutes
# on 2 cores; the Go caches make later builds quick.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=v1.76.0
STATE_DIR="${JAEGER_STATE_DIR:-$PWD/target/jaeger-v2}"
BUILD_DIR="$STATE_DIR/build"
BIN_DIR="$STATE_DIR/bin"
PID_FILE="$STATE_DIR/jaeger.pid"
LOG_FILE="$STATE_DIR/jaeger.log"
CONFIG="$PWD/scripts/jaeger-v2.yaml"
# Where the v1.48 all-in-one of earlier versions of this script kept its pid: same ports.
LEGACY_PID_FILE="$PWD/target/jaeger/all-in-one.pid"
HOST=127.0.0.1

log() { echo "jaeger.sh: $*" >&2; }

# `http_answers PORT PATH`: true when an HTTP server on $HOST:PORT answers a
# GET of PATH with a 2xx status. Uses bash's /dev/tcp, so needs no curl.
http_answers() {
    local port=$1 path=$2 status
    status=$(timeout 3 bash -c '
        exec 3<>"/dev/tcp/$0/$1" || exit 1
        printf "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n" "$2" "$0" >&3
        head -n 1 <&3' "$HOST" "$port" "$path" 2>/dev/null) || return 1
    [[ $status =~ ^HTTP/1\.[01]\ 2[0-9][0-9] ]]
}

# The health check answers 2xx only once every pipeline component is up.
running() { http_answers 16686 /api/services && http_answers 13133 /status; }

find_binary() {
    local candidate
    for candidate in "${JAEGER_BINARY:-}" "$BIN_DIR/jaeger-$VERSION"; do
        if [[ -n $candidate && -x $candidate ]]; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

install_binary() {
    if ! command -v go >/dev/null 2>&1; then
        log "Go is not installed: cannot build Jaeger $VERSION"
        return 1
    fi
    mkdir -p "$BUILD_DIR" "$BIN_DIR"
    log "building Jaeger $VERSION (a 2.x release) into $BIN_DIR (4 to 8 minutes the first time)"
    # -buildvcs=false: the build runs inside this git work tree; .tmp then mv: an interrupted build leaves no binary.
    (
        cd "$BUILD_DIR"
        export GOFLAGS=-buildvcs=false
        [[ -f go.mod ]] || go mod init jaeger-build
        go get -tool "github.com/jaegertracing/jaeger/cmd/jaeger@$VERSION"
        go build -o "$BIN_DIR/jaeger-$VERSION.tmp" github.com/jaegertracing/jaeger/cmd/jaeger
        mv "$BIN_DIR/jaeger-$VERSION.tmp" "$BIN_DIR/jaeger-$VERSION"
    ) >&2
}

# `stop_pid FILE`: stops the process whose pid FILE holds, if it is still a Jaeger, and removes FILE.
stop_pid() {
    local file=$1 pid args
    pid=$(cat "$file")
    args=$(ps -o args= -p "$pid" 2>/dev/null) || args=
    # The command line guards against a reused pid: ours names $CONFIG, v1's ran all-in-one.
    if [[ $args == *"--config $CONFIG"* || $args == */all-in-one\ * ]]; then
        kill "$pid"
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -f "$file"
}

start() {
    if [[ -n ${JAEGER_ALL_IN_ONE:-} ]]; then
        log "JAEGER_ALL_IN_ONE (a v1 binary) is ignored: set JAEGER_BINARY to a Jaeger v2 binary instead"
    fi
    if [[ -f $LEGACY_PID_FILE ]]; then
        log "stopping the Jaeger v1 all-in-one an earlier version of this script started (same ports)"
        stop_pid "$LEGACY_PID_FILE"
    fi
    if running; then
        log "already running on $HOST"
        return 0
    fi
    mkdir -p "$STATE_DIR"
    local bin
    if ! bin=$(find_binary); then
        log "no Jaeger $VERSION binary: run bash scripts/setup.sh jaeger"
        return 1
    fi
    log "starting $bin --config $CONFIG (log: $LOG_FILE)"
    # The gate adds otelcol_receiver_requests, one per UDP datagram decoded, which large_trace_e2e counts.
    setsid nohup "$bin" --config "$CONFIG" --feature-gates=receiverhelper.newReceiverMetrics \
        >"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    local pid
    pid=$(cat "$PID_FILE")
    for _ in $(seq 1 120); do
        if running; then
            log "ready: query http://$HOST:16686, thrift udp $HOST:6831, thrift http http://$HOST:14268, otlp http://$HOST:4318"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            log "jaeger exited; its log:"
            tail -n 30 "$LOG_FILE" >&2
            rm -f "$PID_FILE"
            return 1
        fi
        sleep 0.5
    done
    log "jaeger did not answer within 60 s; its log:"
    tail -n 30 "$LOG_FILE" >&2
    return 1
}

stop() {
    local stopped=false
    for file in "$PID_FILE" "$LEGACY_PID_FILE"; do
        if [[ -f $file ]]; then
            stop_pid "$file"
            stopped=true
        fi
    done
    if $stopped; then
        log "stopped"
    else
        log "no Jaeger started by this script"
    fi
}

case "${1:-start}" in
install) find_binary >/dev/null || install_binary ;;
start) start ;;
stop) stop ;;
status) running ;;
*)
    echo "usage: $0 [install|start|stop|status]" >&2
    exit 2
    ;;
esac
