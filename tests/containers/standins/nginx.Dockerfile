# Stand-in for Docker Hub's nginx:1.22 (no registry is reachable here):
# Debian 12's nginx is 1.22 too. Like the upstream image it runs the master as
# root and stops on SIGQUIT (graceful: open HTTP/2 streams finish).
FROM debian:bookworm-slim
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends nginx \
 && rm -rf /var/lib/apt/lists/* \
 && ln -sf /dev/stdout /var/log/nginx/access.log \
 && ln -sf /dev/stderr /var/log/nginx/error.log
EXPOSE 80
STOPSIGNAL SIGQUIT
CMD ["nginx", "-g", "daemon off;"]
