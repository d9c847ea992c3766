#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Every source, header, CMake and script file that git tracks carries the
# line "SPDX-License-Identifier: Apache-2.0" in its first three lines (after
# a #! line). Prose, data and the fuzz corpus are not checked. Exits 1 and
# names the files without it.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
while IFS= read -r f; do
  head -n 3 "$f" | grep -q 'SPDX-License-Identifier: Apache-2.0' || missing+=("$f")
done < <(git ls-files -- '*.cpp' '*.h' '*.c' '*.cmake' '*CMakeLists.txt' '*.sh' '*.py' '*.supp' \
                         '*.cmake.in' '*.pc.in' '.ci/run' ':!fuzz/corpus')
if [ ${#missing[@]} -gt 0 ]; then
  echo "check-spdx: these files lack 'SPDX-License-Identifier: Apache-2.0' in their first lines:" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 1
fi
echo "check-spdx: every source, build and script file names its licence"
