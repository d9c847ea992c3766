# SPDX-License-Identifier: Apache-2.0
# cmake -DBUILD_DIR=<edge-outbox build> -DWORK_DIR=<scratch> [-DCXX=<compiler>]
#       [-DPKG_CONFIG=<pkg-config>] -P run.cmake
# Installs the library of the build tree (install component
# edge_outbox_library) into WORK_DIR/prefix and builds and runs two consumer
# projects beside this script against it:
#   umbrella/  find_package(edge_outbox) without components and
#              edge_outbox::edge_outbox, then the same program through
#              pkg-config's edge_outbox.pc. Links Paho, and the checks below
#              must see it (they would be blind otherwise).
#   core/      find_package(edge_outbox COMPONENTS core) with Paho made
#              unfindable, edge_outbox::core and a Publisher of its own, then
#              the same program through edge_outbox-core.pc. Neither its link
#              line, nor ldd (it links with --no-as-needed, so ldd sees every
#              library it was given), nor nm may show any Paho library.
# It also checks the package's component handling: an unknown component is
# not found, mqtt needs Paho, and the wire and core targets files name no Paho;
# and that a static libedge_outbox_wire brings libzstd along (the umbrella
# consumer compresses a batch) in both the targets file and edge_outbox-wire.pc.
#   c/         the C API: the install components runtime, dev and
#              edge_outbox_library (staged
#              under DESTDIR, so nothing lands outside WORK_DIR),
#              find_package(edge_outbox COMPONENTS c) and edge-outbox-c.pc
#              build a C11 program against libedge-outbox.so.0 alone, which
#              has its SONAME and exports only edge_outbox_* symbols.
cmake_minimum_required(VERSION 3.25)
foreach(var BUILD_DIR WORK_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "run.cmake: -D${var}=... is required")
  endif()
endforeach()
set(source_dir ${CMAKE_CURRENT_LIST_DIR})
set(prefix ${WORK_DIR}/prefix)
if(NOT PKG_CONFIG)
  find_program(PKG_CONFIG pkg-config REQUIRED)
endif()
find_program(LDD ldd REQUIRED)
find_program(NM nm REQUIRED)
set(compiler_arg "")
if(CXX)
  set(compiler_arg -DCMAKE_CXX_COMPILER=${CXX})
else()
  set(CXX c++)
endif()
# Paho made unfindable: a package configuration that looks for it fails.
set(no_paho -DCMAKE_DISABLE_FIND_PACKAGE_PahoMqttCpp=ON -DCMAKE_DISABLE_FIND_PACKAGE_eclipse-paho-mqtt-c=ON)

# run(what command...): runs it; fails unless it exits 0. Its stdout and
# stderr together end up in run_output.
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}${err}" PARENT_SCOPE)
endfunction()

# run_failing(what regex command...): the command must fail and say regex.
function(run_failing what regex)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${what} succeeded but must fail:\n${ARGN}\n${out}\n${err}")
  endif()
  if(NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "${what} failed without saying \"${regex}\":\n${ARGN}\n${out}\n${err}")
  endif()
endfunction()

# paho_in(text out): out is TRUE if text names Paho (a library, a package, a
# file) in any case.
function(paho_in text out)
  string(TOLOWER "${text}" lower)
  string(FIND "${lower}" "paho" at)
  if(at EQUAL -1)
    set(${out} FALSE PARENT_SCOPE)
  else()
    set(${out} TRUE PARENT_SCOPE)
  endif()
endfunction()

# paho_linked(binary out): out is TRUE if binary loads a Paho library (ldd,
# which follows the shared libraries it needs) or contains or needs Paho's
# symbols (nm: the C client's MQTTAsync_*, the C++ client's mqtt::).
function(paho_linked binary out)
  run("ldd ${binary}" ${LDD} ${binary})
  paho_in("${run_output}" in_ldd)
  run("nm ${binary}" ${NM} -C ${binary})
  set(in_nm FALSE)
  if(run_output MATCHES "MQTTAsync_|[ (<,&*]mqtt::")
    set(in_nm TRUE)
  endif()
  if(in_ldd OR in_nm)
    set(${out} TRUE PARENT_SCOPE)
  else()
    set(${out} FALSE PARENT_SCOPE)
  endif()
