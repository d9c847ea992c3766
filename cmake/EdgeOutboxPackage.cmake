# SPDX-License-Identifier: Apache-2.0
# The Debian packages (CPack DEB), from the install components:
#   edge-outbox         component runtime: libedge-outbox.so.0, edge-outbox-forwarder,
#                       edge-outbox-ctl, edge-outbox-forwarder@.service,
#                       /etc/edge-outbox/forwarder.json (a conffile)
#   libedge-outbox-dev  components dev and edge_outbox_library: headers, the static
#                       libraries, the CMake package, the pkg-config files, and
#                       edge-outbox-sim (a test tool, not for the gateway)
#   edge-outbox-ingest  component ingest: edge-outbox-ingest, edge-outbox-ingest.service,
#                       /etc/default/edge-outbox-ingest (a conffile)
# Each carries /usr/share/doc/<package>/{copyright,changelog.Debian.gz} and the
# maintainer scripts of packaging/debian/<package>/ (the edge-outbox user and
# group, the state directory). cpack strips the binaries; dpkg-shlibdeps
# computes the shared-library Depends.
#   cpack -G DEB --config <build>/CPackConfig.cmake -B <dir>
# packages a build as it is (any CMAKE_INSTALL_PREFIX: the packages install
# under /usr). scripts/package-test.sh builds, lints, installs and removes them.
#
# A binary joins a package by its install rule's COMPONENT; the lists below
# (EDGE_OUTBOX_PACKAGE_*) name the components of each package.
include(GNUInstallDirs)

set(EDGE_OUTBOX_DEB_MAINTAINER "edge-outbox maintainers <maintainers@edge-outbox.invalid>"
    CACHE STRING "The Maintainer field of the Debian packages")
set(EDGE_OUTBOX_DEB_RELEASE 1 CACHE STRING "The Debian revision of the packages' version")
set(EDGE_OUTBOX_DEB_VERSION ${PROJECT_VERSION}-${EDGE_OUTBOX_DEB_RELEASE})

# Package name -> the CPack group (Debian package) and its components.
set(EDGE_OUTBOX_PACKAGE_gateway_NAME edge-outbox)
set(EDGE_OUTBOX_PACKAGE_gateway_COMPONENTS runtime)
set(EDGE_OUTBOX_PACKAGE_devel_NAME libedge-outbox-dev)
set(EDGE_OUTBOX_PACKAGE_devel_COMPONENTS dev edge_outbox_library)
set(EDGE_OUTBOX_PACKAGE_server_NAME edge-outbox-ingest)
set(EDGE_OUTBOX_PACKAGE_server_COMPONENTS ingest)
set(_edge_outbox_package_groups gateway devel)
if(TARGET edge-outbox-ingest)
  list(APPEND _edge_outbox_package_groups server)
endif()

# --- files only the packages carry ---
set(_edge_outbox_packaging ${PROJECT_SOURCE_DIR}/packaging)
set(_edge_outbox_unit_dir /lib/systemd/system)
install(FILES ${_edge_outbox_packaging}/systemd/edge-outbox-forwarder@.service
        DESTINATION ${_edge_outbox_unit_dir} COMPONENT runtime)
install(FILES ${_edge_outbox_packaging}/config/forwarder.json
        DESTINATION /etc/edge-outbox COMPONENT runtime)
if(TARGET edge-outbox-ingest)
  install(FILES ${_edge_outbox_packaging}/systemd/edge-outbox-ingest.service
          DESTINATION ${_edge_outbox_unit_dir} COMPONENT ingest)
  install(FILES ${_edge_outbox_packaging}/config/edge-outbox-ingest.default
          DESTINATION /etc/default RENAME edge-outbox-ingest COMPONENT ingest)
endif()

# edge-outbox-packaged: builds what the packages hold and nothing else (a
# cross build configured with CMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON packages
# without building its tests).
add_custom_target(edge-outbox-packaged)
foreach(target IN ITEMS edge_outbox_wire edge_outbox_core edge_outbox_mqtt edge_outbox edge_outbox_c
                        edge-outbox-forwarder edge-outbox-ctl edge-outbox-sim edge-outbox-ingest)
  if(TARGET ${target})
    add_dependencies(edge-outbox-packaged ${target})
  endif()
endforeach()

configure_file(${_edge_outbox_packaging}/debian/changelog.in ${PROJECT_BINARY_DIR}/packaging/changelog.Debian @ONLY)
execute_process(COMMAND gzip -9nc ${PROJECT_BINARY_DIR}/packaging/changelog.Debian
                OUTPUT_FILE ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz
                RESULT_VARIABLE _edge_outbox_gzip_rc)
if(NOT _edge_outbox_gzip_rc EQUAL 0)
  message(FATAL_ERROR "gzip -9n of the Debian changelog failed")
