#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# scripts/cross-setup.sh ARCH (arm64|armhf): prepares this Debian machine for
# the cross build of the device side: adds the foreign architecture, installs
# the cross compiler, qemu-user and the ARCH builds of the device libraries.
# Idempotent: when everything is installed it only checks and returns.
# Needs root (or sudo) for the first run. Native packages are left as they
# are: the :ARCH -dev packages are Multi-Arch: same and co-install.
set -euo pipefail
cd "$(dirname "$0")/.."

arch=${1:-}
case "$arch" in
  arm64|armhf) ;;
  *) echo "usage: $0 arm64|armhf" >&2; exit 2 ;;
esac

# The device side's libraries, in the target architecture. nlohmann_json and
# doctest are header-only and come from the native packages.
target_packages=(
  libsqlite3-dev libsqlitecpp-dev
  libpaho-mqtt-dev libpaho-mqttpp-dev
  libssl-dev
)
host_packages=(crossbuild-essential-"$arch" qemu-user cmake pkg-config nlohmann-json3-dev doctest-dev
               libcli11-dev mosquitto file binutils-multiarch)

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

missing=()
for pkg in "${host_packages[@]}"; do installed "$pkg" || missing+=("$pkg"); done
for pkg in "${target_packages[@]}"; do installed "$pkg:$arch" || missing+=("$pkg:$arch"); done
if [ ${#missing[@]} -eq 0 ]; then
  echo "cross-setup $arch: everything is installed"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "run as root: missing ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
apt=("${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 -y -q --no-install-recommends)

if ! dpkg --print-foreign-architectures | grep -qx "$arch"; then
  echo "cross-setup $arch: adding the $arch architecture" >&2
  "${sudo[@]}" dpkg --add-architecture "$arch"
  "${apt[@]}" update >/dev/null
fi
echo "cross-setup $arch: installing ${missing[*]}" >&2
"${apt[@]}" install "${missing[@]}" >/dev/null || {
  "${apt[@]}" update >/dev/null
  "${apt[@]}" install "${missing[@]}"
}
echo "cross-setup $arch: done"
