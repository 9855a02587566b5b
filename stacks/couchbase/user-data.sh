#!/bin/bash
# Couchbase Server Community on one node of the cluster: format and mount the EBS data volume,
# install, then node 0 initialises the cluster, the bucket and the application user; the other
# nodes join node 0 and rebalance. Credentials come from Secrets Manager, never from this script.
# (CloudFormation substitutes the Fn::Sub names in braces; the script's own variables are plain $NAME.)
set -euo pipefail
exec > >(tee -a /var/log/couchbase-setup.log) 2>&1

DEVICE=/dev/nvme1n1
[ -b $DEVICE ] || DEVICE=/dev/xvdf
blkid $DEVICE || mkfs.xfs $DEVICE
mkdir -p /opt/couchbase
grep -q /opt/couchbase /etc/fstab || echo "$DEVICE /opt/couchbase xfs defaults,nofail 0 2" >> /etc/fstab
mount -a

dnf install -y jq
curl -fsSL --retry 5 -o /tmp/couchbase.rpm \
  "https://packages.couchbase.com/releases/${Version}/couchbase-server-community-${Version}-amzn2023.x86_64.rpm"
dnf install -y /tmp/couchbase.rpm
until curl -sf http://127.0.0.1:8091/ui/index.html > /dev/null; do sleep 5; done

secret() { aws secretsmanager get-secret-value --region ${AWS::Region} --secret-id "$1" --query SecretString --output text; }
ADMIN=$(secret ${AdminSecretArn})
APP=$(secret ${AppSecretArn})
ADMIN_USER=$(jq -r .username <<< "$ADMIN"); ADMIN_PASSWORD=$(jq -r .password <<< "$ADMIN")
APP_USER=$(jq -r .username <<< "$APP"); APP_PASSWORD=$(jq -r .password <<< "$APP")
IMDS_TOKEN=$(curl -sf -X PUT http://169.254.169.254/latest/api/token -H "X-aws-ec2-metadata-token-ttl-seconds: 300")
SELF=$(curl -sf -H "X-aws-ec2-metadata-token: $IMDS_TOKEN" http://169.254.169.254/latest/meta-data/local-ipv4)
CLI=/opt/couchbase/bin/couchbase-cli

if [ "${NodeIndex}" = "0" ]; then
  $CLI node-init -c 127.0.0.1 --node-init-hostname "$SELF" --node-init-data-path /opt/couchbase/data \
    --node-init-index-path /opt/couchbase/index
  $CLI cluster-init -c "$SELF" --cluster-name "${ClusterName}" --cluster-username "$ADMIN_USER" \
    --cluster-password "$ADMIN_PASSWORD" --services data,index,query --cluster-ramsize ${DataRamMb} \
    --cluster-index-ramsize 512
  $CLI bucket-create -c "$SELF" -u "$ADMIN_USER" -p "$ADMIN_PASSWORD" --bucket "${Bucket}" --bucket-type couchbase \
    --bucket-ramsize ${BucketRamMb} --bucket-replica ${Replicas} --enable-flush 0 --wait
  $CLI user-manage -c "$SELF" -u "$ADMIN_USER" -p "$ADMIN_PASSWORD" --set --auth-domain local --rbac-username "$APP_USER" \
    --rbac-password "$APP_PASSWORD" --roles "data_reader[${Bucket}],data_writer[${Bucket}]"
else
  until curl -sf -o /dev/null --user "$ADMIN_USER:$ADMIN_PASSWORD" \
    "http://${FirstNode}:8091/pools/default/buckets/${Bucket}"; do sleep 10; done
  $CLI node-init -c 127.0.0.1 --node-init-hostname "$SELF" --node-init-data-path /opt/couchbase/data \
    --node-init-index-path /opt/couchbase/index
  $CLI server-add -c "${FirstNode}" -u "$ADMIN_USER" -p "$ADMIN_PASSWORD" --server-add "$SELF" --server-add-username "$ADMIN_USER" \
    --server-add-password "$ADMIN_PASSWORD" --services data,index,query
  # joining nodes may race for the rebalance: retry until this node is in
  until $CLI rebalance -c "${FirstNode}" -u "$ADMIN_USER" -p "$ADMIN_PASSWORD"; do sleep 30; done
fi
