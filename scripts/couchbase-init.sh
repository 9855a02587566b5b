#!/usr/bin/env bash
# Initialises the Couchbase Server container of docker-compose.yml once: cluster, user, bucket.
set -euo pipefail
until curl -sf http://127.0.0.1:8091/ui/index.html >/dev/null; do sleep 2; done
docker compose exec couchbase couchbase-cli cluster-init -c 127.0.0.1 --cluster-username blackbox \
  --cluster-password blackbox-secret --services data --cluster-ramsize 1024
docker compose exec couchbase couchbase-cli bucket-create -c 127.0.0.1 -u blackbox -p blackbox-secret \
  --bucket blackbox --bucket-type couchbase --bucket-ramsize 512
