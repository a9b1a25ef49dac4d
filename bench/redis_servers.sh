# Local redis-servers for the Redis benchmarks (sourced by redis_bench.sh
# and redis_ab.sh). Each server lives in a directory of its own under
# $WORK, which the caller makes: its pid in WORK/NAME/pid, so the EXIT
# trap finds it even when start_server ran in a command substitution.
# Servers listen on 127.0.0.1 on free ports and are stopped by their pid.

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
