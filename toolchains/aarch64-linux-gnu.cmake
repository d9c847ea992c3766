# SPDX-License-Identifier: Apache-2.0
# Cross build for 64-bit ARM Linux gateways (Raspberry Pi OS 64-bit, i.MX8,
# most current industrial gateways), tested under qemu-aarch64.
#   scripts/cross-setup.sh arm64
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=toolchains/aarch64-linux-gnu.cmake
# With a Yocto SDK or Buildroot sysroot add -DEDGE_OUTBOX_SYSROOT=<sysroot>
# (see toolchains/edge-outbox-cross.cmake and docs/cross-compiling.md).
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(EDGE_OUTBOX_TRIPLE aarch64-linux-gnu)
if(NOT DEFINED EDGE_OUTBOX_QEMU)  # -DEDGE_OUTBOX_QEMU= : no emulator
  set(EDGE_OUTBOX_QEMU qemu-aarch64)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/edge-outbox-cross.cmake)
