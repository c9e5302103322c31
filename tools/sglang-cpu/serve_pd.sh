#!/bin/bash
# serve_pd.sh [DIR] ROLE PORT [extra args]: one real SGLang 0.5.23 PD server (ROLE prefill|decode)
# on 127.0.0.1:PORT, KV over mooncake TCP (setup_pd.sh first). The prefill's bootstrap port is
# PORT+998 unless --disaggregation-bootstrap-port is given.
set -euo pipefail
DIR=${1:-.dsv4ops/sglang-cpu}; ROLE=$2; PORT=$3; shift 3
DIR=$(cd "$DIR" && pwd)
export LD_LIBRARY_PATH=$DIR/libs/usr/lib/x86_64-linux-gnu:$DIR/libs/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MC_FORCE_TCP=1 MOONCAKE_PROTOCOL=tcp
exec "$(dirname "$0")/serve.sh" "$DIR" "$PORT" --disaggregation-mode "$ROLE" \
  --disaggregation-transfer-backend mooncake --disaggregation-bootstrap-port $((PORT + 998)) "$@"
