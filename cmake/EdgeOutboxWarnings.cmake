# SPDX-License-Identifier: Apache-2.0
# edge_outbox_warnings(target): the project's warning set, errors with EDGE_OUTBOX_WERROR.
# In a unity build (-DCMAKE_UNITY_BUILD=ON: CI's cross, sanitizer, fuzzing
# and thread-safety builds, .ci/builds) every source is #included into a
# generated one, and GCC's -Wsubobject-linkage, meant for types defined in
# headers, then flags each source's own anonymous-namespace types: off there
# only; the per-file native build keeps it.
function(edge_outbox_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                         $<$<BOOL:${EDGE_OUTBOX_WERROR}>:-Werror>
                         $<$<AND:$<BOOL:${CMAKE_UNITY_BUILD}>,$<COMPILE_LANG_AND_ID:CXX,GNU>>:-Wno-subobject-linkage>)
endfunction()

# edge_outbox_gcc12_restrict_false_positive(target...): silences -Wrestrict
# for these targets, with GCC 12 only. At -O2/-O3 GCC 12's libstdc++ makes it
# report a bogus overlapping memcpy when a short string literal is assigned
# to a std::string (GCC bug 105329,
# https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105329). The tests do that on
# nearly every page, so their targets carry it (one list of files went stale
# with each new test); the libraries, the binaries and the benchmarks keep
# -Wrestrict, every other warning stays on, and other compilers keep it too.
function(edge_outbox_gcc12_restrict_false_positive)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
     AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    foreach(target IN LISTS ARGN)
      target_compile_options(${target} PRIVATE -Wno-restrict)
    endforeach()
  endif()
endfunction()
