#!/usr/bin/python3
"""The remote tests: each suite starts its servers on 127.0.0.1 (ephemeral
ports), runs tests/remote/remote_client (and the torchport tool) against
them, compares what they read with the same files read locally, counts the
bytes from the servers' own logs, and stops the servers.

  run_remote_tests.py http|s3|faults --client BIN --tool BIN --python PYTHON...

  http    nginx (Debian's nginx-light) serving the fixtures and a Llama-shaped
          checkpoint of .bin shards: every reader over HTTP Range; opening reads
          at most 0.1% of the shards' bytes and each of 4 tensor-parallel ranks
          at most 1/4 of the split weights plus the replicated ones (nginx's
          access log); the tool takes URLs.
  s3      moto's S3 server (requirements/remote-tests.txt): s3:// signed with
          SigV4; no credential in any message.
  faults  fault_server.py: every fault ends in the right bytes or a clear error,
          never mixed bytes, never a hang.

Exit 77 (skipped) when a server is not installed.
"""
import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(os.path.dirname(HERE), "fixtures")
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_port(port, proc, what, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            sys.exit(f"{what} exited at start ({proc.returncode})")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"{what} did not start listening")


def client(url, *extra, env=None, timeout=120):
    cmd = [args.client, url, *extra]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"ok": False, "code": "hang", "message": f"no answer in {timeout} s"}
    try:
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"ok": False, "code": "crash", "message": out.stderr[-2000:]}


def same(remote, local, what):
    check(remote.get("ok"), f"{what}: {remote.get('message')}")
    if remote.get("ok"):
        check(remote["tensors"] == local["tensors"] and remote["format"] == local["format"],
              f"{what}: read other tensors than the local file")


def stop(proc):
    if proc and proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def make_llama(out):
    """A Llama-shaped checkpoint in .bin shards (bench/make_workloads.py's
    shapes, two layers, a smaller vocabulary), by Debian's torch."""
    code = r"""
import collections, json, os, sys, torch
out = sys.argv[1]
hidden, inter, vocab, heads = 3200, 8640, 8000, 32
g = torch.Generator().manual_seed(0)
t = lambda *s: (torch.randn(*s, generator=g) * 0.02).bfloat16()
names = [("model.embed_tokens.weight", (vocab, hidden))]
for i in range(2):
    p = f"model.layers.{i}."
    names += [(p + "self_attn.q_proj.weight", (hidden, hidden)), (p + "self_attn.k_proj.weight", (hidden, hidden)),
              (p + "self_attn.v_proj.weight", (hidden, hidden)), (p + "self_attn.o_proj.weight", (hidden, hidden)),
              (p + "mlp.gate_proj.weight", (inter, hidden)), (p + "mlp.up_proj.weight", (inter, hidden)),
              (p + "mlp.down_proj.weight", (hidden, inter)), (p + "input_layernorm.weight", (hidden,)),
              (p + "post_attention_layernorm.weight", (hidden,))]
names += [("model.norm.weight", (hidden,)), ("lm_head.weight", (vocab, hidden))]
shards = [collections.OrderedDict(names[:11]), collections.OrderedDict(names[11:])]
wm = {}
for i, part in enumerate(shards):
    f = f"pytorch_model-{i + 1:05d}-of-00002.bin"
    torch.save(collections.OrderedDict((k, t(*s)) for k, s in part.items()), os.path.join(out, f))
    wm.update({k: f for k in part})
json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(out, "pytorch_model.bin.index.json"), "w"))
"""
    os.makedirs(out, exist_ok=True)
    subprocess.run(["/usr/bin/python3", "-c", code, out], check=True)


PLAN = """self_attn\\.q_proj\\.weight$ -> column(0, heads=32)
self_attn\\.[kv]_proj\\.weight$ -> column(0, kv_heads=32)
self_attn\\.o_proj\\.weight$ -> row(1, heads=32)
mlp\\.(gate|up)_proj\\.weight$ -> column(0)
mlp\\.down_proj\\.weight$ -> row(1)
embed_tokens\\.weight$ -> column(0)
lm_head\\.weight$ -> column(0)
norm\\.weight$ -> replicate
"""

