#!/usr/bin/env bash
# A full owned load of the Llama-shaped .bin shards over loopback HTTP
# against `curl -o /dev/null` of the same files (the floor: the same bytes,
# one request a file), both from nginx on 127.0.0.1 (bench/data/llama, made by
# bench/make_workloads.py). Prints the median of RUNS of each, interleaved.
#
# Usage: bench/remote_load.sh [BUILD_DIR]   (RUNS=3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
runs=${RUNS:-3}
data=$(pwd)/bench/data
[ -f "$data/llama/pytorch_model.bin.index.json" ] ||
  /usr/bin/python3 bench/make_workloads.py --llama-params "${LLAMA_PARAMS:-3e9}" llama
tmp=$(mktemp -d)
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat > "$tmp/nginx.conf" <<CONF
daemon off; worker_processes 2; pid $tmp/nginx.pid; error_log $tmp/error.log;
events { worker_connections 256; }
http { access_log off; sendfile on; client_body_temp_path $tmp; proxy_temp_path $tmp;
       fastcgi_temp_path $tmp; uwsgi_temp_path $tmp; scgi_temp_path $tmp;
       server { listen 127.0.0.1:$port; root $data; } }
CONF
/usr/sbin/nginx -c "$tmp/nginx.conf" -p "$tmp" -g "user root;" & nginx=$!
trap 'kill $nginx; rm -rf "$tmp"' EXIT
sleep 1
url=http://127.0.0.1:$port/llama
shards=$(cd "$data/llama" && echo *.bin)
t() { local s=$(date +%s.%N); "$@" > /dev/null; echo "$(date +%s.%N) - $s" | bc; }
curl_times=() load_times=()
for ((i = 0; i < runs; i++)); do
  curl_times+=($(t bash -c "for f in $shards; do curl -s -o /dev/null $url/\$f; done"))
  load_times+=($(t "$build/bin/torchport" load "$url/pytorch_model.bin.index.json"))
done
median() { printf '%s\n' "$@" | sort -n | sed -n "$(( ($# + 1) / 2 ))p"; }
c=$(median "${curl_times[@]}") l=$(median "${load_times[@]}")
bytes=$(du -cb "$data"/llama/*.bin | tail -1 | cut -f1)
echo "bytes=$bytes curl_s=$c torchport_load_owned_s=$l ratio=$(echo "scale=3; $l / $c" | bc)"
