# SPDX-License-Identifier: Apache-2.0
# Shared part of the edge-outbox cross toolchain files; include it after
# setting EDGE_OUTBOX_TRIPLE (the GNU triple, e.g. aarch64-linux-gnu),
# CMAKE_SYSTEM_PROCESSOR and EDGE_OUTBOX_QEMU (e.g. qemu-aarch64).
#
# Two ways to find the target's libraries:
# - Debian multiarch (the default): the cross compiler from
#   crossbuild-essential-<arch> and the :<arch> -dev packages, whose libraries
#   live in /usr/lib/<triple> and whose headers share /usr/include with the
#   native ones (see scripts/cross-setup.sh).
# - A sysroot (the Debian packages unpacked by scripts/cross-sysroot.sh, a
#   Yocto SDK, Buildroot output/host/<triple>/sysroot, a copy of the
#   device's root file system): -DEDGE_OUTBOX_SYSROOT=/path (or the
#   environment variable of that name, or plain CMAKE_SYSROOT). Only the
#   sysroot is searched then; the compiler is still <triple>-g++ unless
#   CMAKE_CXX_COMPILER is given.
set(CMAKE_SYSTEM_NAME Linux)

# try_compile projects re-read this file: hand them our variables.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES
     EDGE_OUTBOX_SYSROOT EDGE_OUTBOX_TRIPLE EDGE_OUTBOX_QEMU)

if(NOT EDGE_OUTBOX_SYSROOT AND DEFINED ENV{EDGE_OUTBOX_SYSROOT})
  set(EDGE_OUTBOX_SYSROOT "$ENV{EDGE_OUTBOX_SYSROOT}")
endif()
if(NOT EDGE_OUTBOX_SYSROOT AND CMAKE_SYSROOT)
  set(EDGE_OUTBOX_SYSROOT "${CMAKE_SYSROOT}")
endif()

if(NOT CMAKE_C_COMPILER)
  set(CMAKE_C_COMPILER ${EDGE_OUTBOX_TRIPLE}-gcc)
endif()
if(NOT CMAKE_CXX_COMPILER)
  set(CMAKE_CXX_COMPILER ${EDGE_OUTBOX_TRIPLE}-g++)
endif()
# The libraries' directory under each prefix (/usr/lib/<triple>): Debian's
# and Yocto's layout alike; the compiler would report the same.
set(CMAKE_LIBRARY_ARCHITECTURE ${EDGE_OUTBOX_TRIPLE})

if(EDGE_OUTBOX_SYSROOT)
  set(CMAKE_SYSROOT "${EDGE_OUTBOX_SYSROOT}")
  set(CMAKE_FIND_ROOT_PATH "${EDGE_OUTBOX_SYSROOT}")
  set(_edge_outbox_qemu_prefix "${EDGE_OUTBOX_SYSROOT}")
else()
  # Multiarch: target libraries are in /usr/lib/<triple>, the cross libc in
  # /usr/<triple>. The host's own library directories are ignored, so that a
  # missing :<arch> package fails at configure time instead of linking x86-64.
  set(CMAKE_FIND_ROOT_PATH /usr/${EDGE_OUTBOX_TRIPLE} /)
  execute_process(COMMAND dpkg-architecture -qDEB_BUILD_MULTIARCH
                  OUTPUT_VARIABLE _edge_outbox_build_multiarch OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET)
  if(NOT _edge_outbox_build_multiarch)
    set(_edge_outbox_build_multiarch x86_64-linux-gnu)
  endif()
  list(APPEND CMAKE_IGNORE_PATH /lib/${_edge_outbox_build_multiarch} /usr/lib/${_edge_outbox_build_multiarch}
       /usr/lib/${_edge_outbox_build_multiarch}/cmake /usr/lib64 /lib64)
  # qemu's -L: where the target's dynamic loader is. The :<arch> libraries
  # pull in libc6:<arch>, whose loader (/lib/ld-linux-*.so) must be the one
  # used, because its libc.so.6 is what the loader finds first. The cross
  # libc in /usr/<triple> is an older build: its loader with the multiarch
  # libc.so.6 hangs in the first pthread_create (aarch64) or crashes (armhf).
  if(EXISTS /usr/lib/${EDGE_OUTBOX_TRIPLE}/libc.so.6 OR EXISTS /lib/${EDGE_OUTBOX_TRIPLE}/libc.so.6)
    set(_edge_outbox_qemu_prefix /)
  else()
    set(_edge_outbox_qemu_prefix /usr/${EDGE_OUTBOX_TRIPLE})
  endif()
endif()

# Programs (pkg-config, qemu, mosquitto) are the build machine's; libraries,
# headers and CMake packages only the target's. Header-only packages that are
# architecture independent (nlohmann_json in /usr/share/cmake, doctest in
# /usr/lib/cmake, CLI11) are found under the / root.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config (FindPkgConfig) reads only the target's .pc files.
set(_edge_outbox_pc_root "${EDGE_OUTBOX_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR} "${_edge_outbox_pc_root}/usr/lib/${EDGE_OUTBOX_TRIPLE}/pkgconfig:${_edge_outbox_pc_root}/usr/lib/pkgconfig:${_edge_outbox_pc_root}/usr/share/pkgconfig")
if(EDGE_OUTBOX_SYSROOT)
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "${EDGE_OUTBOX_SYSROOT}")
endif()

# ctest runs the target's test binaries under user-mode emulation. Set
# EDGE_OUTBOX_QEMU to empty to run nothing (e.g. on a board: copy and run).
if(EDGE_OUTBOX_QEMU)
  find_program(_edge_outbox_qemu_path ${EDGE_OUTBOX_QEMU})
  if(_edge_outbox_qemu_path)
    set(CMAKE_CROSSCOMPILING_EMULATOR ${_edge_outbox_qemu_path};-L;${_edge_outbox_qemu_prefix})
  endif()
endif()

# A gateway image has no use for the server-side ingest (nor PostgreSQL).
set(EDGE_OUTBOX_DEVICE_ONLY ON CACHE BOOL "Build only the device side (no server-side ingest)")
