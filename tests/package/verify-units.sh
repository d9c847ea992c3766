#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/package/verify-units.sh UNIT BINARY [UNIT BINARY...]: runs
# `systemd-analyze verify` on each systemd unit with its /usr/bin/NAME
# replaced by BINARY (the build's) and /etc/default/NAME by the package's
# file in packaging/config/, a template unit as instance "test". Fails on a
# verify error and on any line verify prints about the unit (an unknown
# key, a value it cannot parse: warnings its exit status ignores).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
while [ $# -ge 2 ]; do
  unit=$1 binary=$2
  shift 2
  name=$(basename "$unit")
  [[ $name == *@.service ]] && name=${name/@./@test.}
  sed -e "s#/usr/bin/$(basename "$binary")#$binary#g" \
      -e "s#/etc/default/\([a-z-]*\)#$root/packaging/config/\1.default#g" "$unit" >"$work/$name"
  if ! output=$(systemd-analyze verify "$work/$name" 2>&1); then
    echo "FAIL $unit:"; echo "$output"; failed=1; continue
  fi
  if grep -F "$name" <<<"$output"; then
    echo "FAIL $unit: systemd-analyze has warnings (above)"; failed=1; continue
  fi
  echo "ok $unit"
done
exit $failed
