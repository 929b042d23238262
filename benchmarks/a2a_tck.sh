#!/usr/bin/env bash
# The A2A project's conformance suite (a2aproject/a2a-tck), mandatory category, against
# `habakkuk serve` on 127.0.0.1, offline: the mock model, a temporary home, no key.
#
#   TCK_REPO=/path/to/a2a-tck benchmarks/a2a_tck.sh
#
# TCK_REPO     a local clone (or bare mirror) of github.com/a2aproject/a2a-tck: its `main`
#              branch is the 1.0 suite, `0.3.x` the 0.3 one (each is cloned to a temp dir)
# TCK_PYTHON   a Python with the TCK's requirements (pytest, httpx, grpcio, ...); default:
#              a venv made once at ${TMPDIR:-/tmp}/a2a-tck-venv from the TCK's pyproject
# PYTHON       the Python with Habakkuk installed (default: python3)
# TCK_DEV_PYTHON  optional: a Python with the 1.0-dev branch's requirements; then that
#              newer suite runs too (MUST level, JSON-RPC)
# TCK_PORT     the port to serve on (default 9999)
# TCK_LOGS     where each version's full pytest log is kept (default /tmp: a2a-tck-1.0.log,
#              a2a-tck-0.3.log)
#
# The served agent's turn runs a 2-second tool before it answers, and a2a.send_wait is 1s,
# so a blocking SendMessage answers with the task still working: the TCK's ListTasks and
# CancelTask tests need live tasks and send no returnImmediately. The card's URL follows
# the request's host, so the suite calls localhost (its card check flags 127.0.0.1).
# benchmarks/a2a_tck.md: the tests that still fail, and the spec lines they contradict.
# Prints each version's passed/failed counts and the failing tests.
set -euo pipefail

: "${TCK_REPO:?set TCK_REPO to a local clone or mirror of a2aproject/a2a-tck}"
PYTHON=${PYTHON:-python3}
PORT=${TCK_PORT:-9999}
LOGS=${TCK_LOGS:-/tmp}
WORK=$(mktemp -d)
SUT_PID=""
cleanup() {
    if [ -n "$SUT_PID" ]; then kill "$SUT_PID" 2>/dev/null || true; wait "$SUT_PID" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

if [ -z "${TCK_PYTHON:-}" ]; then
    VENV=${TMPDIR:-/tmp}/a2a-tck-venv
    if [ ! -x "$VENV/bin/python" ]; then
        git clone -q "$TCK_REPO" "$WORK/tck-deps"
        "$PYTHON" -m venv "$VENV"
        "$VENV/bin/pip" install -q "$WORK/tck-deps"  # its dependencies (run_tck.py runs from a clone)
    fi
    TCK_PYTHON=$VENV/bin/python
fi

serve() {  # serve [SEND_WAIT]: (re)start `habakkuk serve` on a fresh home
    if [ -n "$SUT_PID" ]; then kill "$SUT_PID" 2>/dev/null || true; wait "$SUT_PID" 2>/dev/null || true; fi
    rm -rf "$WORK/home" && mkdir -p "$WORK/home"
    cat >"$WORK/home/config.yaml" <<EOF
providers:
  mock:
    type: mock
    script:
      - steps:
          - tool_calls: [{name: exec, arguments: {command: "sleep 2"}}]
          - text: "Hello World! You said: {input}"
agents:
  main:
    model: mock/scripted
    mode: full
http:
  listen: 127.0.0.1:$PORT
a2a:
  serve: true
EOF
    if [ -n "${1:-}" ]; then echo "  send_wait: $1" >>"$WORK/home/config.yaml"; fi
    HABAKKUK_HOME="$WORK/home" "$PYTHON" -c "import sys; from habakkuk.cli import main; sys.exit(main())" serve >"$WORK/sut.log" 2>&1 &
    SUT_PID=$!
    for _ in $(seq 1 300); do
        if curl -fs "http://127.0.0.1:$PORT/.well-known/agent-card.json" >/dev/null 2>&1; then return; fi
        if ! kill -0 "$SUT_PID" 2>/dev/null; then cat "$WORK/sut.log"; exit 1; fi
        sleep 0.1
    done
}

run() {  # run BRANCH LABEL
    local dir="$WORK/tck-$2"
    git clone -q -b "$1" "$TCK_REPO" "$dir"
    (cd "$dir" && "$TCK_PYTHON" run_tck.py --sut-url "http://localhost:$PORT/a2a" \
        --category mandatory >"$LOGS/a2a-tck-$2.log" 2>&1) || true
    echo "== A2A $2 (a2a-tck $1 @ $(git -C "$dir" rev-parse --short HEAD)), mandatory"
    grep -E "^FAILED" "$LOGS/a2a-tck-$2.log" | sed 's/^/   /' || true
    grep -E "[0-9]+ (passed|failed)" "$LOGS/a2a-tck-$2.log" | tail -n 1 || true
}
serve 1s
run main 1.0
run 0.3.x 0.3

# The newer suite (branch 1.0-dev, `--level must`), when TCK_DEV_PYTHON has its
# dependencies: its blocking-send rule wants the default send_wait, so a fresh server.
if [ -n "${TCK_DEV_PYTHON:-}" ]; then
    serve
    dir="$WORK/tck-1.0-dev"
    git clone -q -b 1.0-dev "$TCK_REPO" "$dir"
    (cd "$dir" && "$TCK_DEV_PYTHON" run_tck.py --sut-host "http://localhost:$PORT" \
        --transport jsonrpc --level must >"$LOGS/a2a-tck-1.0-dev.log" 2>&1) || true
    echo "== A2A 1.0 (a2a-tck 1.0-dev @ $(git -C "$dir" rev-parse --short HEAD)), MUST, JSON-RPC"
    grep -E "^  ✗" "$LOGS/a2a-tck-1.0-dev.log" | cut -c1-160 | sed 's/^/ /' || true
    grep -E "[0-9]+ (passed|failed)" "$LOGS/a2a-tck-1.0-dev.log" | tail -n 1 || true
fi
