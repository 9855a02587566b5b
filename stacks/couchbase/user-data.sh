#!/bin/bash
# One node of the Couchbase Server Community cluster, run by cloud-init at first boot: install the
# server, format and mount the data volume, then node 0 initialises the cluster, the bucket, the
# application user and the daily backup to S3, while the other nodes join node 0 and rebalance.
# The outcome goes to CloudFormation (cfn-signal), so a node that failed fails the deploy.
# `couchbase-node backup` (installed by node 0, run by its systemd timer) is the backup itself.
#
# CloudFormation renders this through Fn::Sub: a dollar-brace Name is a value of the stack, and the
# script's own dollar-braces carry a "!" after the brace. Credentials come from Secrets Manager.
# COUCHBASE_ROOT (unset in production) prefixes every path written, for the tests.
set -euo pipefail

NODE_INDEX=${NodeIndex}
ROOT=${!COUCHBASE_ROOT:-}
DATA=$ROOT/data
BACKUPS=$DATA/backup
SELF_COPY=$ROOT/usr/local/sbin/couchbase-node
PATH=$PATH:/opt/aws/bin:/opt/couchbase/bin

retry() {  # retry ATTEMPTS DELAY COMMAND...: for what comes up in its own time
  local attempts=$1 delay=$2 attempt
  shift 2
  for ((attempt = 1; attempt <= attempts; attempt++)); do
    "$@" && return 0
    sleep "$delay"
  done
  echo "gave up after $attempts attempts: $1" >&2
  return 1
}

credentials() {  # "username password" of a Secrets Manager secret (generated without spaces)
  aws secretsmanager get-secret-value --region "${AWS::Region}" --secret-id "$1" --query SecretString \
    --output text | python3 -c 'import json, sys; s = json.load(sys.stdin); print(s["username"], s["password"])'
}

admin_credentials() {
  local admin
  admin=$(credentials "${AdminSecretArn}")
  read -r ADMIN_USER ADMIN_PASSWORD <<< "$admin"
  # couchbase-cli and cbbackupmgr read these, so the password is on no command line
  export CB_REST_USERNAME=$ADMIN_USER CB_REST_PASSWORD=$ADMIN_PASSWORD CB_USERNAME=$ADMIN_USER \
    CB_PASSWORD=$ADMIN_PASSWORD
}

signal() {  # tell CloudFormation how the bootstrap ended (the instance's CreationPolicy waits for it)
  cfn-signal --exit-code "$1" --stack "${AWS::StackName}" --resource "${Resource}" --region "${AWS::Region}" \
    || echo "cfn-signal failed" >&2
}

install_server() {
  retry 5 10 dnf install -y aws-cfn-bootstrap
  local rpm
  rpm=$(mktemp -d)/couchbase-server.rpm
  # Couchbase's published name: couchbase-server-community-<version>-linux.<x86_64|aarch64>.rpm
  retry 5 10 curl -fsSL -o "$rpm" \
    "https://packages.couchbase.com/releases/${Version}/couchbase-server-community-${Version}-linux.$(uname -m).rpm"
  retry 3 10 dnf install -y "$rpm"
}

mount_data_volume() {
  local device=${DataDevice} uuid
  retry 30 2 test -e "$device"  # the EBS volume's name appears once udev has linked it
  blkid "$device" > /dev/null || mkfs.xfs -L couchbase-data "$device"
  uuid=$(blkid -s UUID -o value "$device")
  mkdir -p "$DATA" "$ROOT/etc"
  grep -qs "UUID=$uuid" "$ROOT/etc/fstab" || echo "UUID=$uuid $DATA xfs defaults,nofail 0 2" >> "$ROOT/etc/fstab"
  systemctl daemon-reload
  mount "$DATA"
  mkdir -p "$DATA/couchbase/data" "$DATA/couchbase/index" "$BACKUPS"
  chown -R couchbase:couchbase "$DATA/couchbase"
}

