#!/bin/sh
# serve_lib.sh — start, wait for and stop `vt serve` from a bench script so
# that no server outlives the script: not when it ends, fails, is
# interrupted (Ctrl-C) or terminated, nor when a server never becomes ready.
#
#   . bench/serve_lib.sh          sets SERVE_DIR (a fresh temporary folder,
#                                 removed at exit) and the EXIT/INT/TERM traps
#   serve_start LOG PORT CMD...   runs CMD (a `vt serve` on PORT) in the
#                                 background, output to LOG, and waits for its
#                                 /health (SERVE_READY_SECONDS, default 120);
#                                 a server that exits or is not ready by then
#                                 is stopped, its log printed, and it returns 1
#   serve_stop                    SIGTERM to the server serve_start started
#                                 last, and waits for it to exit
#
# A background job of a non-interactive shell ignores SIGINT, so Ctrl-C
# reaches the script and never its servers: the traps stop them. The pids
# are kept in a file, not only a variable, because scripts call serve_start
# inside $(...), a subshell whose variables the trapping shell never sees.
SERVE_DIR=$(mktemp -d)
serve_pid=

# Stop pid: SIGTERM (the server drains its requests), then SIGKILL after 30 s.
serve_kill() {
    kill -TERM "$1" 2>/dev/null || return 0
    n=0
    while kill -0 "$1" 2>/dev/null && [ "$n" -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true # reaps it when this shell started it
    return 0
}

serve_start() {
    log=$1 port=$2
    shift 2
    "$@" >"$log" 2>&1 &
    serve_pid=$!
    echo "$serve_pid" >>"$SERVE_DIR/pids"
    n=0
    until curl -sf "http://127.0.0.1:$port/health" >/dev/null 2>&1; do
        n=$((n + 1))
        if ! kill -0 "$serve_pid" 2>/dev/null || [ "$n" -gt $((${SERVE_READY_SECONDS:-120} * 2)) ]; then
            echo "serve_lib.sh: \`$*\` did not become ready on port $port; its log:" >&2
            cat "$log" >&2
            serve_stop
            return 1
        fi
        sleep 0.5
    done
}

serve_stop() {
    [ -n "$serve_pid" ] || return 0
    serve_kill "$serve_pid"
    grep -v -x "$serve_pid" "$SERVE_DIR/pids" >"$SERVE_DIR/pids.new" || true
    mv "$SERVE_DIR/pids.new" "$SERVE_DIR/pids"
    serve_pid=
}

serve_cleanup() {
    if [ -f "$SERVE_DIR/pids" ]; then
        for pid in $(cat "$SERVE_DIR/pids"); do serve_kill "$pid"; done
    fi
    rm -rf "$SERVE_DIR"
}

trap serve_cleanup EXIT
trap 'exit 130' INT # exit runs the EXIT trap
trap 'exit 143' TERM