FILES = ["checkpoint.pt", "legacy.pt", "big_endian.pt", "deflated.pt", "dtypes.pt", "protocol2.pt",
         "legacy_storage_view.pt", "plain_protocol2.pkl"]


def nginx_log_bytes(log, since=0):
    total = 0
    lines = open(log).read().splitlines()[since:]
    for line in lines:
        total += int(line.split()[2])
    return total, len(lines)


def suite_http(tmp):
    if not shutil.which("nginx") and not os.path.exists("/usr/sbin/nginx"):
        print("nginx is not installed (apt-get install nginx-light)")
        sys.exit(77)
    root = os.path.join(tmp, "root")
    shutil.copytree(FIXTURES, os.path.join(root, "fixtures"))
    make_llama(os.path.join(root, "llama"))
    port = free_port()
    log = os.path.join(tmp, "access.log")
    conf = os.path.join(tmp, "nginx.conf")
    open(conf, "w").write(f"""
daemon off; worker_processes 2; pid {tmp}/nginx.pid; error_log {tmp}/error.log;
events {{ worker_connections 256; }}
http {{
  log_format bytes '$request_uri $status $body_bytes_sent "$http_range"';
  access_log {log} bytes;
  client_body_temp_path {tmp}; proxy_temp_path {tmp}; fastcgi_temp_path {tmp}; uwsgi_temp_path {tmp};
  scgi_temp_path {tmp}; sendfile on; keepalive_requests 100000;
  server {{ listen 127.0.0.1:{port}; root {root}; }}
}}""")
    nginx = subprocess.Popen(["/usr/sbin/nginx", "-c", conf, "-p", tmp, "-g", "user root;"])
    try:
        wait_port(port, nginx, "nginx")
        base = f"http://127.0.0.1:{port}"
        # Every reader over HTTP Range reads what it reads from the file.
        for f in FILES:
            local = client(os.path.join(FIXTURES, f), "--owned")
            same(client(f"{base}/fixtures/{f}", "--owned"), local, f)
        for f in sorted(os.listdir(os.path.join(FIXTURES, "numpy")))[:6]:
            local = client(os.path.join(FIXTURES, "numpy", f))
            if local.get("ok"):
                same(client(f"{base}/fixtures/numpy/{f}"), local, "numpy/" + f)
        for d in ["dcp/v214/tp4", "dcp/v214/zstd", "dcp/single"]:
            if os.path.isdir(os.path.join(FIXTURES, d)):
                local = client(os.path.join(FIXTURES, d), "--owned")
                same(client(f"{base}/fixtures/{d}/", "--owned"), local, d + " (folder URL)")
        index = "dcp/v214/hf_consolidated/model.safetensors.index.json"
        same(client(f"{base}/fixtures/{index}", "--owned"),
             client(os.path.join(FIXTURES, index), "--owned"), index)
        check(subprocess.run([args.tool, "inspect", f"{base}/fixtures/checkpoint.pt"],
                             capture_output=True, timeout=60).returncode == 0, "torchport inspect URL")
        # The Llama-shaped .bin shards: opening reads directories and pickles.
        llama = os.path.join(root, "llama")
        total = sum(os.path.getsize(os.path.join(llama, f)) for f in os.listdir(llama) if f.endswith(".bin"))
        mark = len(open(log).read().splitlines())
        opened = client(f"{base}/llama/pytorch_model.bin.index.json", "--open-only")
        check(opened.get("ok"), f"llama open: {opened.get('message')}")
        got, requests = nginx_log_bytes(log, mark)
        print(f"llama: opening read {got} of {total} bytes ({100 * got / total:.4f}%) in {requests} requests")
        check(got <= total / 1000, f"opening read {got} bytes, more than 0.1% of {total}")
        local = client(os.path.join(llama, "pytorch_model.bin.index.json"), "--owned")
        same(client(f"{base}/llama/pytorch_model.bin.index.json", "--owned"), local, "llama owned")
        # Tensor parallel: each of 4 ranks reads its slices (nginx's log).
        plan = os.path.join(tmp, "llama.plan")
        open(plan, "w").write(PLAN)
        replicated = 2 * 3200 * (1 + 2 * 2)  # the norms
        split = total - replicated
        for rank in range(4):
            mark = len(open(log).read().splitlines())
            r = client(f"{base}/llama/pytorch_model.bin.index.json", "--shard", str(rank), "4", plan)
            l = client(os.path.join(llama, "pytorch_model.bin.index.json"), "--shard", str(rank), "4", plan)
            check(r.get("ok") and r.get("tensors") == l.get("tensors"), f"rank {rank}: {r.get('message')}")
            got, requests = nginx_log_bytes(log, mark)
            budget = split / 4 + replicated + 2 * (64 << 10) + 3 * (128 << 10)  # + opening's reads
            print(f"rank {rank}/4: read {got} bytes in {requests} requests ({got / total:.4f} of the "
                  f"checkpoint; budget {budget:.0f})")
            check(got <= budget, f"rank {rank} read {got} bytes, more than {budget:.0f}")
    finally:
        stop(nginx)


