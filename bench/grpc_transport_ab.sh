#!/usr/bin/env bash
# The gRPC door's transport settings, A/B on one binary, for a quiet machine:
# bench/h2load_grpc_vs_rest.sh once per candidate channel argument set
# (tensorops-server --test_only_grpc_channel_args), the default first, each
# run printing gRPC ModelInfer and REST binary req/s (REST is the yardstick:
# it does not change between runs, so a candidate that moves only gRPC shows
# in the ratio column). A candidate worth keeping beats the default's ratio
# at every size without losing at 64 KiB; then set it in
# server/grpc/grpc_server.cc (ApplyChannelArguments) with the run as its reason.
#
# Candidates (gRPC 1.51 names):
#   grpc.http2.max_frame_size       the largest DATA frame the server accepts
#                                   (default 16 KiB): fewer frames per message;
#   grpc.http2.lookahead_bytes      the stream window the server starts with
#                                   (default 64 KiB; BDP probing grows it);
#   grpc.http2.bdp_probe=0          the windows fixed (with a big lookahead);
#   grpc.http2.write_buffer_size    what the transport writes before it
#                                   waits for the socket.
#
# Usage: bench/grpc_transport_ab.sh BUILD_DIR [SECONDS]   (about 12 minutes)
# Prints the load average before and after each run (h2load_grpc_vs_rest.sh).
set -euo pipefail
BUILD=${1:?usage: grpc_transport_ab.sh BUILD_DIR [SECONDS]}
SECS=${2:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
CANDIDATES=(
  ""
  "grpc.http2.max_frame_size=1048576"
  "grpc.http2.max_frame_size=16777215"
  "grpc.http2.lookahead_bytes=8388608"
  "grpc.http2.lookahead_bytes=8388608,grpc.http2.bdp_probe=0"
  "grpc.http2.write_buffer_size=1048576"
  "grpc.http2.max_frame_size=1048576,grpc.http2.lookahead_bytes=8388608"
)
for args in "${CANDIDATES[@]}"; do
  echo "=== channel args: ${args:-none, gRPC defaults}"
  flags=""
  [[ -n $args ]] && flags="--test_only_grpc_channel_args=$args"
  SERVER_FLAGS="$flags" bash "$HERE/h2load_grpc_vs_rest.sh" "$BUILD" "$SECS"
done
