#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The demo a newcomer runs first: a simulated device records sensor readings
# at 50 Hz into its outbox while a private mosquitto broker is stopped for a
# while in the middle and started again on the same port; edge-outbox-ingest
# stores what arrives and confirms it to the device, which keeps each event
# until that confirmation (server confirmation, --confirm server). At the end it prints what was recorded, what arrived,
# the duplicates the ingest dropped, how many readings were lost (must be 0;
# the script exits non-zero otherwise), and how long the outage's backlog
# took to drain after the reconnection. Then two more devices forward the same
# number of readings recorded while the broker was out of reach, one with one
# event per MQTT message, one with batches of up to 100 compressed with zstd
# (--batch 100 --compress zstd), and it prints the bytes per event each put on
# the wire.
#
# Everything runs on 127.0.0.1 in a temporary directory; every process the
# script started is stopped on exit, also on Ctrl-C.
#
# Environment:
#   EDGE_OUTBOX_DEMO_SECONDS   how long the device produces (default 30); the
#                              outage starts at 1/3 and lasts 1/3 of it
#   EDGE_OUTBOX_DEMO_RATE      readings per second (default 50)
#   EDGE_OUTBOX_DEMO_WIRE_READINGS  readings of each of the two wire-bytes
#                              devices (default 1000)
#   EDGE_OUTBOX_BUILD_DIR      build tree to use (default build)
#   EDGE_OUTBOX_DEMO_NO_BUILD  set to 1 to use the binaries as they are
#   EDGE_OUTBOX_DEMO_KEEP      set to 1 to keep the temporary directory
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${EDGE_OUTBOX_DEMO_SECONDS:-30}
rate=${EDGE_OUTBOX_DEMO_RATE:-50}
wire_readings=${EDGE_OUTBOX_DEMO_WIRE_READINGS:-1000}
build_dir=${EDGE_OUTBOX_BUILD_DIR:-build}
device=demo-device
outage_at=$(( seconds / 3 ))
outage_for=$(( seconds / 3 ))
[ "$outage_for" -ge 1 ] || outage_for=1

say() { printf '== %s\n' "$*" >&2; }
die() { printf 'demo: %s\n' "$*" >&2; exit 1; }
now_ms() { date +%s%3N; }

# --- build ---------------------------------------------------------------
if [ "${EDGE_OUTBOX_DEMO_NO_BUILD:-0}" != 1 ]; then
  source scripts/deps.sh
  edge_outbox_need_packages "${EDGE_OUTBOX_BUILD_PACKAGES[@]}"
  if [ ! -f "$build_dir/CMakeCache.txt" ]; then
    say "configuring $build_dir"
    cmake -S . -B "$build_dir" >/dev/null
  fi
  say "building edge-outbox-sim, edge-outbox-ingest, edge-outbox-ctl in $build_dir"
  cmake --build "$build_dir" -j"$(nproc)" --target edge-outbox-sim edge-outbox-ingest edge-outbox-ctl >/dev/null
fi
sim=$build_dir/firmware-host/edge-outbox-sim
ctl=$build_dir/firmware-host/edge-outbox-ctl
ingest=$build_dir/ingest/edge-outbox-ingest
for bin in "$sim" "$ctl" "$ingest"; do
  [ -x "$bin" ] || die "$bin is missing: build it (or unset EDGE_OUTBOX_DEMO_NO_BUILD)"
done
mosquitto_bin=$(command -v mosquitto || true)
for candidate in /usr/sbin/mosquitto /usr/bin/mosquitto; do
  [ -n "$mosquitto_bin" ] || { [ -x "$candidate" ] && mosquitto_bin=$candidate; }
done
[ -n "$mosquitto_bin" ] || die "mosquitto not found: apt-get install mosquitto"
command -v sqlite3 >/dev/null || die "sqlite3 not found: apt-get install sqlite3"