def suite_s3(tmp):
    py = args.python
    if subprocess.run(py + ["-c", "import moto, boto3"], capture_output=True).returncode != 0:
        print("moto is not installed (pip install -r requirements/remote-tests.txt)")
        sys.exit(77)
    port = free_port()
    env = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY0000001", "AWS_SECRET_ACCESS_KEY": "s3cr3t-never-printed",
           "AWS_SESSION_TOKEN": "token-never-printed", "AWS_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    moto = subprocess.Popen(py + ["-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, **env})
    try:
        wait_port(port, moto, "moto")
        upload = """
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
s3.create_bucket(Bucket="ckpt")
root = sys.argv[1]
for f in sys.argv[2:]:
    s3.upload_file(os.path.join(root, f), "ckpt", f)
"""
        files = FILES + ["dcp/v214/tp4/.metadata"] + [
            "dcp/v214/tp4/" + f for f in os.listdir(os.path.join(FIXTURES, "dcp/v214/tp4"))
            if f.endswith(".distcp")]
        subprocess.run(py + ["-c", upload, FIXTURES] + files, check=True, env={**os.environ, **env})
        for f in FILES:
            same(client(f"s3://ckpt/{f}", "--owned", env=env),
                 client(os.path.join(FIXTURES, f), "--owned"), "s3 " + f)
        same(client("s3://ckpt/dcp/v214/tp4/", "--owned", env=env),
             client(os.path.join(FIXTURES, "dcp/v214/tp4"), "--owned"), "s3 DCP folder")
        missing = client("s3://ckpt/nothing.pt", env=env)
        check(not missing.get("ok") and "404" in missing.get("message", ""), f"missing key: {missing}")
        for r in [missing, client("s3://nobucket/x.pt", env=env)]:
            text = json.dumps(r)
            check(env["AWS_SECRET_ACCESS_KEY"] not in text and env["AWS_SESSION_TOKEN"] not in text,
                  "a credential in a message")
        out = subprocess.run([args.tool, "inspect", "--json", "s3://ckpt/nothing.pt"], capture_output=True,
                             text=True, timeout=60, env={**os.environ, **env})
        check(env["AWS_SECRET_ACCESS_KEY"] not in out.stdout + out.stderr and out.returncode != 0,
              "the tool's error for a missing key")
    finally:
        stop(moto)


