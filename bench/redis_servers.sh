# Local redis-servers for the Redis benchmarks (sourced by redis_bench.sh
# and redis_ab.sh). Each server lives in a directory of its own under
# $WORK (bench_work makes it): its pid in WORK/NAME/pid, so the EXIT trap
# finds it even when start_server ran in a command substitution.
# Servers listen on 127.0.0.1 on free ports and are stopped by their pid.

# bench_work NAME: WORK, a fresh directory that the script's exit
# removes, with every server still running in it stopped first.
bench_work() {
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1-XXXXXX")
    trap 'stop_all_servers; rm -rf "$WORK"' EXIT
}

# The 100-byte value every benchmark writes.
VALUE=$(head -c 100 /dev/zero | tr '\0' 'v')

# rps PORT COMMAND...: requests per second of one command (OPS requests,
# PIPE a pipeline, 4 clients, keys from 1 M).
rps() {
    local port=$1
    shift
    redis-benchmark -p "$port" -n "$OPS" -P "$PIPE" -r 1000000 -c 4 --csv "$@" 2>/dev/null |
        awk -F'"' 'NR==2 {print int($4)}'
}

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# stop_server NAME: stops the server of WORK/NAME by its pid, if running.
stop_server() {
    local f="$WORK/$1/pid" pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f")
    rm -f "$f"
    kill "$pid" 2>/dev/null || return 0
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.05; done
}

stop_all_servers() {
    for f in "$WORK"/*/pid; do
        if [ -f "$f" ]; then stop_server "$(basename "$(dirname "$f")")"; fi
    done
}

# start_server NAME [server args...]: a fresh server in WORK/NAME; prints
# its port. Exits, with the end of its log, when it does not answer
# within 5 s (a module that fails to load, a bad argument): a benchmark
# would otherwise wait on a port nothing listens on.
start_server() {
    local name=$1 port
    shift
    port=$(free_port)
    mkdir -p "$WORK/$name"
    redis-server --port "$port" --bind 127.0.0.1 --dir "$WORK/$name" --save "" --appendonly no \
        --logfile server.log "$@" >/dev/null 2>&1 &
    echo "$!" >"$WORK/$name/pid"
    for _ in $(seq 100); do
        if redis-cli -p "$port" ping >/dev/null 2>&1; then
            echo "$port"
            return 0
        fi
        sleep 0.05
    done
    echo "redis-server $name did not start; the end of $WORK/$name/server.log:" >&2
    tail -5 "$WORK/$name/server.log" >&2 2>/dev/null || true
    stop_server "$name"
    exit 1
}
