#!/bin/bash
# PD on CPU: mooncake over TCP (mooncake-transfer-engine-non-cuda) and the RDMA user libraries it
# links against (libibverbs & co., Debian packages unpacked into DIR/libs, no root install).
#   setup_pd.sh [DIR]   (after setup.sh; DIR defaults to .dsv4ops/sglang-cpu)
set -euo pipefail
DIR=${1:-.dsv4ops/sglang-cpu}
DIR=$(cd "$DIR" && pwd)
"$DIR/venv/bin/pip" install -q "mooncake-transfer-engine-non-cuda==0.3.13.post1"
mkdir -p "$DIR/debs" "$DIR/libs"
cd "$DIR/debs"
apt-get download libibverbs1 librdmacm1 libnl-3-200 libnl-route-3-200
for d in *.deb; do dpkg-deb -x "$d" "$DIR/libs"; done
touch "$DIR/.ready-pd"
echo "PD ready: serve with tools/sglang-cpu/serve_pd.sh $DIR prefill|decode PORT"
