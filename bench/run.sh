#!/usr/bin/env bash
# bench/run.sh [--quick]: builds the benchmarks (Release, in build-bench or
# $EDGE_OUTBOX_BENCH_BUILD_DIR), starts a private mosquitto on a free
# 127.0.0.1 port, runs every benchmark, prints one markdown table and writes
# bench/results/latest.json (one key per figure, numbers only).
# --quick: smaller workloads (said in the *_rows / *_events keys), for CI;
# nothing is asserted on the figures.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

quick=()
for arg in "$@"; do
  case $arg in
    --quick) quick=(--quick) ;;
    *) echo "usage: bench/run.sh [--quick]" >&2; exit 2 ;;
  esac
done

build_dir=${EDGE_OUTBOX_BENCH_BUILD_DIR:-build-bench}
jobs=${EDGE_OUTBOX_BENCH_JOBS:-2}
# The tests are not needed here; the simulator is (sim_binary_bytes).
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DEDGE_OUTBOX_BENCH=ON -DEDGE_OUTBOX_TESTS=OFF \
  -DEDGE_OUTBOX_INSTALL=OFF -DEDGE_OUTBOX_FIRMWARE_HOST=ON >/dev/null
cmake --build "$build_dir" -j "$jobs" >/dev/null
bin=$build_dir/bench

work=$(mktemp -d "${TMPDIR:-/tmp}/edge-outbox-bench-run.XXXXXX")
broker_pid=
cleanup() {
  if [[ -n $broker_pid ]]; then
    kill "$broker_pid" 2>/dev/null || true
    wait "$broker_pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
cat >"$work/mosquitto.conf" <<EOF
listener $port 127.0.0.1
allow_anonymous true
persistence false
max_queued_messages 1000000
max_inflight_messages 0
# PUBACKs leave at once instead of waiting behind Nagle's algorithm (bench_naive's
# delayed link measured a window's round trip at 2-3x the link's RTT without it).
set_tcp_nodelay true
EOF
mosquitto -c "$work/mosquitto.conf" >"$work/mosquitto.log" 2>&1 &
broker_pid=$!
for _ in $(seq 100); do
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then break; fi
  sleep 0.1
done
broker=mqtt://127.0.0.1:$port

figures=$work/figures.txt
: >"$figures"
# run NAME ARGS...: one benchmark program; its "key value" lines are kept.
run() {
  local name=$1 t0
  shift
  if [[ ! -x $bin/$name ]]; then
    echo "--- $name: not built, skipped" >&2
    return 0
  fi
  t0=$(date +%s)
  echo "--- $name" >&2
  if "$bin/$name" "$@" >"$work/$name.out"; then
    cat "$work/$name.out" >>"$figures"
  else
    echo "--- $name FAILED (its figures are left out)" >&2
  fi
  echo "--- $name took $(( $(date +%s) - t0 ))s" >&2
}

run bench_write "${quick[@]}"
run bench_naive "${quick[@]}" --broker "$broker"
run bench_growth "${quick[@]}" --broker "$broker"
run bench_paho_buffer "${quick[@]}"
run bench_rss "${quick[@]}" --broker "$broker"
run bench_ingest "${quick[@]}" --broker "$broker"
# bench_forward (raw Paho against the forwarder) has its own options.
if [[ -x $bin/bench_forward ]]; then
  run bench_forward "${quick[@]}" --broker "$broker"
fi

# sim_binary_bytes: the stripped simulator, x86-64 and (if cross built) aarch64.
strip_size() {
  local strip=$1 binary=$2 key=$3
  if [[ -f $binary ]] && command -v "$strip" >/dev/null; then
    "$strip" -o "$work/stripped" "$binary" && echo "$key $(stat -c %s "$work/stripped")" >>"$figures"
  fi
}
strip_size strip "$build_dir/firmware-host/edge-outbox-sim" sim_binary_bytes
strip_size aarch64-linux-gnu-strip build-aarch64/firmware-host/edge-outbox-sim sim_binary_bytes_aarch64

mkdir -p bench/results
python3 - "$figures" "${quick[*]:-full}" <<'EOF'
import json, platform, sys

figures = {}
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 2:
        try:
            figures[parts[0]] = float(parts[1])
        except ValueError:
            pass
# bench_forward calls the forwarder / raw Paho ratio forward_ratio.
if "forward_ratio" in figures:
    figures.setdefault("forward_vs_paho_ratio", figures["forward_ratio"])

# key: (target text, test) -- the issue's targets.
targets = {
    "atomic_write_ratio": (">= 0.85", lambda v: v >= 0.85),
    "group_commit_ratio": (">= 0.85", lambda v: v >= 0.85),
    "forward_vs_paho_ratio": (">= 0.8", lambda v: v >= 0.8),
    "forward_vs_naive_ratio": (">= 3.5", lambda v: v >= 3.5),
    "drain_vs_paho_buffer_ratio": (">= 4", lambda v: v >= 4),
    "rss_backlog_delta_mib": ("<= 2", lambda v: v <= 2),
    "enqueue_growth_ratio": (">= 0.9", lambda v: v >= 0.9),
    "forward_growth_ratio": (">= 0.9", lambda v: v >= 0.9),
    "latency_p99_ms": ("<= 10", lambda v: v <= 10),
    "bytes_written_per_event_group": ("<= 1024", lambda v: v <= 1024),
    "ingest_vs_forward_ratio": (">= 1.0", lambda v: v >= 1.0),
}

def show(v):
    return f"{v:.0f}" if abs(v) >= 100 or v == int(v) else f"{v:.3g}"

print(f"\nedge-outbox benchmarks ({sys.argv[2]} run; {platform.machine()}, "
      f"{len(__import__('os').sched_getaffinity(0))} CPUs)\n")
print("| key | value | target | met? |")
print("|---|---|---|---|")
for key in list(targets) + sorted(k for k in figures if k not in targets):
    if key not in figures:
        if key in targets:
            print(f"| `{key}` | not measured | {targets[key][0]} | - |")
        continue
    v = figures[key]
    if key in targets:
        text, ok = targets[key]
        print(f"| `{key}` | {show(v)} | {text} | {'yes' if ok(v) else '**no**'} |")
    else:
        print(f"| `{key}` | {show(v)} | report | |")

with open("bench/results/latest.json", "w") as out:
    json.dump(figures, out, indent=2, sort_keys=True)
    out.write("\n")
print("\nwrote bench/results/latest.json")
EOF
