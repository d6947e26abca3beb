#!/usr/bin/env bash
# Checks that every C++ source and header of the tree is formatted as
# .clang-format says (clang-format --dry-run -Werror). Lists the files with
# find, not git, so it also works on a copy of the tree without .git.
# Exit status: 0 clean, 1 a file differs (its diffs are printed), 77 (ctest's
# skip code) when clang-format is not installed (tools/setup.sh installs it).
# Fix the tree with: bash tools/check_format.sh --fix
set -euo pipefail
cd "$(dirname "$0")/.."
CLANG_FORMAT=${CLANG_FORMAT:-clang-format}
if ! command -v "$CLANG_FORMAT" >/dev/null; then
  echo "check_format.sh: $CLANG_FORMAT not found; skipped" >&2
  exit 77
fi
mapfile -d '' files < <(find . \( -path './build*' -o -path './cmake-build-*' -o -name .git \
                                  -o -name node_modules -o -path './out' \) -prune -o \
                               -type f \( -name '*.cc' -o -name '*.h' \) -print0 | sort -z)
if [[ ${1:-} == --fix ]]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  exit 0
fi
"$CLANG_FORMAT" --dry-run -Werror "${files[@]}"
echo "check_format.sh: ${#files[@]} files formatted as .clang-format says"
