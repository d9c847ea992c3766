# SPDX-License-Identifier: Apache-2.0
# The install rules of the library: headers, libraries, the CMake package
# (lib/cmake/edge_outbox) and the pkg-config files (lib/pkgconfig), all in the
# install component edge_outbox_library, so that
#   cmake --install <build> --component edge_outbox_library
# installs the library alone (the binaries have install rules of their own).
#
# The CMake package has one export set, and one targets file, per package
# component; edge_outboxConfig.cmake loads the ones asked for:
#   wire  edge_outbox::wire                            edge_outbox-wire-targets.cmake
#   core  edge_outbox::core (no Paho)                  edge_outbox-core-targets.cmake
#   mqtt  edge_outbox::mqtt, edge_outbox::edge_outbox  edge_outbox-mqtt-targets.cmake
# The pkg-config files: edge_outbox-wire.pc, edge_outbox-core.pc (no Paho)
# and edge_outbox.pc (core and the Paho publisher).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(EDGE_OUTBOX_INSTALL_COMPONENT edge_outbox_library)
set(_edge_outbox_package_dir ${CMAKE_INSTALL_LIBDIR}/cmake/edge_outbox)

# Installs the targets of one package component and its targets file.
function(_edge_outbox_install_component component)
  install(TARGETS ${ARGN} EXPORT edge_outbox-${component}-targets
          COMPONENT ${EDGE_OUTBOX_INSTALL_COMPONENT}
          ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT edge_outbox-${component}-targets NAMESPACE edge_outbox::
          FILE edge_outbox-${component}-targets.cmake
          DESTINATION ${_edge_outbox_package_dir}
          COMPONENT ${EDGE_OUTBOX_INSTALL_COMPONENT})
endfunction()

_edge_outbox_install_component(wire edge_outbox_wire)
_edge_outbox_install_component(core edge_outbox_core)
_edge_outbox_install_component(mqtt edge_outbox_mqtt edge_outbox)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ ${PROJECT_SOURCE_DIR}/wire/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        COMPONENT ${EDGE_OUTBOX_INSTALL_COMPONENT})

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/edge_outboxConfig.cmake.in
        ${PROJECT_BINARY_DIR}/edge_outboxConfig.cmake
        INSTALL_DESTINATION ${_edge_outbox_package_dir})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/edge_outboxConfigVersion.cmake
        COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/edge_outboxConfig.cmake ${PROJECT_BINARY_DIR}/edge_outboxConfigVersion.cmake
        DESTINATION ${_edge_outbox_package_dir}
        COMPONENT ${EDGE_OUTBOX_INSTALL_COMPONENT})

# pkg-config. libzstd stays a private dependency of a shared
# libedge_outbox_wire (Requires.private); a static one needs it on every link
# line (Requires).
get_target_property(_edge_outbox_library_type edge_outbox_wire TYPE)
if(_edge_outbox_library_type STREQUAL "STATIC_LIBRARY")
  set(EDGE_OUTBOX_PC_WIRE_REQUIRES libzstd)
  set(EDGE_OUTBOX_PC_WIRE_REQUIRES_PRIVATE "")
else()
  set(EDGE_OUTBOX_PC_WIRE_REQUIRES "")
  set(EDGE_OUTBOX_PC_WIRE_REQUIRES_PRIVATE libzstd)
endif()
# Paho stays a private dependency of a shared libedge_outbox_mqtt
# (Libs.private); a static one needs it on every link line (Libs).
get_target_property(_edge_outbox_library_type edge_outbox_mqtt TYPE)
set(EDGE_OUTBOX_PC_PAHO_LIBS "-lpaho-mqttpp3 -lpaho-mqtt3as -lssl -lcrypto")
if(_edge_outbox_library_type STREQUAL "STATIC_LIBRARY")
  set(EDGE_OUTBOX_PC_MQTT_LIBS "-ledge_outbox_mqtt ${EDGE_OUTBOX_PC_PAHO_LIBS}")
  set(EDGE_OUTBOX_PC_MQTT_LIBS_PRIVATE "")
else()
  set(EDGE_OUTBOX_PC_MQTT_LIBS "-ledge_outbox_mqtt")
  set(EDGE_OUTBOX_PC_MQTT_LIBS_PRIVATE "${EDGE_OUTBOX_PC_PAHO_LIBS}")
endif()

# A .pc file names the prefix the files are installed to, which is known
# only at install time (`cmake --install <build> --prefix <dir>`), so the
# prefix is filled in by the install script. DESTDIR is honoured as usual.
set(EDGE_OUTBOX_PC_PREFIX "@EDGE_OUTBOX_INSTALL_PREFIX@")
foreach(pc IN ITEMS edge_outbox-wire edge_outbox-core edge_outbox)
  configure_file(${PROJECT_SOURCE_DIR}/cmake/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc.in @ONLY)
  install(CODE "
    file(READ \"${PROJECT_BINARY_DIR}/${pc}.pc.in\" pc)
    string(REPLACE \"@EDGE_OUTBOX_INSTALL_PREFIX@\" \"\${CMAKE_INSTALL_PREFIX}\" pc \"\${pc}\")
    file(WRITE \"${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc\" \"\${pc}\")
    file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
         TYPE FILE FILES \"${PROJECT_BINARY_DIR}/pkgconfig/${pc}.pc\")"
    COMPONENT ${EDGE_OUTBOX_INSTALL_COMPONENT})
endforeach()

# The C API's shared library libedge-outbox.so.0 (edge_outbox::c): the
# library in the runtime component, its namelink, targets file and
# edge-outbox-c.pc in the dev component (the packages' split). Its header is
# installed with the others above. It carries the core inside it, so its
# consumers need nothing else.
install(TARGETS edge_outbox_c EXPORT edge_outbox-c-targets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT dev
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT edge_outbox-c-targets NAMESPACE edge_outbox::
        FILE edge_outbox-c-targets.cmake
        DESTINATION ${_edge_outbox_package_dir}
        COMPONENT dev)
configure_file(${PROJECT_SOURCE_DIR}/cmake/edge-outbox-c.pc.in ${PROJECT_BINARY_DIR}/edge-outbox-c.pc.in @ONLY)
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/edge-outbox-c.pc.in\" pc)
  string(REPLACE \"@EDGE_OUTBOX_INSTALL_PREFIX@\" \"\${CMAKE_INSTALL_PREFIX}\" pc \"\${pc}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/pkgconfig/edge-outbox-c.pc\" \"\${pc}\")
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
       TYPE FILE FILES \"${PROJECT_BINARY_DIR}/pkgconfig/edge-outbox-c.pc\")"
  COMPONENT dev)
