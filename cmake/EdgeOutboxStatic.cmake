# SPDX-License-Identifier: Apache-2.0
# Static linking of the device binaries (EDGE_OUTBOX_STATIC_BINARIES).
#
# Included by the top-level CMakeLists.txt after the dependencies are found.
# With the option ON, every imported dependency whose static archive exists
# beside its shared library is switched to the archive, for all targets of
# the build (a process must not load one library twice, once linked in and
# once shared). Two outcomes:
# - full: static archives exist for SQLite, Paho C and C++ and OpenSSL (a
#   Buildroot sysroot with BR2_STATIC_LIBS, a Yocto SDK with the -staticdev
#   packages): edge_outbox_device_binary(target) links target with -static,
#   a binary that needs nothing on the device but the kernel.
# - partial: Debian ships libpaho-mqttpp3 as a shared library only. Paho C,
#   OpenSSL and libstdc++ are then used by that shared library and stay
#   shared too; SQLite and zstd (and SQLiteCpp, always an archive) are
#   linked in.
# zstd (PkgConfig::edge_outbox_zstd, from pkg-config, which names the
# library by its path) is switched to libzstd.a in either mode when it exists.
# EDGE_OUTBOX_STATIC_MODE says which (full, partial or off). Nothing is
# stripped: strip the binary when you build the device image.
#
# edge_outbox_device_binary(target): call it for each binary that goes onto
# a device (edge-outbox-sim, the device tools).

set(EDGE_OUTBOX_STATIC_MODE off)

# The static archive beside an imported target's library, or empty.
function(_edge_outbox_static_archive target out)
  set(${out} "" PARENT_SCOPE)
  if(NOT TARGET ${target})
    return()
  endif()
  get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
  set(location "")
  foreach(prop IN ITEMS IMPORTED_LOCATION IMPORTED_LOCATION_NONE IMPORTED_LOCATION_RELEASE
                        IMPORTED_LOCATION_RELWITHDEBINFO)
    get_target_property(value ${target} ${prop})
    if(value)
      set(location ${value})
      break()
    endif()
  endforeach()
  if(NOT location)
    return()
  endif()
  if(location MATCHES "\\.a$")
    set(${out} ${location} PARENT_SCOPE)
    return()
  endif()
  get_filename_component(dir ${location} DIRECTORY)
  get_filename_component(name ${location} NAME)
  string(REGEX REPLACE "\\.so(\\..*)?$" ".a" archive "${name}")
  if(EXISTS ${dir}/${archive})
    set(${out} ${dir}/${archive} PARENT_SCOPE)
  endif()
endfunction()

function(_edge_outbox_use_archive target archive)
  get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION ${archive})
  if(configs)
    foreach(config IN LISTS configs)
      set_target_properties(${target} PROPERTIES IMPORTED_LOCATION_${config} ${archive})
    endforeach()
  endif()
endfunction()

if(EDGE_OUTBOX_STATIC_BINARIES)
  _edge_outbox_static_archive(SQLite::SQLite3 sqlite_a)
  _edge_outbox_static_archive(PahoMqttCpp::paho-mqttpp3 paho_cpp_a)
  _edge_outbox_static_archive(PahoMqttC::PahoMqttC paho_c_a)
  _edge_outbox_static_archive(OpenSSL::SSL ssl_a)
  _edge_outbox_static_archive(OpenSSL::Crypto crypto_a)

  if(sqlite_a)
    _edge_outbox_use_archive(SQLite::SQLite3 ${sqlite_a})
    # What libsqlite3.a needs, which the shared library brought along.
    set_property(TARGET SQLite::SQLite3 APPEND PROPERTY INTERFACE_LINK_LIBRARIES
                 Threads::Threads ${CMAKE_DL_LIBS} m)
    set(EDGE_OUTBOX_STATIC_MODE partial)
  endif()
  if(sqlite_a AND paho_cpp_a AND paho_c_a AND (ssl_a OR NOT TARGET OpenSSL::SSL)
     AND (crypto_a OR NOT TARGET OpenSSL::Crypto))
    _edge_outbox_use_archive(PahoMqttCpp::paho-mqttpp3 ${paho_cpp_a})
    _edge_outbox_use_archive(PahoMqttC::PahoMqttC ${paho_c_a})
    if(ssl_a)
      _edge_outbox_use_archive(OpenSSL::SSL ${ssl_a})
      _edge_outbox_use_archive(OpenSSL::Crypto ${crypto_a})
      set_property(TARGET OpenSSL::Crypto APPEND PROPERTY INTERFACE_LINK_LIBRARIES
                   Threads::Threads ${CMAKE_DL_LIBS})
    endif()
    set(EDGE_OUTBOX_STATIC_MODE full)
  endif()
  if(TARGET PkgConfig::edge_outbox_zstd)
    get_target_property(zstd_libraries PkgConfig::edge_outbox_zstd INTERFACE_LINK_LIBRARIES)
    set(zstd_archives "")
    foreach(library IN LISTS zstd_libraries)
      string(REGEX REPLACE "\\.so(\\..*)?$" ".a" archive "${library}")
      if(NOT archive STREQUAL library AND EXISTS "${archive}")
        set(library "${archive}")
      endif()
      list(APPEND zstd_archives "${library}")
    endforeach()
    set_target_properties(PkgConfig::edge_outbox_zstd PROPERTIES INTERFACE_LINK_LIBRARIES "${zstd_archives}")
  endif()
  message(STATUS "edge-outbox static device binaries: ${EDGE_OUTBOX_STATIC_MODE}"
                 " (sqlite: ${sqlite_a}; paho-mqttpp3: ${paho_cpp_a}; zstd: ${zstd_archives})")
  if(EDGE_OUTBOX_STATIC_MODE STREQUAL "partial")
    message(STATUS "  libpaho-mqttpp3.a not found: Paho, OpenSSL and libstdc++ stay shared")
  endif()
endif()

function(edge_outbox_device_binary target)
  if(EDGE_OUTBOX_STATIC_MODE STREQUAL "full")
    target_link_options(${target} PRIVATE -static)
  endif()
endfunction()
