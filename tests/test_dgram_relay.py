#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_dgram_relay.py: lite-05 datagrams (issue 25 item 3) through moqdp-relay (TAP).

  test_dgram_relay.py RELAY LOAD

On each backend, kernel (loopback) and dpdk (net_memif between the relay
and moqdp-load, --no-huge), moqdp-load --publish --datagrams with 5
subscribers: the publisher sends the audio track's single-frame groups as
QUIC datagrams, the relay takes them into its cache and sends them to the
subscribers as datagrams (video on streams). Checked: every subscriber
ready, no verification error, the publisher's datagrams counted in by the
relay (/metrics datagrams_in_total) and out to the subscribers
(datagrams_out_total about 5x), the subscribers' datagrams received, none
too large. Once more on the kernel backend with --fastpath on: the
subscribers are handed off (moqdp_fastpath_connections >= 5 while the load
runs) and get the datagrams from the engine (fastpath/dgram.c), every group
verified or counted lost.

Needs root (EAL); the EAL run directories are removed.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

results = []


def tap(ok, name, diag=""):
    results.append(ok)
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {name}")
    for line in str(diag).splitlines():
        print(f"# {line}")
    sys.stdout.flush()


def free_port(kind=socket.SOCK_STREAM):
    with socket.socket(socket.AF_INET, kind) as so:
        so.bind(("127.0.0.1", 0))
        return so.getsockname()[1]


def metrics(port):
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for line in body.splitlines():
        m = re.match(r"^moqdp_([a-z_]+)(?:\{[^}]*\})? ([0-9.e+]+)$", line)
        if m and "{" not in line:
            out[m.group(1)] = float(m.group(2))
    return out


