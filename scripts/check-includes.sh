#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/check-includes.sh [--no-link]: checks the dependency rules of
# docs/design.md over the #include lines, and the link rules over CMake's
# target graph. Prints each violation as `file:line: rule` and exits 1 on any.
#
# Include rules (project headers only; the standard library and third-party
# headers are free, except Paho's <mqtt/...> where noted):
#   src/common   includes nothing of storage/, forward/, mqtt/
#   src/storage  never includes "forward/...", "mqtt/...", <edge_outbox/mqtt/...>, Paho
#   src/forward  never includes "mqtt/...", <edge_outbox/mqtt/...>, Paho
#   src/mqtt     never includes "storage/..."
#   include/edge_outbox/*.h (the core's public headers) never include Paho
#   include/edge_outbox/c/ (the C API) includes only C standard headers
#   src/c        (the C API) includes only its own "c/...", the public
#                <edge_outbox/...> headers but the MQTT publisher's, and of
#                the core's inside "storage/open_transaction.h" and the
#                header-only "common/mutex.h"; never Paho
#   wire/        includes only its own files and <edge_outbox/wire/...>
#                (and <edge_outbox/cloudevents.h>, the old forwarding path)
#   ingest/      includes only <edge_outbox/wire/...>, <edge_outbox/clock.h>,
#                "ingest/...", "host/...", "common/mutex.h", "common/backoff.h", "common/thread_name.h"
#   ingest/'s rooms: every file of ingest/ lives in a room, ingest/<room>/<name>
#                (model, store, commit, confirm, intake, tools, service),
#                ingest/main.cpp alone above them; the ingest's headers are
#                included as "ingest/<room>/<name>.h" everywhere (ingest/,
#                tests/, bench/, fuzz/); a room includes of the ingest only
#                  model/    model/
#                  store/    model/, store/
#                  commit/   model/, store/, commit/
#                  confirm/  model/, store/, commit/, confirm/
#                  intake/   model/, store/, commit/, confirm/, intake/
#                  tools/    model/, store/, commit/, intake/, tools/
#                  service/  every room; ingest/main.cpp too
#                so nothing below includes service/ or tools/
#   host/        includes only "host/...", "common/mutex.h", "common/backoff.h", "common/thread_name.h"
#   tests/support (the testkit, which the benchmarks link) includes no doctest
#                but in doctest_main.cpp and error_checks.h
#   bench/       includes no doctest nor "support/error_checks.h", and the
#                ingest's headers as "ingest/<room>/<name>.h", never by bare
#                name
# Link rules (configure runs in a scratch directory; --no-link skips them):
#   a device-only build (-DEDGE_OUTBOX_DEVICE_ONLY=ON) has no ingest target;
#   the ingest links neither edge_outbox::core nor edge_outbox::mqtt (nor the
#   umbrella edge_outbox::edge_outbox); the C API's library (edge_outbox_c)
#   links neither edge_outbox::mqtt nor Paho.
set -euo pipefail
cd "$(dirname "$0")/.."

link_rules=1
case "${1:-}" in
  --no-link) link_rules=0 ;;
  "") ;;
  *) echo "usage: $0 [--no-link]" >&2; exit 2 ;;
esac

violations=0
violation() {  # FILE:LINE RULE
  echo "$1: $2"
  violations=$((violations + 1))
}

