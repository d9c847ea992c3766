# SPDX-License-Identifier: Apache-2.0
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS edge_outbox edge_outbox_core edge_outbox_mqtt edge_outbox_wire EXPORT edge_outboxTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ ${PROJECT_SOURCE_DIR}/wire/include/
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT edge_outboxTargets NAMESPACE edge_outbox::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edge_outbox)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/edge_outboxConfig.cmake.in
        ${PROJECT_BINARY_DIR}/edge_outboxConfig.cmake
        INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edge_outbox)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/edge_outboxConfigVersion.cmake
        COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/edge_outboxConfig.cmake ${PROJECT_BINARY_DIR}/edge_outboxConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/edge_outbox)
# edge_outbox.pc names the prefix the files are installed to, which is known
# only at install time (`cmake --install <build> --prefix <dir>`), so the
# prefix is filled in by the install script. DESTDIR is honoured as usual.
set(EDGE_OUTBOX_PC_PREFIX "@EDGE_OUTBOX_INSTALL_PREFIX@")
configure_file(${PROJECT_SOURCE_DIR}/cmake/edge_outbox.pc.in ${PROJECT_BINARY_DIR}/edge_outbox.pc.in @ONLY)
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/edge_outbox.pc.in\" pc)
  string(REPLACE \"@EDGE_OUTBOX_INSTALL_PREFIX@\" \"\${CMAKE_INSTALL_PREFIX}\" pc \"\${pc}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/pkgconfig/edge_outbox.pc\" \"\${pc}\")
  file(INSTALL DESTINATION \"\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig\"
       TYPE FILE FILES \"${PROJECT_BINARY_DIR}/pkgconfig/edge_outbox.pc\")")