def run(backend, relay_bin, load_bin, tmp, transport="quic", fastpath=False):
    pid = os.getpid()
    rprefix, lprefix = f"moqdp-dg-r{pid}-{backend}", f"moqdp-dg-l{pid}-{backend}"
    common = ["--no-pci", "--no-huge", "--log-level=lib.eal:error"]
    mgmt = free_port()
    if backend == "dpdk":
        sock = f"{tmp}/memif.sock"
        port = 4443
        relay = [relay_bin, "-l", "0-1", *common, "-m", "512", "--file-prefix", rprefix,
                 f"--vdev=net_memif0,role=server,socket={sock}", "--",
                 "--listen", "10.78.0.1/24"]
        load = [load_bin, "-l", "0", *common, "-m", "256", "--file-prefix", lprefix,
                f"--vdev=net_memif0,role=client,socket={sock}", "--",
                "--relay", "10.78.0.1:4443", "--local", "10.78.0.2/24"]
    else:
        port = free_port(socket.SOCK_DGRAM)
        relay = [relay_bin, "-l", "0-1", *common, "-m", "512", "--file-prefix", rprefix, "--",
                 "--backend", "kernel", "--listen", "127.0.0.1"]
        load = [load_bin, "--kernel", "--relay", f"127.0.0.1:{port}", "--local", "127.0.0.2"]
    relay += ["--port", str(port), "--stats-interval", "0", "--mgmt", f"127.0.0.1:{mgmt}"]
    if fastpath:
        relay += ["--fastpath", "on"]
    jpath = f"{tmp}/load-{backend}-{transport}.json"
    load += ["--publish", "--datagrams", "--subscribers", "5", "--ramp", "50", "--tracks",
             "video:1M:gop=30,audio", "--duration", "5", "--json", jpath, "--quiet",
             "--transport", transport]
    rlog = open(f"{tmp}/relay-{backend}.log", "w")
    rp = subprocess.Popen(relay, stdout=rlog, stderr=subprocess.STDOUT)
    m = {}
    final = {}
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                metrics(mgmt)
                break
            except OSError:
                if rp.poll() is not None:
                    break
                time.sleep(0.2)
        if rp.poll() is not None:
            rlog.flush()
            return {}, {"exit": "relay exited", "stderr": open(rlog.name).read()[-500:]}
        lp = subprocess.Popen(load, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
        # the gauge of connections on the fast path, at its highest while
        # the load runs (they close with it)
        fp_max, deadline = 0, time.time() + 90
        while lp.poll() is None and time.time() < deadline:
            try:
                fp_max = max(fp_max, metrics(mgmt).get("fastpath_connections", 0))
            except OSError:
                pass
            time.sleep(0.25)
        if lp.poll() is None:
            lp.kill()
        lp.stderr_text = lp.communicate()[1] or ""
        time.sleep(0.3)
        m = metrics(mgmt)
        m["fastpath_connections_max"] = fp_max
        for line in open(jpath):
            if '"final":true' in line:
                final = json.loads(line)
        if lp.returncode != 0:
            final["exit"] = lp.returncode
            final["stderr"] = lp.stderr_text[-500:]
    finally:
        rp.terminate()
        try:
            rp.wait(timeout=15)
        except subprocess.TimeoutExpired:
            rp.kill()
            rp.wait()
        rlog.close()
        for p in (rprefix, lprefix):
            shutil.rmtree(f"/var/run/dpdk/{p}", ignore_errors=True)
    return m, final


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_dgram_relay.py RELAY LOAD")
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (EAL)")
        return 0
    relay_bin, load_bin = sys.argv[1], sys.argv[2]
    tmp = tempfile.mkdtemp(prefix="moqdp-dg.")
    # WebTransport: HTTP/3 datagrams (the Quarter Stream ID before the
    # moq-lite header), moqdp-load's WebTransport client both ways
    # and with --fastpath on: the subscribers that negotiated datagrams are
    # handed off and get them from the engine (fastpath/dgram.c)
    for backend, tr, fp in (("kernel", "quic", False), ("dpdk", "quic", False),
                            ("kernel", "wt", False), ("kernel", "quic", True),
                            ("kernel", "wt", True)):
        m, f = run(backend, relay_bin, load_bin, tmp, tr, fp)
        backend = backend if tr == "quic" else backend + "+wt"
        if fp:
            backend += " --fastpath on"
            tap(m.get("fastpath_connections_max", 0) >= 5 and
                m.get("fastpath_handoffs_total", 0) >= 5,
                f"{backend}: the datagram subscribers were handed off",
                json.dumps({k: v for k, v in m.items() if "fastpath" in k}))
        diag = json.dumps({k: v for k, v in f.items()
                           if k in ("subs_ready", "errors", "frames_ok", "groups_missing",
                                    "pub_dgrams_out", "sub_dgrams_in", "exit", "stderr")}) + \
            "\n" + json.dumps({k: v for k, v in m.items() if "datagram" in k})
        tap(f.get("exit") is None and f.get("subs_ready") == 5 and f.get("errors") == 0,
            f"{backend}: moqdp-load --datagrams: 5 subscribers ready, no error", diag)
        pub = f.get("pub_dgrams_out", 0)
        din, dout = m.get("datagrams_in_total", 0), m.get("datagrams_out_total", 0)
        # (a loaded machine may lose some on the way in: lost groups)
        tap(pub > 100 and din >= pub * 0.75,
            f"{backend}: the publisher's audio groups came in as datagrams", diag)
        tap(dout >= din * 4 and f.get("sub_dgrams_in", 0) >= dout * 0.7 and
            m.get("datagrams_too_large_total", 1) == 0,
            f"{backend}: ... and went out as datagrams to the subscribers", diag)
        # every group a subscriber misses is a datagram lost: on the way in
        # (x 5 subscribers) or dropped unsent by the relay's QUIC (its
        # queue, a closing connection), counted; the edges aside
        lost = (pub - din) * 5 + m.get("quic_datagrams_dropped_total", 0) + \
            m.get("fastpath_datagrams_lost_total", 0)
        tap(f.get("frames_ok", 0) > 5 * 3 * (30 + 50) and
            f.get("groups_missing", 1e9) <= lost + 20,
            f"{backend}: video and audio verified, missing groups = datagrams lost", diag)
    print(f"1..{len(results)}")
    shutil.rmtree(tmp, ignore_errors=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