def suite_faults(tmp):
    root = os.path.join(tmp, "root")
    os.makedirs(root)
    for f in ["checkpoint.pt", "legacy.pt", "deflated.pt"]:
        shutil.copy(os.path.join(FIXTURES, f), root)
    # Larger than the 64 KiB the first request reads, in both formats torch writes.
    subprocess.run(["/usr/bin/python3", "-c", "import torch, sys\n"
                    "g = torch.Generator().manual_seed(1)\n"
                    "d = {f'w{i}': torch.randn(256, 256, generator=g) for i in range(6)}\n"
                    "torch.save(d, sys.argv[1] + '/big.pt')\n"
                    "torch.save(d, sys.argv[1] + '/big_legacy.pt', _use_new_zipfile_serialization=False)",
                    root], check=True)
    log = os.path.join(tmp, "faults.log")
    port_file = os.path.join(tmp, "port")
    server = subprocess.Popen([sys.executable, os.path.join(HERE, "fault_server.py"), "--root", root,
                               "--port-file", port_file, "--log", log])
    try:
        while not os.path.exists(port_file):
            time.sleep(0.05)
        port = int(open(port_file).read())
        base = f"http://127.0.0.1:{port}"
        quick = ["--stall-ms", "1000", "--retries", "3"]
        for f in ["checkpoint.pt", "big.pt", "big_legacy.pt"]:
            local = client(os.path.join(root, f), "--owned")
            same(client(f"{base}/ok/{f}", "--owned", *quick), local, f"ok {f}")
            # Survived: the bytes are the file's, never a mix.
            for fault in ["drop", "503", "slow"]:
                same(client(f"{base}/{fault}/{f}", "--owned", *quick, timeout=120), local, f"{fault} {f}")
            # Refused, by name, in bounded time (a file read in one request cannot change).
            if f == "checkpoint.pt":
                continue
            for fault, code, words in [("503-always", "io", "HTTP 503"),
                                       ("slow-always", "io", "Timeout"),
                                       ("change", "corrupt", "changed"),
                                       ("change-noifmatch", "corrupt", "changed"),
                                       ("wrongrange", "corrupt", "another range")]:
                if fault == "slow-always" and f != "big.pt":
                    continue
                r = client(f"{base}/{fault}/{f}", "--owned", *quick, timeout=120)
                check(not r.get("ok") and r.get("code") == code and words.lower() in r.get("message", "").lower(),
                      f"{fault} {f}: {r}")
        # A server ignoring Range: a small object is taken whole, a larger refused.
        local = client(os.path.join(FIXTURES, "checkpoint.pt"), "--owned")
        same(client(f"{base}/norange/checkpoint.pt", "--owned"), local, "norange (small)")
        r = client(f"{base}/norange/checkpoint.pt", "--max-unranged", "1000")
        check(not r.get("ok") and r.get("code") == "unsupported" and "ignores Range" in r.get("message", ""),
              f"norange (large): {r}")
        # A redirect to another origin carries no credentials.
        env = {"AWS_ACCESS_KEY_ID": "AKIAEXAMPLEKEY0000001", "AWS_SECRET_ACCESS_KEY": "s3cr3t-never-printed",
               "AWS_SESSION_TOKEN": "token-never-printed", "AWS_ENDPOINT_URL": base}
        mark = len(open(log).read().splitlines())
        same(client("s3://redirect/checkpoint.pt", "--owned", env=env), local, "redirect")
        entries = [json.loads(l) for l in open(log).read().splitlines()[mark:]]
        check(any(e["fault"] == "redirect" and e["credentials"] for e in entries),
              "the first request was not signed")
        moved = [e for e in entries if e["host"].startswith("localhost")]
        check(moved and not any(e["credentials"] for e in moved), f"credentials went to another host: {moved}")
        # TLS: a certificate the system does not trust is refused; trusted, it reads.
        cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
        if subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
                           cert, "-days", "1", "-subj", "/CN=127.0.0.1", "-addext",
                           "subjectAltName=IP:127.0.0.1"], capture_output=True).returncode == 0:
            tls_port = os.path.join(tmp, "tls_port")
            tls = subprocess.Popen([sys.executable, os.path.join(HERE, "fault_server.py"), "--root", root,
                                    "--port-file", tls_port, "--log", log, "--tls", cert, key])
            try:
                while not os.path.exists(tls_port):
                    time.sleep(0.05)
                url = f"https://127.0.0.1:{int(open(tls_port).read())}/ok/checkpoint.pt"
                r = client(url, env={"CURL_CA_BUNDLE": "", "SSL_CERT_FILE": ""})
                check(not r.get("ok") and "certificate" in r.get("message", "").lower(), f"untrusted TLS: {r}")
                same(client(url, "--owned", env={"CURL_CA_BUNDLE": cert}), local, "trusted TLS")
            finally:
                stop(tls)
    finally:
        stop(server)


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("suite", choices=["http", "s3", "faults"])
    ap.add_argument("--client", required=True)
    ap.add_argument("--tool", required=True)
    ap.add_argument("--python", nargs=argparse.REMAINDER, default=["/usr/bin/python3"])
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="torchport-remote-")
    try:
        {"http": suite_http, "s3": suite_s3, "faults": suite_faults}[args.suite](tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
