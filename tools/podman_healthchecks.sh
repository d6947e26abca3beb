#!/usr/bin/env bash
# Runs the HEALTHCHECK of every running container of a compose project on the
# image's own schedule, for Podman on hosts without systemd.
#
#   tools/podman_healthchecks.sh PROJECT      # runs until killed
#
# Why: Podman schedules health checks with systemd timers. Without systemd
# (containers, minimal VMs like CI's) it logs "unable to get systemd
# connection to add healthchecks" and a container's health stays "starting"
# forever, so compose's `depends_on: condition: service_healthy` never holds.
# This loop does what the timer would: `podman healthcheck run` (the image's
# own command, timeout and retries; Podman updates the status) every
# HEALTHCHECK interval of each container, the first one an interval after it
# started. With the Docker engine, or Podman under systemd, it is not needed.
set -euo pipefail
PROJECT=${1:?usage: podman_healthchecks.sh COMPOSE_PROJECT}
declare -A due=()      # container id -> next check (epoch seconds)
declare -A every=()    # container id -> interval (seconds)
while true; do
  now=$(date +%s)
  ids=$(podman ps -q --no-trunc --filter "label=com.docker.compose.project=$PROJECT" 2>/dev/null || true)
  for id in $ids; do
    if [ -z "${every[$id]:-}" ]; then
      secs=$(podman inspect --format '{{if .Config.Healthcheck}}{{.Config.Healthcheck.Interval.Seconds}}{{end}}' "$id" 2>/dev/null || true)
      # Docker's default interval when the image names none: 30 s.
      case "$secs" in "") every[$id]=none; continue ;; 0) secs=30 ;; esac
      every[$id]=$(awk -v s="$secs" 'BEGIN { n = int(s); if (n < s) n++; if (n < 1) n = 1; print n }')
      due[$id]=$(( now + every[$id] ))
    fi
    [ "${every[$id]}" = none ] && continue
    # A restarted container (`docker-compose start`) starts its schedule anew.
    started=$(podman inspect --format '{{.State.StartedAt.Unix}}' "$id" 2>/dev/null || echo 0)
    if [ "$started" -gt $(( due[$id] - every[$id] )) ]; then due[$id]=$(( started + every[$id] )); fi
    if [ "$now" -ge "${due[$id]}" ]; then
      podman healthcheck run "$id" >/dev/null 2>&1 || true   # the status is in podman inspect
      due[$id]=$(( now + every[$id] ))
    fi
  done
  sleep 1
done
