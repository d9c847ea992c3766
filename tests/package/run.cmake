# SPDX-License-Identifier: Apache-2.0
# cmake -DBUILD_DIR=<edge-outbox build> -DWORK_DIR=<scratch> [-DCXX=<compiler>]
#       [-DPKG_CONFIG=<pkg-config>] -P run.cmake
# Installs the build tree into WORK_DIR/prefix, then builds and runs the
# consumer project beside this script against it twice: through
# find_package(edge_outbox CONFIG) and through pkg-config's edge_outbox.pc.
cmake_minimum_required(VERSION 3.25)
foreach(var BUILD_DIR WORK_DIR)
  if(NOT ${var})
    message(FATAL_ERROR "run.cmake: -D${var}=... is required")
  endif()
endforeach()
set(source_dir ${CMAKE_CURRENT_LIST_DIR})
set(prefix ${WORK_DIR}/prefix)

function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what} failed (${rc}):\n${ARGN}\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})

run("install" ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})

# 1. CMake package config.
set(compiler_arg "")
if(CXX)
  set(compiler_arg -DCMAKE_CXX_COMPILER=${CXX})
endif()
run("configure the consumer" ${CMAKE_COMMAND} -S ${source_dir} -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF ${compiler_arg})
run("build the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run("run the consumer" ${WORK_DIR}/build/consumer ${WORK_DIR}/cmake.db)
message(STATUS "find_package consumer: ${run_output}")
if(NOT run_output MATCHES "^enqueued [^ ]+ pending 1 cloudevents 1\\.0")
  message(FATAL_ERROR "unexpected consumer output: ${run_output}")
endif()

# 2. pkg-config: the flags alone must compile and link the same program.
if(NOT PKG_CONFIG)
  find_program(PKG_CONFIG pkg-config REQUIRED)
endif()
file(GLOB_RECURSE pc_files ${prefix}/*/edge_outbox.pc)
if(NOT pc_files)
  message(FATAL_ERROR "edge_outbox.pc was not installed under ${prefix}")
endif()
list(GET pc_files 0 pc_file)
get_filename_component(pc_dir ${pc_file} DIRECTORY)
set(ENV{PKG_CONFIG_PATH} ${pc_dir})
run("pkg-config" ${PKG_CONFIG} --cflags --libs edge_outbox)
string(STRIP "${run_output}" pc_flags)
message(STATUS "pkg-config --cflags --libs edge_outbox: ${pc_flags}")
string(FIND "${pc_flags}" "-I${prefix}/" at)
if(at EQUAL -1)
  message(FATAL_ERROR "edge_outbox.pc does not point into the install prefix ${prefix}: ${pc_flags}")
endif()
separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
if(NOT CXX)
  set(CXX c++)
endif()
run("compile the consumer with pkg-config's flags"
    ${CXX} -std=c++20 ${source_dir}/main.cpp -o ${WORK_DIR}/consumer-pc ${pc_flags})
run("run the pkg-config consumer" ${WORK_DIR}/consumer-pc ${WORK_DIR}/pc.db)
message(STATUS "pkg-config consumer: ${run_output}")
if(NOT run_output MATCHES "^enqueued [^ ]+ pending 1")
  message(FATAL_ERROR "unexpected consumer output: ${run_output}")
endif()
file(REMOVE_RECURSE ${WORK_DIR})
