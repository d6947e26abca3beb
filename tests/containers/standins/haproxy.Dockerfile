# Stand-in for Docker Hub's haproxy:2.6 (no registry is reachable here):
# Debian 12's HAProxy is 2.6 too. Like the upstream image it stops on SIGUSR1
# (soft stop: streams in progress finish).
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /usr/local/etc/haproxy
EXPOSE 8080 8000
STOPSIGNAL SIGUSR1
CMD ["haproxy", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]