# includes DIR...: every include of the C++ files under DIR as
# `file<TAB>line<TAB>kind<TAB>path`, kind being q ("...") or a (<...>).
includes() {
  local f
  while IFS= read -r -d '' f; do
    # A file without an include is no failure (it would end the listing).
    { grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"][^>"]+[>"]' "$f" || true; } |
      sed -E 's/^([0-9]+):[[:space:]]*#[[:space:]]*include[[:space:]]*([<"])([^>"]+)[>"].*/\1\t\2\t\3/' |
      while IFS=$'\t' read -r line open path; do
        [ "$open" = '"' ] && kind=q || kind=a
        printf '%s\t%s\t%s\t%s\n' "$f" "$line" "$kind" "$path"
      done
  done < <(find "$@" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' \) -print0 | sort -z)
}

is_paho() { [[ $1 == mqtt/* ]]; }  # <mqtt/async_client.h> and friends

# src/common, src/storage, src/forward, src/mqtt
for layer in common storage forward mqtt; do
  [ -d "src/$layer" ] || continue
  while IFS=$'\t' read -r file line kind path; do
    where="$file:$line"
    case "$layer" in
      common)
        if [ "$kind" = q ] && [[ $path == storage/* || $path == forward/* || $path == mqtt/* ]]; then
          violation "$where" "src/common includes nothing of storage/, forward/, mqtt/ (\"$path\")"
        fi ;;
      storage)
        if [ "$kind" = q ] && [[ $path == forward/* || $path == mqtt/* ]]; then
          violation "$where" "src/storage never includes forward/ or mqtt/ (\"$path\")"
        elif [ "$kind" = a ] && [[ $path == edge_outbox/mqtt/* || $path == edge_outbox/mqtt_publisher.h ]]; then
          violation "$where" "src/storage never includes the MQTT publisher (<$path>)"
        elif [ "$kind" = a ] && is_paho "$path"; then
          violation "$where" "src/storage never includes Paho: edge_outbox::core links no Paho (<$path>)"
        fi ;;
      forward)
        if [ "$kind" = q ] && [[ $path == mqtt/* ]]; then
          violation "$where" "src/forward never includes mqtt/ (\"$path\")"
        elif [ "$kind" = a ] && [[ $path == edge_outbox/mqtt/* || $path == edge_outbox/mqtt_publisher.h ]]; then
          violation "$where" "src/forward never includes the MQTT publisher (<$path>)"
        elif [ "$kind" = a ] && is_paho "$path"; then
          violation "$where" "src/forward never includes Paho: edge_outbox::core links no Paho (<$path>)"
        fi ;;
      mqtt)
        if [ "$kind" = q ] && [[ $path == storage/* ]]; then
          violation "$where" "src/mqtt never includes storage/ (\"$path\")"
        fi ;;
    esac
  done < <(includes "src/$layer")
done

# The core's public headers (include/edge_outbox/, not its mqtt/ folder).
while IFS=$'\t' read -r file line kind path; do
  if [ "$kind" = a ] && is_paho "$path"; then
    violation "$file:$line" "the core's public headers never include Paho (<$path>)"
  fi
done < <(includes include/edge_outbox -path include/edge_outbox/mqtt -prune -o)

# The C API: its header is C, and src/c sees the core through its public
# headers, the held-open transaction and the annotated mutex only.
while IFS=$'\t' read -r file line kind path; do
  if [ "$kind" = q ] || [[ $path == */* ]]; then
    violation "$file:$line" "include/edge_outbox/c/ includes only C standard headers ($path)"
  fi
done < <(includes include/edge_outbox/c)
if [ -d src/c ]; then
  while IFS=$'\t' read -r file line kind path; do
    where="$file:$line"
    if [ "$kind" = q ]; then
      case "$path" in
        c/* | storage/open_transaction.h | common/mutex.h) ;;
        *) violation "$where" "src/c includes of the core's inside only \"storage/open_transaction.h\" and \"common/mutex.h\" (\"$path\")" ;;
      esac
    elif [[ $path == edge_outbox/mqtt/* || $path == edge_outbox/mqtt_publisher.h ]] || is_paho "$path"; then
      violation "$where" "src/c never includes the MQTT publisher or Paho: libedge-outbox.so.0 links no Paho (<$path>)"
    fi
  done < <(includes src/c)
fi

# wire/: its own files (a quoted include resolves inside wire/) and
# <edge_outbox/wire/...>.
if [ -d wire ]; then
  wire_root=$(realpath wire)
  while IFS=$'\t' read -r file line kind path; do
    where="$file:$line"
    if [ "$kind" = q ]; then
      target=$(realpath -m "$(dirname "$file")/$path")
      if [[ $target != "$wire_root"/* ]] || [ ! -f "$target" ]; then
        violation "$where" "wire/ includes only its own files (\"$path\")"
      fi
    elif [[ $path == edge_outbox/* && $path != edge_outbox/wire/* && $path != edge_outbox/cloudevents.h ]]; then
      violation "$where" "wire/ includes no <edge_outbox/...> header but <edge_outbox/wire/...> (<$path>)"
    fi
  done < <(includes wire)
fi

# ingest/ and host/: the binaries' side.
for side in ingest host; do
  [ -d "$side" ] || continue
  while IFS=$'\t' read -r file line kind path; do
    where="$file:$line"
    if [ "$kind" = q ]; then
      case "$path" in
        host/* | common/mutex.h | common/backoff.h | common/thread_name.h) ;;
        ingest/*) [ "$side" = ingest ] ||
          violation "$where" "host/ includes only \"host/...\", \"common/mutex.h\", \"common/backoff.h\", \"common/thread_name.h\" (\"$path\")" ;;
        *) if [ "$side" = ingest ]; then
             violation "$where" "ingest/ includes only \"ingest/...\", \"host/...\", \"common/mutex.h\", \"common/backoff.h\", \"common/thread_name.h\" (\"$path\")"
           else
             violation "$where" "host/ includes only \"host/...\", \"common/mutex.h\", \"common/backoff.h\", \"common/thread_name.h\" (\"$path\")"
           fi ;;
      esac
    elif [[ $path == edge_outbox/* ]]; then
      if [ "$side" = host ]; then
        violation "$where" "host/ includes no <edge_outbox/...> header (<$path>)"
      elif [[ $path != edge_outbox/wire/* && $path != edge_outbox/clock.h ]]; then
        violation "$where" "ingest/ includes no <edge_outbox/...> header but <edge_outbox/wire/...> and <edge_outbox/clock.h> (<$path>)"
      fi
    fi
  done < <(includes "$side")
done

# ingest/'s rooms (docs/design.md "The ingest's rooms").
ingest_rooms="model store commit confirm intake tools service"
# ingest_may_include ROOM: the rooms whose headers ROOM's files may include
# (main: ingest/main.cpp); nothing for a folder that is no room.
ingest_may_include() {
  case "$1" in
    model) echo "model" ;;
    store) echo "model store" ;;
    commit) echo "model store commit" ;;
    confirm) echo "model store commit confirm" ;;
    intake) echo "model store commit confirm intake" ;;
    tools) echo "model store commit intake tools" ;;
    service | main) echo "$ingest_rooms" ;;
  esac
}
if [ -d ingest ]; then
  while IFS= read -r -d '' file; do
    case "$file" in
      ingest/main.cpp | ingest/CMakeLists.txt) continue ;;
    esac
    room=${file#ingest/}
    room=${room%%/*}
    if [[ $file != ingest/*/* || $file == ingest/*/*/* ]] || [ -z "$(ingest_may_include "$room")" ] ||
       [ "$room" = main ]; then
      violation "$file:1" "every file of ingest/ lives in a room, ingest/<room>/<name> (${ingest_rooms// /, }), ingest/main.cpp alone above them"
    fi
  done < <(find ingest -type f -print0 | sort -z)
  ingest_includers=()
  for dir in ingest tests bench fuzz; do
    [ -d "$dir" ] && ingest_includers+=("$dir")
  done
  while IFS=$'\t' read -r file line kind path; do
    [ "$kind" = q ] && [[ $path == ingest/* ]] || continue
    where="$file:$line"
    to=${path#ingest/}
    to=${to%%/*}
    if [[ $path != ingest/*/* || $path == ingest/*/*/* ]] || [ "$to" = main ] ||
       [ -z "$(ingest_may_include "$to")" ] || [ ! -f "$path" ]; then
      violation "$where" "the ingest's headers are included as \"ingest/<room>/<name>.h\", of a room: ${ingest_rooms// /, } (\"$path\")"
      continue
    fi
    [[ $file == ingest/* ]] || continue
    if [ "$file" = ingest/main.cpp ]; then
      from=main
    else
      from=${file#ingest/}
      from=${from%%/*}
    fi
    allowed=$(ingest_may_include "$from")
    [ -n "$allowed" ] || continue  # a file outside the rooms: reported above
    if [[ " $allowed " != *" $to "* ]]; then
      violation "$where" "ingest/$from/ includes of the ingest only ${allowed// /, } (\"$path\")"
    fi
  done < <(includes "${ingest_includers[@]}")
fi

# tests/support: the testkit has no doctest but in these two files.
if [ -d tests/support ]; then
  while IFS=$'\t' read -r file line kind path; do
    case "$file" in
      tests/support/doctest_main.cpp | tests/support/error_checks.h) continue ;;
    esac
    if [[ $path == doctest/* || $path == doctest.h ]]; then
      violation "$file:$line" "tests/support includes doctest only in doctest_main.cpp and error_checks.h ($path)"
    fi
  done < <(includes tests/support)
fi

# bench/: no doctest (through error_checks.h or not); the ingest's headers by
# their "ingest/..." path.
if [ -d bench ]; then
  while IFS=$'\t' read -r file line kind path; do
    where="$file:$line"
    if [[ $path == doctest/* || $path == doctest.h || $path == support/error_checks.h ]]; then
      violation "$where" "bench/ includes no doctest, nor support/error_checks.h ($path)"
    elif [[ $path != ingest/* ]] && [ ! -f "bench/$path" ]; then
      for header in ingest/"$path" ingest/*/"$path"; do
        if [ -f "$header" ]; then
          violation "$where" "bench/ includes the ingest's headers as \"$header\" (\"$path\")"
          break
        fi
      done
    fi
  done < <(includes bench)
fi

# Link rules, on CMake's target graph.
if [ "$link_rules" = 1 ]; then
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  # configure NAME ARGS...: a configure of the tree with only the libraries
  # and binaries (no tests, benchmarks, install); its graph in NAME.dot*.
  configure() {
    local name=$1
    shift
    if ! cmake -S . -B "$scratch/$name" --graphviz="$scratch/$name.dot" -DEDGE_OUTBOX_TESTS=OFF \
         -DEDGE_OUTBOX_BENCH=OFF -DEDGE_OUTBOX_INSTALL=OFF "$@" >"$scratch/$name.log" 2>&1; then
      cat "$scratch/$name.log" >&2
      echo "check-includes.sh: configuring $name failed" >&2
      exit 2
    fi
  }
  configure device -DEDGE_OUTBOX_DEVICE_ONLY=ON
  for target in edge_outbox_ingest_lib edge-outbox-ingest; do
    if grep -qE "label = \"$target[\"\\]" "$scratch/device.dot"; then
      violation "CMakeLists.txt:1" "a device-only build (-DEDGE_OUTBOX_DEVICE_ONLY=ON) has no ingest target ($target)"
    fi
  done
  configure full -DEDGE_OUTBOX_DEVICE_ONLY=OFF
  graph=$scratch/full.dot.edge_outbox_c
  if [ ! -f "$graph" ]; then
    violation "src/CMakeLists.txt:1" "the full build has the C API's target edge_outbox_c"
  else
    for lib in edge_outbox_mqtt edge_outbox PahoMqttCpp::paho-mqttpp3; do
      if grep -qE -- "-> $lib\$" "$graph"; then
        violation "src/CMakeLists.txt:1" "the C API's library links no Paho (edge_outbox_c links $lib)"
      fi
    done
  fi
  # full.dot.TARGET: TARGET and everything it links, directly or not.
  for target in edge_outbox_ingest_lib edge-outbox-ingest; do
    graph=$scratch/full.dot.$target
    if [ ! -f "$graph" ]; then
      violation "ingest/CMakeLists.txt:1" "the full build has the ingest target $target"
      continue
    fi
    # The edges' comments name the real targets: "// A -> B".
    for lib in edge_outbox_core edge_outbox_mqtt edge_outbox; do
      if grep -qE -- "-> $lib\$" "$graph"; then
        violation "ingest/CMakeLists.txt:1" "the ingest links only wire and host ($target links $lib)"
      fi
    done
  done
fi

if [ "$violations" -gt 0 ]; then
  echo "check-includes.sh: $violations violation(s) of the dependency rules (docs/design.md)"
  exit 1
fi
echo "check-includes.sh: the dependency rules hold"
