#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/cross-setup.sh ARCH (arm64|armhf): prepares this Debian machine for
# the cross build of the device side and prints, on stdout, the sysroot the
# build must use (an empty line: none, the multiarch packages are installed).
# Every message goes to stderr.
#
# The build tools are installed natively: the cross compiler
# (crossbuild-essential-ARCH), qemu-user, cmake, mosquitto. The device's
# libraries in the target architecture come one of two ways:
# - multiarch: the :ARCH -dev packages installed next to the native ones.
#   Multi-Arch: same packages must have the same version in every
#   architecture, so this fails whenever the archive's ARCH index lags behind
#   the native one (a security update not yet built, or an index that cannot
#   be fetched).
# - sysroot: the same Debian packages, fetched with apt-get download and
#   unpacked (never installed) into a directory of their own: the dependency
#   closure of the -dev packages in ARCH, plus the architecture-independent
#   header-only ones (nlohmann_json, doctest, CLI11). Rebuilt when that list
#   of packages or versions changes; otherwise only checked.
# EDGE_OUTBOX_CROSS_MODE chooses: auto (default: multiarch, and the sysroot
# when the multiarch install is impossible), multiarch, sysroot.
# EDGE_OUTBOX_CROSS_CACHE is where the sysroots and their packages are kept
# (default /var/cache/edge-outbox as root, else ~/.cache/edge-outbox).
# Needs root (or sudo) for the packages it installs; the sysroot needs none.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:-}
case "$arch" in
  arm64|armhf) ;;
  *) echo "usage: $0 arm64|armhf" >&2; exit 2 ;;
esac
mode=${EDGE_OUTBOX_CROSS_MODE:-auto}
case "$mode" in
  auto|multiarch|sysroot) ;;
  *) echo "EDGE_OUTBOX_CROSS_MODE must be auto, multiarch or sysroot, not '$mode'" >&2; exit 2 ;;
esac
say() { echo "cross-setup $arch: $*" >&2; }

# The device side's libraries, in the target architecture.
target_packages=(
  libsqlite3-dev libsqlitecpp-dev
  libpaho-mqtt-dev libpaho-mqttpp-dev
  libssl-dev libzstd-dev libsystemd-dev
  libcpp-httplib-dev
)
# Header-only and architecture independent: native packages for the
# multiarch build, unpacked into the sysroot for the sysroot build (only the
# sysroot is searched then).
header_only_packages=(nlohmann-json3-dev doctest-dev libcli11-dev)
host_packages=(crossbuild-essential-"$arch" qemu-user cmake pkg-config mosquitto file binutils-multiarch
               "${header_only_packages[@]}")

installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)

# apt-get update, whose failure to fetch one index (a mirror in sync, an
# architecture lagging) is reported but does not stop the setup: what can be
# installed from the other indexes still is.
apt_update() {
  "${apt[@]}" update >&2 || say "apt-get update failed (above); going on with the indexes there are"
}

# --- the foreign architecture and the native build tools ---
# (No grep -q in a pipe here: under pipefail its early exit fails dpkg.)
if ! grep -qx "$arch" <<<"$(dpkg --print-foreign-architectures)"; then
  say "adding the $arch architecture"
  "${sudo[@]}" dpkg --add-architecture "$arch"
  apt_update
fi
missing=()
for pkg in "${host_packages[@]}"; do installed "$pkg" || missing+=("$pkg"); done
if [ ${#missing[@]} -gt 0 ]; then
  say "installing the build tools: ${missing[*]}"
  "${apt[@]}" install "${missing[@]}" >&2 || {
    apt_update
    "${apt[@]}" install "${missing[@]}" >&2
  }
fi

# --- multiarch: the :ARCH -dev packages installed ---
multiarch_missing=()
for pkg in "${target_packages[@]}"; do installed "$pkg:$arch" || multiarch_missing+=("$pkg:$arch"); done

# Installs the missing :ARCH packages; fails, with apt's reason on stderr, when
# apt cannot (a simulation first: nothing is changed then).
install_multiarch() {
  local simulation
  if ! simulation=$(apt-get -s -q --no-install-recommends install "${multiarch_missing[@]}" 2>&1); then
    say "the multiarch install of ${multiarch_missing[*]} is impossible; apt says:"
    grep -E '^ |^E:' <<<"$simulation" | head -20 >&2
    return 1
  fi
  say "installing ${multiarch_missing[*]}"
  "${apt[@]}" install "${multiarch_missing[@]}" >&2 && return 0
  apt_update
  "${apt[@]}" install "${multiarch_missing[@]}" >&2
}

if [ "$mode" != sysroot ]; then
  if [ ${#multiarch_missing[@]} -eq 0 ]; then
    say "multiarch: the $arch -dev packages are installed"
    echo
    exit 0
  fi
  if install_multiarch; then
    say "multiarch: the $arch -dev packages are installed"
    echo
    exit 0
  fi
  if [ "$mode" = multiarch ]; then
    say "EDGE_OUTBOX_CROSS_MODE=multiarch: no sysroot as a fallback"
    exit 1
  fi
  say "falling back to a sysroot of the same Debian packages, unpacked"
else
  say "EDGE_OUTBOX_CROSS_MODE=sysroot"
fi

# --- sysroot: the Debian packages unpacked ---
scripts/cross-sysroot.sh "$arch" "${target_packages[@]/%/:$arch}" "${header_only_packages[@]}"
