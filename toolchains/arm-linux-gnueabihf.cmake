# SPDX-License-Identifier: Apache-2.0
# Cross build for 32-bit ARM Linux gateways with hardware float (Raspberry Pi
# OS 32-bit, i.MX6, AM335x), tested under qemu-arm.
#   scripts/cross-setup.sh armhf
#   cmake -S . -B build-armhf -DCMAKE_TOOLCHAIN_FILE=toolchains/arm-linux-gnueabihf.cmake
# With a Yocto SDK or Buildroot sysroot add -DEDGE_OUTBOX_SYSROOT=<sysroot>
# (see toolchains/edge-outbox-cross.cmake and docs/cross-compiling.md).
set(CMAKE_SYSTEM_PROCESSOR arm)
set(EDGE_OUTBOX_TRIPLE arm-linux-gnueabihf)
if(NOT DEFINED EDGE_OUTBOX_QEMU)  # -DEDGE_OUTBOX_QEMU= : no emulator
  set(EDGE_OUTBOX_QEMU qemu-arm)
endif()
include(${CMAKE_CURRENT_LIST_DIR}/edge-outbox-cross.cmake)
