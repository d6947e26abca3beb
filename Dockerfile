# syntax=docker/dockerfile:1
# tensorops-server image: docker build -t tensorops .
#
# Build stage: the package list (tools/setup.sh, its "image" profile: the
# toolchain and libraries without the test tools) and build script
# (tools/build.sh) of CI and the README; tests and benchmarks are skipped.
FROM debian:bookworm-slim AS build
WORKDIR /src
COPY tools/setup.sh tools/setup.sh
RUN SETUP_PROFILE=image bash tools/setup.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# CCACHE_DIR (optional): a compiler cache mounted into this step, e.g.
#   buildah bud --volume "$(ccache -k cache_dir):/ccache" --build-arg CCACHE_DIR=/ccache
# as tools/container_setup.sh does after the host's build filled it: the same
# sources compile to the same objects (tools/build.sh keys the cache without
# the checkout's path; the build dir is /src/build as ./build on the host).
# Empty (the default): no cache, a plain compile.
ARG CCACHE_DIR=
RUN if [ -z "$CCACHE_DIR" ]; then export TENSOROPS_CCACHE=0; fi \
 && BUILD_DIR=/src/build BUILD_ARGS="-DTENSOROPS_BUILD_TESTS=OFF -DTENSOROPS_BUILD_BENCH=OFF" \
      bash tools/build.sh \
 && cmake --install /src/build --prefix /opt/tensorops --strip \
 && install -s -m 0755 /src/build/server/tensorops-server /opt/tensorops/bin/tensorops-server \
 && rm -rf /opt/tensorops/include /opt/tensorops/lib/cmake /src/build

# Runtime stage: only the shared libraries the binaries need (their NEEDED
# entries; tests/deploy/static_checks.sh checks this list against the built
# binaries), the server, the tensorops CLI (the health probe) and the SDK library.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      libgrpc++1.51 libgrpc29 libprotobuf32 libabsl20220623 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 zlib1g libisal2 \
      libssl3 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 tensorops \
 && useradd --system --uid 10001 --gid tensorops --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin tensorops
COPY --from=build /opt/tensorops /opt/tensorops
ENV PATH=/opt/tensorops/bin:$PATH \
    TENSOROPS_TARGET=127.0.0.1:50051
USER 10001:10001
# gRPC (Execute, ListOps, grpc.health.v1, reflection), Prometheus /metrics and
# the Open Inference Protocol's REST door (/v2/health/ready, /v2/models/...).
EXPOSE 50051 9464 8000
# grpc.health.v1.Health/Check for the op service; exit 1 unless SERVING (also
# while draining after SIGTERM).
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
  CMD ["tensorops", "--target", "127.0.0.1:50051", "--deadline", "2s", "health", "--service", "tensorops.v1.TensorOps"]
# SIGTERM drains: admitted calls finish within --drain_timeout, then exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["tensorops-server"]
CMD ["--host=0.0.0.0", "--port=50051", "--metrics_host=0.0.0.0", "--metrics_port=9464", "--http_host=0.0.0.0", "--http_port=8000"]