endif()
foreach(group IN LISTS _edge_outbox_package_groups)
  set(name ${EDGE_OUTBOX_PACKAGE_${group}_NAME})
  list(GET EDGE_OUTBOX_PACKAGE_${group}_COMPONENTS 0 first_component)
  install(FILES ${_edge_outbox_packaging}/debian/copyright ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${name} COMPONENT ${first_component})
  if(NOT group STREQUAL "devel")
    install(FILES ${PROJECT_SOURCE_DIR}/docs/deployment.md
            DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${name} COMPONENT ${first_component})
  endif()
endforeach()

# --- CPack ---
set(CPACK_PACKAGE_NAME edge-outbox)
set(CPACK_PACKAGE_VENDOR "the edge-outbox authors")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${EDGE_OUTBOX_DEB_MAINTAINER}")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
set(CPACK_COMPONENTS_ALL "")
foreach(group IN LISTS _edge_outbox_package_groups)
  foreach(component IN LISTS EDGE_OUTBOX_PACKAGE_${group}_COMPONENTS)
    list(APPEND CPACK_COMPONENTS_ALL ${component})
    string(TOUPPER ${component} upper)
    set(CPACK_COMPONENT_${upper}_GROUP ${group})
  endforeach()
endforeach()

set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${EDGE_OUTBOX_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_RELEASE ${EDGE_OUTBOX_DEB_RELEASE})
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "https://github.com/edge-outbox/edge-outbox")
# The architecture of the binaries (a cross build's too, from its toolchain).
if(CMAKE_CROSSCOMPILING)
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE arm64)
  elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^arm")
    set(CPACK_DEBIAN_PACKAGE_ARCHITECTURE armhf)
  endif()
endif()

set(CPACK_DEBIAN_GATEWAY_PACKAGE_NAME edge-outbox)
set(CPACK_DEBIAN_GATEWAY_PACKAGE_SECTION net)
set(CPACK_DEBIAN_GATEWAY_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_GATEWAY_PACKAGE_CONTROL_EXTRA
    ${_edge_outbox_packaging}/debian/edge-outbox/conffiles ${_edge_outbox_packaging}/debian/edge-outbox/postinst
    ${_edge_outbox_packaging}/debian/edge-outbox/prerm ${_edge_outbox_packaging}/debian/edge-outbox/postrm)
set(CPACK_DEBIAN_GATEWAY_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# libedge-outbox.so.0 (the C API, when built): a shlibs file for the packages
# that link it ("edge-outbox (>= version)") and the ldconfig trigger (the
# maintainer scripts are ours, so cpack adds no ldconfig call).
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
if(TARGET edge_outbox_c)
  list(APPEND CPACK_DEBIAN_GATEWAY_PACKAGE_CONTROL_EXTRA ${_edge_outbox_packaging}/debian/edge-outbox/triggers)
endif()
set(CPACK_DEBIAN_GATEWAY_DESCRIPTION "transactional outbox for edge gateways: SQLite to MQTT
 edge-outbox keeps the events an application commits together with its own
 rows in a SQLite database and forwards them to an MQTT broker at least once.
 This package holds the forwarder daemon edge-outbox-forwarder (a systemd
 template unit, one instance per database), the inspection tool
 edge-outbox-ctl and the C library libedge-outbox.so.0.")

set(CPACK_DEBIAN_DEVEL_PACKAGE_NAME libedge-outbox-dev)
set(CPACK_DEBIAN_DEVEL_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEVEL_PACKAGE_DEPENDS
    "edge-outbox (= ${EDGE_OUTBOX_DEB_VERSION}), libsqlite3-dev, libsqlitecpp-dev, libpaho-mqttpp-dev, libzstd-dev, nlohmann-json3-dev, pkg-config")
set(CPACK_DEBIAN_DEVEL_DESCRIPTION "transactional outbox for edge devices: development files
 edge-outbox keeps the events an application commits together with its own
 rows in a SQLite database and forwards them to an MQTT broker at least once.
 This package holds the C and C++ headers, the static C++ libraries, the
 CMake package (find_package(edge_outbox)), the pkg-config files and the
 device simulator edge-outbox-sim.")

set(CPACK_DEBIAN_SERVER_PACKAGE_NAME edge-outbox-ingest)
set(CPACK_DEBIAN_SERVER_PACKAGE_SECTION net)
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "adduser")
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_EXTRA
    ${_edge_outbox_packaging}/debian/edge-outbox-ingest/conffiles
    ${_edge_outbox_packaging}/debian/edge-outbox-ingest/postinst
    ${_edge_outbox_packaging}/debian/edge-outbox-ingest/prerm
    ${_edge_outbox_packaging}/debian/edge-outbox-ingest/postrm)
set(CPACK_DEBIAN_SERVER_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_SERVER_DESCRIPTION "edge-outbox ingest: device events from MQTT into SQLite or PostgreSQL
 edge-outbox-ingest subscribes to the events edge-outbox devices publish and
 stores each (source, id) once, in SQLite or PostgreSQL, confirming what it
 stored to the devices. It runs as the systemd service edge-outbox-ingest.")

include(CPack)