endfunction()

function(expect_paho what binary)
  paho_linked(${binary} linked)
  if(NOT linked)
    message(FATAL_ERROR "${what}: ldd and nm see no Paho in ${binary}, which links it")
  endif()
endfunction()

function(expect_no_paho what binary)
  paho_linked(${binary} linked)
  if(linked)
    run("ldd" ${LDD} ${binary})
    message(FATAL_ERROR "${what}: ${binary} links Paho:\n${run_output}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component edge_outbox_library)
file(GLOB package_dir LIST_DIRECTORIES true ${prefix}/*/cmake/edge_outbox)
if(NOT package_dir)
  message(FATAL_ERROR "no lib*/cmake/edge_outbox was installed under ${prefix}")
endif()
get_filename_component(libdir ${package_dir}/../.. ABSOLUTE)
set(pc_dir ${libdir}/pkgconfig)
foreach(pc IN ITEMS edge_outbox-wire edge_outbox-core edge_outbox)
  if(NOT EXISTS ${pc_dir}/${pc}.pc)
    message(FATAL_ERROR "${pc}.pc was not installed in ${pc_dir}")
  endif()
endforeach()
# A shared build's libraries are found there at run time.
set(ENV{LD_LIBRARY_PATH} ${libdir})
set(ENV{PKG_CONFIG_PATH} ${pc_dir})

# The targets files that COMPONENTS core loads name no Paho.
file(GLOB core_files ${package_dir}/edge_outbox-wire-targets*.cmake ${package_dir}/edge_outbox-core-targets*.cmake)
list(LENGTH core_files core_file_count)
if(core_file_count LESS 2)
  message(FATAL_ERROR "the wire and core targets files are missing from ${package_dir}")
endif()
foreach(file IN LISTS core_files)
  file(READ ${file} text)
  paho_in("${text}" named)
  if(named)
    message(FATAL_ERROR "${file} names Paho")
  endif()
endforeach()

# 1. The umbrella through find_package.
set(build ${WORK_DIR}/umbrella)
run("configure the umbrella consumer" ${CMAKE_COMMAND} -S ${source_dir}/umbrella -B ${build}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${compiler_arg})
run("build the umbrella consumer" ${CMAKE_COMMAND} --build ${build} --verbose)
# A static libedge_outbox_mqtt puts Paho on the link line (a shared one
# brings it along itself).
paho_in("${run_output}" named)
if(EXISTS ${libdir}/libedge_outbox_mqtt.a AND NOT named)
  message(FATAL_ERROR "the umbrella consumer's link line names no Paho:\n${run_output}")
endif()
run("run the umbrella consumer" ${build}/consumer ${WORK_DIR}/umbrella.db)
message(STATUS "find_package umbrella consumer: ${run_output}")
if(NOT run_output MATCHES "^enqueued [^ ]+ pending 1 cloudevents 1\\.0 publisher buffer 1024 zstd batch 2\n$")
  message(FATAL_ERROR "unexpected umbrella consumer output: ${run_output}")
endif()
expect_paho("the find_package umbrella consumer" ${build}/consumer)

# 2. core alone through find_package, where Paho cannot be found.
set(build ${WORK_DIR}/core)
run("configure the core consumer without Paho" ${CMAKE_COMMAND} -S ${source_dir}/core -B ${build}
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${no_paho} ${compiler_arg})
run("build the core consumer" ${CMAKE_COMMAND} --build ${build} --verbose)
paho_in("${run_output}" named)
if(named)
  message(FATAL_ERROR "the core consumer's build names Paho:\n${run_output}")
endif()
run("run the core consumer" ${build}/core_consumer ${WORK_DIR}/core.db)
message(STATUS "find_package core consumer: ${run_output}")
if(NOT run_output MATCHES "^forwarded 3 published 3 pending 0\n$")
  message(FATAL_ERROR "unexpected core consumer output: ${run_output}")
endif()
expect_no_paho("the find_package core consumer" ${build}/core_consumer)

# 3. Component handling, configuring the same project again.
run_failing("find_package(edge_outbox COMPONENTS core nosuch)" "no component \"nosuch\""
    ${CMAKE_COMMAND} -S ${source_dir}/core -B ${build} -DEDGE_OUTBOX_COMPONENTS=core,nosuch)
run_failing("find_package(edge_outbox COMPONENTS mqtt) without Paho"
    "find_package for module PahoMqttCpp|dependency PahoMqttCpp"
    ${CMAKE_COMMAND} -S ${source_dir}/core -B ${build} -DEDGE_OUTBOX_COMPONENTS=mqtt)
run("find_package(edge_outbox COMPONENTS mqtt)" ${CMAKE_COMMAND} -S ${source_dir}/core -B ${build}
    -DEDGE_OUTBOX_COMPONENTS=mqtt -DCMAKE_DISABLE_FIND_PACKAGE_PahoMqttCpp=OFF
    -DCMAKE_DISABLE_FIND_PACKAGE_eclipse-paho-mqtt-c=OFF)

# A static wire library names libzstd for every link line, a shared one keeps
# it to itself.
run("pkg-config edge_outbox-wire" ${PKG_CONFIG} --libs edge_outbox-wire)
if(EXISTS ${libdir}/libedge_outbox_wire.a AND NOT run_output MATCHES "-lzstd")
  message(FATAL_ERROR "pkg-config --libs edge_outbox-wire names no libzstd for a static wire: ${run_output}")
endif()

# 4. The umbrella through pkg-config: the flags alone must compile and link it.
run("pkg-config edge_outbox" ${PKG_CONFIG} --cflags --libs edge_outbox)
string(STRIP "${run_output}" pc_flags)
message(STATUS "pkg-config --cflags --libs edge_outbox: ${pc_flags}")
string(FIND "${pc_flags}" "-I${prefix}/" at)
if(at EQUAL -1)
  message(FATAL_ERROR "edge_outbox.pc does not point into the install prefix ${prefix}: ${pc_flags}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run("compile the umbrella consumer with pkg-config's flags"
    ${CXX} -std=c++20 ${source_dir}/umbrella/main.cpp -o ${WORK_DIR}/consumer-pc ${pc_flags})
run("run the pkg-config umbrella consumer" ${WORK_DIR}/consumer-pc ${WORK_DIR}/umbrella-pc.db)
message(STATUS "pkg-config umbrella consumer: ${run_output}")
if(NOT run_output MATCHES "^enqueued [^ ]+ pending 1 cloudevents 1\\.0 publisher buffer 1024 zstd batch 2\n$")
  message(FATAL_ERROR "unexpected umbrella consumer output: ${run_output}")
endif()
expect_paho("the pkg-config umbrella consumer" ${WORK_DIR}/consumer-pc)

# 5. core alone through pkg-config: no Paho in its flags nor in the program.
foreach(static IN ITEMS "" --static)
  run("pkg-config ${static} edge_outbox-core" ${PKG_CONFIG} --cflags --libs ${static} edge_outbox-core)
  paho_in("${run_output}" named)
  if(named)
    message(FATAL_ERROR "pkg-config --libs ${static} edge_outbox-core names Paho: ${run_output}")
  endif()
endforeach()
run("pkg-config edge_outbox-core" ${PKG_CONFIG} --cflags --libs edge_outbox-core)
string(STRIP "${run_output}" pc_flags)
message(STATUS "pkg-config --cflags --libs edge_outbox-core: ${pc_flags}")
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run("compile the core consumer with pkg-config's flags"
    ${CXX} -std=c++20 ${source_dir}/core/main.cpp -o ${WORK_DIR}/core-consumer-pc -Wl,--no-as-needed ${pc_flags})
run("run the pkg-config core consumer" ${WORK_DIR}/core-consumer-pc ${WORK_DIR}/core-pc.db)
message(STATUS "pkg-config core consumer: ${run_output}")
if(NOT run_output MATCHES "^forwarded 3 published 3 pending 0\n$")
  message(FATAL_ERROR "unexpected core consumer output: ${run_output}")
endif()
expect_no_paho("the pkg-config core consumer" ${WORK_DIR}/core-consumer-pc)

# 6. The C API, from the runtime and dev components.
set(c_root ${WORK_DIR}/c-root)
# edge_outbox_library brings the package configuration and the header.
foreach(component IN ITEMS edge_outbox_library runtime dev)
  run("install component ${component}" ${CMAKE_COMMAND} -E env DESTDIR=${c_root}
      ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix /usr --component ${component})
endforeach()
file(GLOB c_library ${c_root}/usr/lib*/libedge-outbox.so.0 ${c_root}/usr/lib*/*/libedge-outbox.so.0)
if(NOT c_library)
  message(FATAL_ERROR "component runtime installed no libedge-outbox.so.0 under ${c_root}/usr")
endif()
get_filename_component(c_libdir ${c_library} DIRECTORY)
run("readelf the C library" readelf -d ${c_library})
if(NOT run_output MATCHES "Library soname: \\[libedge-outbox\\.so\\.0\\]")
  message(FATAL_ERROR "libedge-outbox.so.0 has not its SONAME:\n${run_output}")
endif()
run("nm the C library" ${NM} -D --defined-only ${c_library})
string(REGEX REPLACE "\n$" "" exported "${run_output}")
string(REPLACE "\n" ";" exported "${exported}")
foreach(line IN LISTS exported)
  if(NOT line MATCHES " (edge_outbox_[a-z_]+(@@EDGE_OUTBOX_0)?|EDGE_OUTBOX_0)$")
    message(FATAL_ERROR "libedge-outbox.so.0 exports more than edge_outbox_*: ${line}")
  endif()
endforeach()
set(ENV{LD_LIBRARY_PATH} "${c_libdir}:${libdir}")
set(build ${WORK_DIR}/c)
run("configure the C consumer" ${CMAKE_COMMAND} -S ${source_dir}/c -B ${build}
    -DCMAKE_PREFIX_PATH=${c_root}/usr -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
run("build the C consumer" ${CMAKE_COMMAND} --build ${build})
run("run the C consumer" ${build}/c_consumer ${WORK_DIR}/c.db)
message(STATUS "find_package C consumer: ${run_output}")
if(NOT run_output MATCHES "^version [0-9.]+ pending 1\n$")
  message(FATAL_ERROR "unexpected C consumer output: ${run_output}")
endif()
# Through pkg-config, with the prefix of where the .pc file lies.
find_program(CC NAMES cc gcc REQUIRED)
set(ENV{PKG_CONFIG_PATH} ${c_libdir}/pkgconfig)
run("pkg-config edge-outbox-c" ${PKG_CONFIG} --define-prefix --cflags --libs edge-outbox-c)
string(STRIP "${run_output}" pc_flags)
message(STATUS "pkg-config --cflags --libs edge-outbox-c: ${pc_flags}")
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
run("compile the C consumer with pkg-config's flags"
    ${CC} -std=c11 -Wall -Wextra -pedantic -Werror ${source_dir}/c/main.c -o ${WORK_DIR}/c-consumer-pc ${pc_flags})
run("run the pkg-config C consumer" ${WORK_DIR}/c-consumer-pc ${WORK_DIR}/c-pc.db)
if(NOT run_output MATCHES "^version [0-9.]+ pending 1\n$")
  message(FATAL_ERROR "unexpected C consumer output: ${run_output}")
endif()

file(REMOVE_RECURSE ${WORK_DIR})
