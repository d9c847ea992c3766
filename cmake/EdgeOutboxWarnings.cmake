# edge_outbox_warnings(target): the project's warning set, errors with EDGE_OUTBOX_WERROR.
function(edge_outbox_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                         $<$<BOOL:${EDGE_OUTBOX_WERROR}>:-Werror>)
endfunction()
