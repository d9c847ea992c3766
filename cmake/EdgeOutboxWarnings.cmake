# edge_outbox_warnings(target): the project's warning set, errors with EDGE_OUTBOX_WERROR.
function(edge_outbox_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                         $<$<BOOL:${EDGE_OUTBOX_WERROR}>:-Werror>)
endfunction()

# edge_outbox_gcc12_restrict_false_positive(source...): silences -Wrestrict
# for these sources of the current directory, with GCC 12 only. At -O2/-O3
# GCC 12's libstdc++ makes it report a bogus overlapping memcpy when a
# one-character string literal is assigned to a std::string (GCC bug 105329,
# https://gcc.gnu.org/bugzilla/show_bug.cgi?id=105329); every other warning
# stays on, and other compilers keep -Wrestrict.
function(edge_outbox_gcc12_restrict_false_positive)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
     AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS -Wno-restrict)
  endif()
endfunction()
