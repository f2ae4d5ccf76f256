#!/usr/bin/env bash
# Installs (if missing) and runs a local Jaeger all-in-one for the end-to-end
# tests of minitrace-jaeger, with every port bound to 127.0.0.1 and in-memory
# storage.
#
#   bash scripts/jaeger.sh start    # install if needed, start, wait until it answers (default)
#   bash scripts/jaeger.sh stop     # stop the Jaeger this script started
#   bash scripts/jaeger.sh status   # exit 0 when the query API answers
#
# Ports: agent UDP compact 6831 and binary 6832, collector HTTP 14268 and
# gRPC 14250, query HTTP 16686 and gRPC 16685, admin 14269, agent HTTP 5778,
# zipkin-compact UDP 5775, OTLP 4317/4318. Zipkin HTTP stays disabled.
# Sized for the tests: the collector queues up to 200 000 spans (its default,
# 2 000, drops most of a 20 000-span request), and the agent's UDP receive
# buffer is 4 MiB where the kernel allows (its default, ~200 KiB, holds three
# full datagrams: a burst beyond that is lost).
#
# The binary is looked up in $JAEGER_ALL_IN_ONE, target/jaeger/bin, then
# $(go env GOPATH)/bin; if none has it, `go install` builds v1.48.0 (the last
# version that `go install` accepts) into target/jaeger/bin. That build takes
# a few minutes on a 2-core machine; the Go caches make later builds quick.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=v1.48.0
STATE_DIR="${JAEGER_STATE_DIR:-$PWD/target/jaeger}"
BIN_DIR="$STATE_DIR/bin"
PID_FILE="$STATE_DIR/all-in-one.pid"
LOG_FILE="$STATE_DIR/all-in-one.log"
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

running() { http_answers 16686 /api/services && http_answers 14269 /; }

find_binary() {
    local candidate gopath
    for candidate in "${JAEGER_ALL_IN_ONE:-}" "$BIN_DIR/all-in-one"; do
        if [[ -n $candidate && -x $candidate ]]; then
            echo "$candidate"
            return 0
        fi
    done
    if command -v go >/dev/null 2>&1; then
        gopath=$(go env GOPATH)
        if [[ -x $gopath/bin/all-in-one ]]; then
            echo "$gopath/bin/all-in-one"
            return 0
        fi
    fi
    return 1
}

install_binary() {
    if ! command -v go >/dev/null 2>&1; then
        log "Go is not installed: cannot build Jaeger all-in-one $VERSION"
        return 1
    fi
    mkdir -p "$BIN_DIR"
    log "building Jaeger all-in-one $VERSION into $BIN_DIR (a few minutes the first time)"
    # -buildvcs=false: the build runs inside this git work tree.
    (cd "$STATE_DIR" && GOBIN="$BIN_DIR" GOFLAGS=-buildvcs=false \
        go install "github.com/jaegertracing/jaeger/cmd/all-in-one@$VERSION") >&2
}

start() {
    if running; then
        log "already running on $HOST"
        return 0
    fi
    mkdir -p "$STATE_DIR"
    local bin
    if ! bin=$(find_binary); then
        install_binary
        bin=$(find_binary)
    fi
    # The agent's UDP receive buffer: as large as the kernel allows, up to
    # 4 MiB (the default, about 200 KiB, holds three full datagrams).
    local UDP_BUFFER=4194304 rmem_max
    rmem_max=$(cat /proc/sys/net/core/rmem_max 2>/dev/null || echo 0)
    if ((rmem_max > 0 && rmem_max < UDP_BUFFER)); then
        UDP_BUFFER=$rmem_max
    fi
    log "starting $bin (log: $LOG_FILE)"
    # OTEL_TRACES_SAMPLER: Jaeger does not trace itself into the storage under test.
    SPAN_STORAGE_TYPE=memory OTEL_TRACES_SAMPLER=always_off setsid nohup "$bin" \
        --memory.max-traces=200000 \
        --collector.queue-size=200000 \
        --processor.jaeger-compact.server-host-port=$HOST:6831 \
        --processor.jaeger-compact.server-queue-size=10000 \
        --processor.jaeger-compact.server-socket-buffer-size="$UDP_BUFFER" \
        --processor.jaeger-binary.server-host-port=$HOST:6832 \
        --processor.zipkin-compact.server-host-port=$HOST:5775 \
        --http-server.host-port=$HOST:5778 \
        --reporter.grpc.host-port=$HOST:14250 \
        --collector.grpc-server.host-port=$HOST:14250 \
        --collector.http-server.host-port=$HOST:14268 \
        --collector.otlp.grpc.host-port=$HOST:4317 \
        --collector.otlp.http.host-port=$HOST:4318 \
        --query.http-server.host-port=$HOST:16686 \
        --query.grpc-server.host-port=$HOST:16685 \
        --admin.http.host-port=$HOST:14269 \
        --log-level=warn \
        >"$LOG_FILE" 2>&1 </dev/null &
    echo $! >"$PID_FILE"
    local pid
    pid=$(cat "$PID_FILE")
    for _ in $(seq 1 120); do
        if running; then
            log "ready: query http://$HOST:16686, agent udp $HOST:6831, collector http://$HOST:14268"
            return 0
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            log "all-in-one exited; its log:"
            tail -n 30 "$LOG_FILE" >&2
            rm -f "$PID_FILE"
            return 1
        fi
        sleep 0.5
    done
    log "all-in-one did not answer within 60 s; its log:"
    tail -n 30 "$LOG_FILE" >&2
    return 1
}

stop() {
    if [[ ! -f $PID_FILE ]]; then
        log "no Jaeger started by this script"
        return 0
    fi
    local pid
    pid=$(cat "$PID_FILE")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
    fi
    rm -f "$PID_FILE"
    log "stopped"
}

case "${1:-start}" in
start) start ;;
stop) stop ;;
status) running ;;
*)
    echo "usage: $0 [start|stop|status]" >&2
    exit 2
    ;;
esac
