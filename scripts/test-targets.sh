# SPDX-License-Identifier: Apache-2.0
# Sourced by the build scripts: edge_outbox_test_targets BUILD_DIR [ctest args...]
# prints the build targets that the tests selected by the ctest arguments
# need, one a line: the tests' executables (named like the tests; the parts
# NAME_part1, NAME_part2, ... of a split test are the executable NAME), whose
# add_dependencies bring the binaries they run. It prints nothing when every
# target is needed: no ctest arguments, or a selected test that is not an
# executable of its own (a script, the package test). Fails when no test is
# selected. BUILD_DIR must be configured.
edge_outbox_test_targets() {
  local build_dir=$1 tests all_targets t
  shift
  [ $# -gt 0 ] || return 0
  mapfile -t tests < <(ctest --test-dir "$build_dir" -N "$@" | sed -n 's/^ *Test *#[0-9]*: //p' |
    sed 's/_part[0-9]*$//' | sort -u)
  if [ ${#tests[@]} -eq 0 ]; then
    echo "no test matches: $*" >&2
    return 1
  fi
  all_targets=$(cmake --build "$build_dir" --target help)
  for t in "${tests[@]}"; do
    # Makefiles list "... NAME", Ninja "NAME: phony".
    grep -qxE "(\.\.\. )?$t(: .*)?" <<<"$all_targets" || return 0
  done
  printf '%s\n' "${tests[@]}"
}
