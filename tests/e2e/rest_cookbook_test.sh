#!/usr/bin/env bash
# Runs the README's curl cookbook (its ```bash and ```python blocks) verbatim against
# tensorops-server on a free 127.0.0.1 port (localhost:8000 in the text
# becomes that port), in a scratch directory, and compares each block's
# output with its "# expect: " lines. Stops the server by PID.
#   rest_cookbook_test.sh SERVER_BINARY README
set -uo pipefail
server=$1 readme=$2
command -v curl >/dev/null || { echo "curl is not installed"; exit 1; }
work=$(mktemp -d)
"$server" --host=127.0.0.1 --port=0 --metrics_port=-1 --http_port=0 >"$work/log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's|^tensorops-server http on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$work/log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "server did not start:"; cat "$work/log"; exit 1; }
# One file per ```bash block.
# ```python blocks (the standard library only) run with python3.
awk -v dir="$work" '
  /^```bash$/ { n++; inside = 1; ext = ".sh"; next }
  /^```python$/ { n++; inside = 1; ext = ".py"; next }
  /^```$/ { inside = 0; next }
  inside { print > (dir "/block" n ext) }' "$readme"
blocks=$(ls "$work"/block*.sh "$work"/block*.py 2>/dev/null | wc -l)
[ "$blocks" -ge 4 ] || { echo "found $blocks cookbook blocks in $readme, want 4+"; exit 1; }
failed=0
for f in "$work"/block*.sh "$work"/block*.py; do
  sed -i "s/localhost:8000/127.0.0.1:$port/g; s/\"localhost\", 8000/\"127.0.0.1\", $port/g" "$f"
  want=$(sed -n 's/^# expect: //p' "$f")
  case "$f" in
    *.py) got=$(cd "$work" && /usr/bin/python3 "$f" 2>&1) ;;
    *) got=$(cd "$work" && bash "$f" 2>&1) ;;
  esac
  if [ "$got" != "$want" ]; then
    echo "FAIL $(basename "$f"):"; cat "$f"; echo "--- got:"; echo "$got"; echo "--- want:"; echo "$want"
    failed=1
  else
    echo "ok $(basename "$f")"
  fi
done
[ $failed -eq 0 ] && echo PASS
exit $failed
