# Stand-in for Docker Hub's prom/prometheus (no registry is reachable here):
# Debian 12's prometheus 2.42. Same entry point, user (nobody), working and
# data directory (/prometheus) and default flags as the upstream image, so
# the compose file's `command:` and its volume work unchanged.
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /prometheus && chown nobody:nogroup /prometheus
USER nobody
WORKDIR /prometheus
VOLUME ["/prometheus"]
EXPOSE 9090
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", "--storage.tsdb.path=/prometheus"]
