// Flags for tests only. They live outside tensorops_server.cc so that
// --help does not list them (Abseil lists flags of files named after the
// binary; --helpfull shows them). Not for production use.
#include <string>

#include "absl/flags/flag.h"

// tests/e2e/service_e2e_test.cc holds the kernel pool with it
// (QueueLimitRejects, DeadlinePassedInQueueIsDropped), instead of racing a
// big kernel against a deadline on a loaded machine.
ABSL_FLAG(std::string, test_only_kernel_gate, "",
          "Tests only: while this file exists, every kernel task waits after leaving the "
          "queue (polling every 1 ms), so a test decides when the pool runs. Empty: off.");

// bench/grpc_transport_ab.sh: an A/B of a transport setting (HTTP/2 frame
// size, windows, write buffer) on one binary.
ABSL_FLAG(std::string, test_only_grpc_channel_args, "",
          "Measurement only: more integer gRPC channel arguments for every connection, "
          "name=value[,name=value...], e.g. grpc.http2.max_frame_size=1048576. Empty: none.");
