#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/cross-sysroot.sh ARCH PACKAGE... (ARCH: arm64|armhf; a PACKAGE is
# name:ARCH or an architecture-independent name): builds a sysroot for ARCH
# out of Debian's own packages, without installing any, and prints its path
# on stdout (messages go to stderr). Called by scripts/cross-setup.sh.
#
# The sysroot holds the dependency closure of the PACKAGEs and of
# libc6-dev:ARCH (Depends and Pre-Depends only), restricted to the ARCH and
# architecture-independent packages, at the versions apt would install:
# fetched with apt-get download from the configured archive into
# CACHE/debs-ARCH, unpacked with dpkg-deb -x into CACHE/sysroot-TRIPLE, their
# absolute symbolic links made relative so that they stay inside. The
# compiler is Debian's cross compiler (crossbuild-essential-ARCH): its
# libstdc++, libgcc and start files are its own, the sysroot holds the rest.
# CACHE/sysroot-TRIPLE/.edge-outbox-packages lists the packages and versions
# unpacked; when the list apt resolves now is the same, nothing is done.
# A new sysroot is unpacked beside the old one and replaces it whole.
# CACHE: EDGE_OUTBOX_CROSS_CACHE, default /var/cache/edge-outbox as root and
# ${XDG_CACHE_HOME:-~/.cache}/edge-outbox otherwise. Needs no root.
set -euo pipefail

arch=${1:-}
case "$arch" in
  arm64) triple=aarch64-linux-gnu ;;
  armhf) triple=arm-linux-gnueabihf ;;
  *) echo "usage: $0 arm64|armhf PACKAGE..." >&2; exit 2 ;;
esac
shift
say() { echo "cross-sysroot $arch: $*" >&2; }

# The layout of the sysroot and of its list; a change rebuilds every sysroot.
recipe=1

if [ -n "${EDGE_OUTBOX_CROSS_CACHE:-}" ]; then
  cache=$EDGE_OUTBOX_CROSS_CACHE
elif [ "$(id -u)" -eq 0 ]; then
  cache=/var/cache/edge-outbox
else
  cache=${XDG_CACHE_HOME:-$HOME/.cache}/edge-outbox
fi
sysroot=$cache/sysroot-$triple
debs=$cache/debs-$arch
mkdir -p "$cache" "$debs"
cache=$(cd "$cache" && pwd)
sysroot=$cache/sysroot-$triple
debs=$cache/debs-$arch

# One run at a time per architecture (CI and developers share the cache).
exec 9>"$cache/sysroot-$triple.lock"
flock 9

# --- the packages: the dependency closure, ARCH and arch-independent ones ---
roots=("$@" "libc6-dev:$arch")
mapfile -t closure < <(
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
      --no-replaces --no-enhances "${roots[@]}" |
    grep -v -e '^ ' -e '^<' | sort -u)
# name:ARCH are kept; names without an architecture are native or
# architecture-independent (apt-cache show tells which); other
# architectures' are dropped.
candidates=()
for pkg in "${closure[@]}"; do
  case "$pkg" in
    *:"$arch") candidates+=("$pkg") ;;
    *:*) ;;
    *) candidates+=("$pkg") ;;
  esac
done
# "name:arch=version", one a line, sorted: what apt-get download fetches.
wanted=$(apt-cache show --no-all-versions "${candidates[@]}" |
  awk -v arch="$arch" '
    /^Package: /      { p = $2 }
    /^Architecture: / { a = $2 }
    /^Version: /      { v = $2 }
    /^$/ { if (p != "" && (a == arch || a == "all")) print p ":" a "=" v; p = a = v = "" }
    END  { if (p != "" && (a == arch || a == "all")) print p ":" a "=" v }' | sort -u)
for pkg in "${roots[@]}"; do
  grep -q "^${pkg%%:*}:" <<<"$wanted" || { say "apt knows no package $pkg for $arch"; exit 1; }
done
manifest=$(printf 'recipe %s %s\n%s\n' "$recipe" "$triple" "$wanted")

if [ -f "$sysroot/.edge-outbox-packages" ] && [ "$(cat "$sysroot/.edge-outbox-packages")" = "$manifest" ]; then
  say "sysroot $sysroot is up to date ($(wc -l <<<"$wanted") packages)"
  echo "$sysroot"
  exit 0
fi
if [ -f "$sysroot/.edge-outbox-packages" ]; then
  say "the packages changed; rebuilding $sysroot:"
  diff <(tail -n +2 "$sysroot/.edge-outbox-packages") <(echo "$wanted") | grep '^[<>]' >&2 || true
else
  say "building $sysroot from $(wc -l <<<"$wanted") Debian packages"
fi

# --- fetch what is not in the cache yet (apt-get download: the archive) ---
# apt-get download names a file name_version_arch.deb, the epoch's colon as %3a.
deb_file() {
  local name=${1%%:*} rest=${1#*:}
  local a=${rest%%=*} v=${rest#*=}
  echo "$debs/${name}_${v//:/%3a}_$a.deb"
}
to_fetch=()
while read -r entry; do
  [ -f "$(deb_file "$entry")" ] || to_fetch+=("${entry/:all=/=}")
done <<<"$wanted"
if [ ${#to_fetch[@]} -gt 0 ]; then
  say "apt-get download ${#to_fetch[@]} packages into $debs"
  # As root apt would fetch as _apt, which may not write here.
  (cd "$debs" && apt-get -q -o APT::Sandbox::User="$(id -un)" download "${to_fetch[@]}" >&2)
fi

# --- unpack beside the old sysroot, then replace it ---
staging=$sysroot.new
rm -rf "$staging"
mkdir -p "$staging"
while read -r entry; do
  dpkg-deb -x "$(deb_file "$entry")" "$staging"
done <<<"$wanted"
# Absolute links (libfoo.so -> /lib/<triple>/libfoo.so.1, the loader's
# /lib/ld-linux-*.so) would leave the sysroot: made relative to their place.
while IFS= read -r -d '' link; do
  target=$(readlink "$link")
  case "$target" in
    /*) ln -sfn "$(realpath -s -m --relative-to="$(dirname "$link")" "$staging$target")" "$link" ;;
  esac
done < <(find "$staging" -type l -print0)
printf '%s\n' "$manifest" >"$staging/.edge-outbox-packages"
rm -rf "$sysroot"
mv "$staging" "$sysroot"

# Packages no longer wanted leave the cache.
keep=$(while read -r entry; do deb_file "$entry"; done <<<"$wanted")
for f in "$debs"/*.deb; do
  [ -e "$f" ] || continue
  grep -qxF "$f" <<<"$keep" || rm -f "$f"
done
say "sysroot $sysroot is ready ($(du -sh "$sysroot" | cut -f1))"
echo "$sysroot"
