# SPDX-License-Identifier: Apache-2.0
# Sourced by the other scripts: edge_outbox_need_packages PKG... installs the
# Debian packages that are missing when run as root, or names them and fails.
edge_outbox_need_packages() {
  local missing=() pkg
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]}" >&2
    echo "install them with: sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
  echo "installing: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null 2>&1 || {
    apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  }
}

# What building and testing the native tree needs.
EDGE_OUTBOX_BUILD_PACKAGES=(
  build-essential cmake pkg-config
  libsqlite3-dev sqlite3 libsqlitecpp-dev
  libpaho-mqtt-dev libpaho-mqttpp-dev libzstd-dev
  nlohmann-json3-dev doctest-dev libcli11-dev libpq-dev
  mosquitto mosquitto-clients openssl postgresql
  libsystemd-dev systemd
  libcpp-httplib-dev
  prometheus
  patroni etcd-server pgbouncer
)
# What scripts/package-test.sh needs beyond the build (cpack's
# dpkg-shlibdeps comes with build-essential's dpkg-dev).
EDGE_OUTBOX_PACKAGE_TEST_PACKAGES=(lintian file)
# Clang with its sanitizer runtimes (ASan, UBSan, TSan, libFuzzer): the
# sanitizer builds (scripts/sanitize.sh) and the fuzzers (scripts/fuzz.sh).
EDGE_OUTBOX_CLANG_PACKAGES=(clang libclang-rt-14-dev)
