#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/package-test.sh BUILD_DIR [OUT_DIR]: the Debian packages of a
# configured and built tree (cmake/EdgeOutboxPackage.cmake), end to end:
#   1. cpack -G DEB into OUT_DIR (default BUILD_DIR/packages);
#   2. lintian on each .deb: any error fails (the warnings it prints are
#      listed in docs/deployment.md);
#   3. dpkg -i of them all, then: each installed binary's --version prints
#      "<name> <version>"; the user and group edge-outbox and the state
#      directories exist; systemd-analyze verify on the installed units; the
#      find_package consumers of tests/package (umbrella and core) and a
#      pkg-config build of the core one against /usr;
#   4. dpkg --purge of them all; no file of theirs, no /etc/edge-outbox and
#      no state directory is left.
# Needs root (dpkg) and the packages lintian, dpkg-dev (dpkg-shlibdeps) and
# systemd. With --build-only it stops after step 1 (a cross build's packages,
# which this machine cannot install). Prints each step's duration.
set -euo pipefail
build_only=0
if [ "${1:-}" = --build-only ]; then
  build_only=1
  shift
fi
build=$(cd "${1:?usage: scripts/package-test.sh [--build-only] BUILD_DIR [OUT_DIR]}" && pwd)
out=${2:-$build/packages}
root=$(cd "$(dirname "$0")/.." && pwd)
t0=$(date +%s)
step() { echo "--- package-test: $1 ($(( $(date +%s) - t0 ))s)"; }
fail() { echo "package-test: FAILED: $*" >&2; exit 1; }