init_node() {  # where this node keeps its data, and the address the cluster knows it by
  retry 60 5 curl -fs -o /dev/null http://127.0.0.1:8091/ui/index.html
  local token
  token=$(curl -fsS -X PUT -H "X-aws-ec2-metadata-token-ttl-seconds: 300" http://169.254.169.254/latest/api/token)
  SELF=$(curl -fsS -H "X-aws-ec2-metadata-token: $token" http://169.254.169.254/latest/meta-data/local-ipv4)
  couchbase-cli node-init -c 127.0.0.1 --node-init-hostname "$SELF" \
    --node-init-data-path "$DATA/couchbase/data" --node-init-index-path "$DATA/couchbase/index"
}

create_cluster() {
  couchbase-cli cluster-init -c "$SELF" --cluster-name "${ClusterName}" --cluster-username "$ADMIN_USER" \
    --cluster-password "$ADMIN_PASSWORD" --services data,index,query --cluster-ramsize "${DataRamMb}" \
    --cluster-index-ramsize 512
  couchbase-cli bucket-create -c "$SELF" --bucket "${Bucket}" --bucket-type couchbase \
    --bucket-ramsize "${BucketRamMb}" --bucket-replica "${Replicas}" --enable-flush 0 --wait
  local app app_user app_password
  app=$(credentials "${AppSecretArn}")
  read -r app_user app_password <<< "$app"
  # Community Edition's only bucket-scoped role: read and write on this bucket, nothing else
  couchbase-cli user-manage -c "$SELF" --set --auth-domain local --rbac-username "$app_user" \
    --rbac-password "$app_password" --roles "bucket_full_access[${Bucket}]"
  install_backup_timer
}

bucket_exists() {  # on node 0, once its DNS record and its bucket are there
  # grep reads the whole listing: with -q it would stop at the name, and the pipe it broke
  # fails the check under pipefail
  couchbase-cli bucket-list -c "${FirstNode}" | grep -x "${Bucket}" > /dev/null
}

join_cluster() {
  retry 120 10 bucket_exists
  couchbase-cli server-add -c "${FirstNode}" --server-add "$SELF" --server-add-username "$ADMIN_USER" \
    --server-add-password "$ADMIN_PASSWORD" --services data,index,query
  # nodes joining together race for the rebalance: the loser retries, and its node is in by then
  retry 20 30 couchbase-cli rebalance -c "${FirstNode}" --no-progress-bar
}

install_backup_timer() {
  install -D -m 0700 "$0" "$SELF_COPY"
  local units=$ROOT/etc/systemd/system
  mkdir -p "$units"
  cat > "$units/couchbase-backup.service" << EOF
[Unit]
Description=Back up the Couchbase cluster to S3
After=couchbase-server.service

[Service]
Type=oneshot
ExecStart=$SELF_COPY backup
EOF
  cat > "$units/couchbase-backup.timer" << EOF
[Unit]
Description=Daily backup of the Couchbase cluster to S3

[Timer]
OnCalendar=*-*-* 02:30:00
RandomizedDelaySec=15m
Persistent=true

[Install]
WantedBy=timers.target
EOF
  systemctl daemon-reload
  systemctl enable --now couchbase-backup.timer
}

backup() {  # a full backup of the whole cluster, uploaded, then removed from the data volume
  admin_credentials
  local stamp
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  ARCHIVE=$BACKUPS/$stamp  # global: the exit trap runs after this function has returned
  trap 'rm -rf "$ARCHIVE"' EXIT
  cbbackupmgr config --archive "$ARCHIVE" --repo "${ClusterName}"
  cbbackupmgr backup --archive "$ARCHIVE" --repo "${ClusterName}" --cluster couchbase://127.0.0.1 \
    --no-progress-bar
  aws s3 sync "$ARCHIVE" "s3://${BackupBucket}/${BackupPrefix}$stamp/" --region "${AWS::Region}" --only-show-errors
}

bootstrap() {
  mkdir -p "$ROOT/var/log"
  exec > >(tee -a "$ROOT/var/log/couchbase-setup.log") 2>&1
  trap 'signal $?' EXIT
  install_server
  mount_data_volume
  admin_credentials
  init_node
  if [ "$NODE_INDEX" = 0 ]; then
    create_cluster
  else
    join_cluster
  fi
}

case "$*" in
  "") bootstrap ;;
  backup) backup ;;
  *) echo "usage: $0 [backup]" >&2; exit 2 ;;
esac