# --- processes and cleanup -------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/edge-outbox-demo.XXXXXX")
broker_pid='' ingest_pid='' sim_pid=''
stop_pid() {  # stop_pid PID: SIGTERM, then SIGKILL after 5 s
  local pid=$1 i
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  for i in $(seq 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  local code=$?
  trap - EXIT INT TERM
  stop_pid "$sim_pid"
  stop_pid "$ingest_pid"
  stop_pid "$broker_pid"
  if [ "${EDGE_OUTBOX_DEMO_KEEP:-0}" = 1 ]; then
    say "kept $work"
  else
    rm -rf "$work"
  fi
  exit "$code"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
port=''
for _ in $(seq 100); do
  candidate=$(( 20000 + RANDOM % 40000 ))
  if port_free "$candidate"; then port=$candidate; break; fi
done
[ -n "$port" ] || die "no free port found on 127.0.0.1"
unreachable_port=''
for _ in $(seq 100); do
  candidate=$(( 20000 + RANDOM % 40000 ))
  if [ "$candidate" != "$port" ] && port_free "$candidate"; then unreachable_port=$candidate; break; fi
done
[ -n "$unreachable_port" ] || die "no free port found on 127.0.0.1"

{
  [ "$(id -u)" -ne 0 ] || echo "user root"
  echo "listener $port 127.0.0.1"
  echo "allow_anonymous true"
  # Persistence keeps the ingest's session (its subscription and the
  # messages queued for it) across the broker restart.
  echo "persistence true"
  echo "persistence_location $work/"
  echo "log_dest file $work/mosquitto.log"
  echo "max_queued_messages 1000000"
  echo "max_inflight_messages 0"
} > "$work/mosquitto.conf"

start_broker() {
  "$mosquitto_bin" -c "$work/mosquitto.conf" >>"$work/mosquitto.stderr" 2>&1 &
  broker_pid=$!
  local i
  for i in $(seq 100); do
    if ! port_free "$port"; then return 0; fi
    kill -0 "$broker_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/mosquitto.stderr" "$work/mosquitto.log" >&2 2>/dev/null || true
  die "mosquitto did not start on 127.0.0.1:$port"
}
wait_for_line() {  # wait_for_line FILE TEXT SECONDS
  local i
  for i in $(seq $(( $3 * 10 ))); do
    grep -q "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}
status_field() {  # status_field NAME: a number from edge-outbox-ctl status --json
  "$ctl" --db "$work/device.db" status --json 2>/dev/null | grep -o "\"$1\":[0-9]*" | cut -d: -f2
}

say "broker on 127.0.0.1:$port; files in $work"
start_broker

"$ingest" --store "sqlite:$work/ingest.db" --broker "mqtt://127.0.0.1:$port" \
  --client-id edge-outbox-demo-ingest --topic "devices/+/events/#" --log-level info \
  >"$work/ingest.stdout" 2>"$work/ingest.stderr" &
ingest_pid=$!
wait_for_line "$work/ingest.stderr" subscribed 20 || { cat "$work/ingest.stderr" >&2; die "the ingest did not subscribe"; }

say "device: $rate readings/s for ${seconds}s; broker down at ${outage_at}s for ${outage_for}s"
"$sim" --db "$work/device.db" --device-id "$device" --broker "mqtt://127.0.0.1:$port" \
  --rate "$rate" --duration "${seconds}s" --exit-when-drained --drain-timeout 120s --status-interval 2s \
  --backoff-max 2s --confirm server \
  >"$work/sim.stdout" 2>"$work/sim.stderr" &
sim_pid=$!
sim_started=$(now_ms)

sleep "$outage_at"
say "stopping the broker"
down_at=$(now_ms)
stop_pid "$broker_pid"
broker_pid=''
sleep "$outage_for"
published_before=$(status_field published_total || true)
published_before=${published_before:-0}
say "starting the broker again on the same port"
start_broker
up_at=$(now_ms)
outage_ms=$(( up_at - down_at ))

# Reconnect: from the broker's restart until the device's published total
# grows again. The drain is measured by the simulator itself: from its
# reconnection until every event enqueued before it is acknowledged (live
# readings keep arriving meanwhile, so `pending` need not reach 0 until
# production ends); it reports that backlog and time in its summary.
reconnect_ms=''
while kill -0 "$sim_pid" 2>/dev/null; do
  p=$(status_field published_total || true)
  if [ -n "$p" ] && [ "$p" -gt "$published_before" ]; then
    reconnect_ms=$(( $(now_ms) - up_at ))
    break
  fi
  sleep 0.1
done
sim_status=0
wait "$sim_pid" || sim_status=$?
sim_pid=''
[ -n "$reconnect_ms" ] || reconnect_ms=$(( $(now_ms) - up_at ))
if [ "$sim_status" -ne 0 ]; then
  cat "$work/sim.stderr" >&2
  printf -- '-- the ingest (last 40 lines of its log):\n' >&2
  tail -n 40 "$work/ingest.stderr" >&2 || true
  EDGE_OUTBOX_DEMO_KEEP=1
  die "edge-outbox-sim exited with status $sim_status (files kept in $work)"
fi
summary=$(tail -n 1 "$work/sim.stdout")
summary_field() { printf '%s' "$summary" | grep -o "\"$1\":[0-9]*" | cut -d: -f2; }
backlog=$(summary_field backlog_at_reconnect || true)
unconfirmed=$(summary_field unconfirmed || true)
drain_ms=$(summary_field drain_ms || true)
readings=$(sqlite3 "$work/device.db" "SELECT COUNT(*) FROM readings")

# The server confirmed every event; the store has them (the wait is a guard).
stored=0
for _ in $(seq 300); do
  stored=$(sqlite3 "$work/ingest.db" "SELECT COUNT(*) FROM events WHERE type = 'reading.recorded' AND source = '$device'" 2>/dev/null || echo 0)
  [ "$stored" -ge "$readings" ] && break
  sleep 0.1
done
# Bytes on the wire: each device records its readings with the broker out of
# reach, then a second run forwards the backlog (so that batches are full)
# and waits for the ingest's confirmation. The simulator counts the bytes of
# its PUBLISH and PUBACK packets (wire_bytes_per_event in its summary).
wire_run() {  # wire_run DEVICE FLAGS...: the forwarding run's summary on stdout
  local device=$1
  shift
  "$sim" --db "$work/$device.db" --device-id "$device" --broker "mqtt://127.0.0.1:$unreachable_port" \
    --count "$wire_readings" --rate 0 --durability normal >/dev/null 2>"$work/$device.offline.stderr" \
    || { cat "$work/$device.offline.stderr" >&2; die "edge-outbox-sim ($device, offline) failed"; }
  "$sim" --db "$work/$device.db" --device-id "$device" --broker "mqtt://127.0.0.1:$port" \
    --count 0 --exit-when-drained --drain-timeout 60s --confirm server "$@" \
    >"$work/$device.stdout" 2>"$work/$device.stderr" \
    || { cat "$work/$device.stderr" >&2; die "edge-outbox-sim ($device) failed"; }
  tail -n 1 "$work/$device.stdout"
}
say "bytes on the wire: $wire_readings readings one per message, then in batches of 100 with zstd"
single_summary=$(wire_run demo-single)
batched_summary=$(wire_run demo-batched --batch 100 --compress zstd)
json_number() { printf '%s' "$1" | grep -o "\"$2\":[0-9.]*" | cut -d: -f2; }
wire_lost=0
for wire_device in demo-single demo-batched; do
  n=0
  for _ in $(seq 300); do
    n=$(sqlite3 "$work/ingest.db" "SELECT COUNT(DISTINCT CAST(json_extract(CAST(payload AS TEXT), '\$.reading_id') AS INTEGER))
      FROM events WHERE type = 'reading.recorded' AND source = '$wire_device'" 2>/dev/null || echo 0)
    [ "$n" -ge "$wire_readings" ] && break
    sleep 0.1
  done
  wire_lost=$(( wire_lost + wire_readings - n ))
done

stop_pid "$ingest_pid"
ingest_pid=''
counters=$(tail -n 1 "$work/ingest.stdout")
duplicates=$(printf '%s' "$counters" | grep -o '"duplicates":[0-9]*' | cut -d: -f2)
lost=$(sqlite3 "$work/device.db" "ATTACH '$work/ingest.db' AS ingest;
  SELECT COUNT(*) FROM readings WHERE id NOT IN (
    SELECT CAST(json_extract(CAST(payload AS TEXT), '\$.reading_id') AS INTEGER)
    FROM ingest.events WHERE type = 'reading.recorded' AND source = '$device')")

fmt_s() { printf '%d.%01ds' $(( $1 / 1000 )) $(( $1 % 1000 / 100 )); }
fmt_s2() { printf '%d.%02ds' $(( $1 / 1000 )) $(( $1 % 1000 / 10 )); }
echo
echo "edge-outbox demo: $device, ${rate} Hz for ${seconds}s, broker at 127.0.0.1:$port"
printf '  %-34s %s\n' "device summary" "$summary"
printf '  %-34s %s\n' "readings recorded" "$readings"
printf '  %-34s %s\n' "events stored by ingest" "$stored"
printf '  %-34s %s\n' "duplicates dropped" "${duplicates:-?}"
printf '  %-34s %s\n' "unconfirmed on the device at exit" "${unconfirmed:-?} (server confirmation)"
printf '  %-34s %s\n' "lost" "$lost"
printf '  %-34s %s\n' "longest outage" "$(fmt_s "$outage_ms")"
printf '  %-34s %s\n' "reconnect after broker restart" "$(fmt_s "$reconnect_ms")"
if [ -n "$drain_ms" ]; then
  drain="$(fmt_s2 "$drain_ms") (backlog of ${backlog} events enqueued before the reconnect)"
elif [ -n "$backlog" ]; then
  drain="not drained before the device stopped (backlog of ${backlog} events)"
else
  drain="not measured (the device did not reconnect)"
fi
printf '  %-34s %s\n' "drain time after reconnect" "$drain"
printf '  %-34s %s\n' "total run" "$(fmt_s $(( $(now_ms) - sim_started )))"
echo
echo "bytes on the wire per event (PUBLISH + PUBACK packets; $wire_readings readings each, all stored by the ingest):"
printf '  %-34s %s\n' "one event per message" \
  "$(json_number "$single_summary" wire_bytes_per_event) bytes ($(json_number "$single_summary" messages) messages)"
printf '  %-34s %s\n' "--batch 100 --compress zstd" \
  "$(json_number "$batched_summary" wire_bytes_per_event) bytes ($(json_number "$batched_summary" messages) messages)"
echo
if [ "$lost" != 0 ] || [ "$wire_lost" != 0 ]; then
  echo "FAILED: $(( lost + wire_lost )) readings never reached the ingest (files kept in $work)" >&2
  EDGE_OUTBOX_DEMO_KEEP=1
  exit 1
fi
echo "lost 0: every reading recorded on the devices reached the server exactly once in its store"