version=$(sed -n 's/^CPACK_PACKAGE_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
[ -n "$version" ] || version=$(grep -m1 '^set(CPACK_PACKAGE_VERSION ' "$build/CPackConfig.cmake" | sed 's/.*"\(.*\)".*/\1/')

step "cmake --build --target edge-outbox-packaged"
cmake --build "$build" --target edge-outbox-packaged >"$build/package-test-build.log" 2>&1 ||
  { cat "$build/package-test-build.log" >&2; fail "building the packaged targets"; }
step "cpack"
rm -rf "$out"
mkdir -p "$out"
(cd "$build" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$out" >"$out/cpack.log" 2>&1) ||
  { cat "$out/cpack.log" >&2; fail "cpack"; }
rm -rf "$out/_CPack_Packages"
mapfile -t debs < <(find "$out" -maxdepth 1 -name '*.deb' | sort)
[ ${#debs[@]} -ge 2 ] || fail "cpack made ${#debs[@]} packages: ${debs[*]}"
for deb in "${debs[@]}"; do
  echo "$(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"
done
[ $build_only = 1 ] && { step "done (--build-only)"; exit 0; }

step "lintian"
for deb in "${debs[@]}"; do
  # --fail-on error: tags of severity error fail; warnings are printed.
  lintian --fail-on error --tag-display-limit 0 "$deb" || fail "lintian reports errors for $(basename "$deb")"
done

[ "$(id -u)" -eq 0 ] || fail "dpkg -i needs root"
mapfile -t names < <(for deb in "${debs[@]}"; do dpkg-deb -f "$deb" Package; done)
# Whatever happens below, the packages go.
trap 'dpkg --purge "${names[@]}" >/dev/null 2>&1 || true' EXIT

step "dpkg -i ${names[*]}"
dpkg -i "${debs[@]}" >"$out/dpkg-install.log" 2>&1 || { cat "$out/dpkg-install.log" >&2; fail "dpkg -i"; }
mapfile -t files < <(dpkg -L "${names[@]}" | sort -u)

step "the installed binaries' --version"
for binary in edge-outbox-forwarder edge-outbox-ctl edge-outbox-ingest edge-outbox-sim; do
  [ -x "/usr/bin/$binary" ] || { echo "  $binary: not packaged by this tree"; continue; }
  printed=$("/usr/bin/$binary" --version 2>&1) || fail "$binary --version exits $?: $printed"
  [ "$printed" = "$binary $version" ] || fail "$binary --version prints '$printed', not '$binary $version'"
  echo "  $printed"
done
file -L /usr/bin/edge-outbox-ctl | grep -q ", stripped" || fail "edge-outbox-ctl is not stripped"

step "user, group, state directories and units"
getent passwd edge-outbox >/dev/null || fail "no user edge-outbox"
getent group edge-outbox >/dev/null || fail "no group edge-outbox"
[ "$(stat -c '%a %U %G' /var/lib/edge-outbox)" = "2770 edge-outbox edge-outbox" ] ||
  fail "/var/lib/edge-outbox is $(stat -c '%a %U %G' /var/lib/edge-outbox)"
if [ -x /usr/bin/edge-outbox-ingest ]; then
  [ "$(stat -c '%a %U %G' /var/lib/edge-outbox-ingest)" = "750 edge-outbox edge-outbox" ] ||
    fail "/var/lib/edge-outbox-ingest is $(stat -c '%a %U %G' /var/lib/edge-outbox-ingest)"
  grep -qx /etc/default/edge-outbox-ingest /var/lib/dpkg/info/edge-outbox-ingest.conffiles ||
    fail "/etc/default/edge-outbox-ingest is no conffile"
fi
[ -f /etc/edge-outbox/forwarder.json ] || fail "no /etc/edge-outbox/forwarder.json"
grep -qx /etc/edge-outbox/forwarder.json /var/lib/dpkg/info/edge-outbox.conffiles || fail "forwarder.json is no conffile"
units=()
for unit in /lib/systemd/system/edge-outbox-ingest.service; do
  [ -f "$unit" ] && units+=("$unit")
done
if [ -x /usr/bin/edge-outbox-forwarder ]; then
  cp /lib/systemd/system/edge-outbox-forwarder@.service "$out/edge-outbox-forwarder@package-test.service"
  units+=("$out/edge-outbox-forwarder@package-test.service")
fi
if [ ${#units[@]} -gt 0 ]; then
  verify=$(systemd-analyze verify "${units[@]}" 2>&1) || fail "systemd-analyze verify: $verify"
  grep -E 'edge-outbox' <<<"$verify" && fail "systemd-analyze verify warns about the units (above)"
fi

step "find_package and pkg-config consumers against /usr"
consumers=$out/consumers
rm -rf "$consumers"
for consumer in umbrella core; do
  cmake -S "$root/tests/package/$consumer" -B "$consumers/$consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    >"$consumers.$consumer.log" 2>&1 && cmake --build "$consumers/$consumer" >>"$consumers.$consumer.log" 2>&1 ||
    { cat "$consumers.$consumer.log" >&2; fail "the $consumer consumer does not build against /usr"; }
done
"$consumers/umbrella/consumer" "$consumers/umbrella.db" || fail "the umbrella consumer"
"$consumers/core/core_consumer" "$consumers/core.db" || fail "the core consumer"
# shellcheck disable=SC2046
c++ -std=c++20 -o "$consumers/core_pc" "$root/tests/package/core/main.cpp" $(pkg-config --cflags --libs edge_outbox-core) ||
  fail "the core consumer does not build through pkg-config edge_outbox-core"
"$consumers/core_pc" "$consumers/core_pc.db" || fail "the pkg-config core consumer"
if pkg-config --exists edge-outbox-c; then
  printf '#include <edge_outbox/c/outbox.h>\n#include <stdio.h>\nint main(void) { puts(edge_outbox_version()); return 0; }\n' \
    >"$consumers/c_consumer.c"
  # shellcheck disable=SC2046
  cc -std=c11 -Wall -Werror -o "$consumers/c_consumer" "$consumers/c_consumer.c" $(pkg-config --cflags --libs edge-outbox-c) ||
    fail "a C program does not build through pkg-config edge-outbox-c"
  "$consumers/c_consumer" || fail "the C consumer"
fi

step "dpkg --purge ${names[*]}"
dpkg --purge "${names[@]}" >"$out/dpkg-purge.log" 2>&1 || { cat "$out/dpkg-purge.log" >&2; fail "dpkg --purge"; }
trap - EXIT
left=()
for f in "${files[@]}" /etc/edge-outbox /var/lib/edge-outbox /var/lib/edge-outbox-ingest; do
  # A file or link of the packages; a directory only if it is one of theirs
  # (/lib and the like are shared, or links to /usr on a merged /usr).
  case "$f" in
    /etc/edge-outbox|/var/lib/edge-outbox|/var/lib/edge-outbox-ingest) [ -e "$f" ] && left+=("$f") ;;
    *) { [ -L "$f" ] || [ -f "$f" ]; } && [ ! -d "$f" ] && left+=("$f") ;;
  esac
done
[ ${#left[@]} -eq 0 ] || fail "left after the purge: ${left[*]}"
step "done: ${#debs[@]} packages built, linted, installed and purged"
