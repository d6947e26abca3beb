#!/usr/bin/env bash
# Both doors' wire output for tools/wire_capture.py's fixed requests, against
# the golden captures here (one per server configuration): a change that must
# not change behaviour (a restructuring) keeps them byte-identical; a change
# that does (a new header, a new detail) updates them on purpose, with
#   UPDATE_GOLDEN=1 ctest -R wire_golden
# and the diff shows in review what the wire now says differently.
# usage: wire_golden_test.sh PYTHON SERVER_BINARY REPO_ROOT
set -euo pipefail
PY=$1 SERVER=$2 ROOT=$3
rc=0
for config in plain token pool limits; do
  golden=$ROOT/tests/e2e/golden/wire_$config.txt
  out=$(mktemp)
  "$PY" "$ROOT/tools/wire_capture.py" "$SERVER" "$ROOT/proto" --config=$config >"$out" 2>"$out.err" \
    || { cat "$out.err"; echo "wire_capture.py failed for --config=$config"; exit 1; }
  if [ "${UPDATE_GOLDEN:-0}" = 1 ]; then
    cp "$out" "$golden"
    echo "updated $golden"
  elif ! diff -u "$golden" "$out"; then
    echo "--config=$config: the wire output differs from $golden (above: - golden, + now)"
    rc=1
  else
    echo "--config=$config: $(wc -l <"$out") lines, identical"
  fi
  rm -f "$out" "$out.err"
done
exit $rc
