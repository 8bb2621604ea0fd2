#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_dpdk_exc.py: the DPDK backend's TCP side through its exception port (TAP).

  test_dpdk_exc.py RELAY LOAD [NODE]

Issue 15 on `--backend dpdk --tcp 1` (dpdk_app/exc.c, docs/DEPLOY.md section
14). The test makes two network namespaces: the relay runs in R (its
exception port, a net_tap it creates with the data port's MAC and its
--listen address, stays there); its data port is a net_tap whose kernel end
the test moves into C, where curl and moqdp-load --kernel run:

1. the relay starts with --tcp 1 on the dpdk backend (before: refused) and
   its exception interface in R carries 10.79.0.1/24;
2. GET /health over the data port -> 200 "ok\\n";
3. GET /certificate.sha256 -> 64 lowercase hex, the same over TLS;
4. moqdp-load --transport ws: publisher + 4 WebSocket (qmux-01) subscribers,
   every frame verified, all ready, no errors;
5. moqdp-load over QUIC on the same port number at the same time as 4.
   (a second broadcast), every frame verified;
6. the relay's /metrics (management listener inside R) count frames both
   ways through the exception port, none dropped, and the TCP connections
   and WebSocket sessions;
7. @moq/net in node (tests/web/ws_remote.mjs) over WebSocket: the http://
   path (certificate.sha256, then the session), publish + subscribe, every
   byte verified (skipped without node / tests/web/node_modules);
8. issue 22, item 6: only the relay's own TCP port goes to the kernel: a
   `python3 -m http.server` bound to 0.0.0.0 on another port of the relay's
   host (in R) answers there but not from C, and the relay counts the
   refused frames (moqdp_exception_refused_total, telemetry's
   exception_refused) while its own port, and its --mgmt port (bound to
   0.0.0.0 here), keep working;
9. on SIGTERM the relay exits 0 and its exception interface is gone;
10. issue 26: IPv6 through the exception port: the relay also listens on
   2001:db8:79::1/64; GET /health and /certificate.sha256 over TLS on
   http(s)://[2001:db8:79::1]:4443 from C (the kernel resolves C by
   neighbour discovery through the data port).

Needs root (namespaces, net_tap); skipped otherwise.
"""
import os
import re
import signal
import subprocess
import sys
import time

RELAY, LOAD = sys.argv[1], sys.argv[2]
NODE = sys.argv[3] if len(sys.argv) > 3 else ""
WS_REMOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "web", "ws_remote.mjs")
if not os.path.isdir(os.path.join(os.path.dirname(WS_REMOTE), "node_modules", "@moq")):
    NODE = ""
PID = os.getpid()
NSR, NSC = f"moqdp-excR-{PID}", f"moqdp-excC-{PID}"
DATA_IF = f"mqe{PID % 100000}"
IP, PORT = "10.79.0.1", 4443
IP6 = "2001:db8:79::1"
OTHER_PORT = 8000 + PID % 1000
n = 0
failed = 0


def tap(cond, name, diag=""):
    global n, failed
    n += 1
    if not cond:
        failed += 1
        for line in str(diag).splitlines()[-30:]:
            print(f"# {line}")
    print(f"{'ok' if cond else 'not ok'} {n} {name}", flush=True)
    return cond


def sh(cmd, timeout=60):
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=timeout)


def curl(path, tls=False, port=PORT, max_time=5):
    r = sh(f"ip netns exec {NSC} curl -sk --max-time {max_time} "
           f"{'https' if tls else 'http'}://{IP}:{port}{path}", timeout=20)
    return r.returncode, r.stdout


def load(extra, broadcast, local):
    return subprocess.Popen(
        ["ip", "netns", "exec", NSC, LOAD, "--kernel", "--relay", f"{IP}:{PORT}", "--local",
         local, "--publish", "--subscribers", "4", "--duration", "5", "--broadcast", broadcast,
         *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def load_ok(p, what):
    out = p.communicate(timeout=90)[0]
    m = re.search(r"delivered\s+(\d+) frames verified", out)
    good = (p.returncode == 0 and m is not None and int(m.group(1)) > 100 and
            re.search(r"subscribers 4 of 4 ready, 0 failed", out) is not None and
            re.search(r"errors\s+0 \(", out) is not None)
    return tap(good, f"{what}: publisher + 4 subscribers, every frame verified "
               f"({m.group(1) if m else 0} frames)", out)


def main():
    if os.geteuid() != 0:
        print("1..0 # SKIP needs root (network namespaces, net_tap)")
        return 0
    print("1..14", flush=True)
    relay = None
    other = None
    try:
        for ns in (NSR, NSC):
            sh(f"ip netns del {ns}")
            sh(f"ip netns add {ns}")
        sh(f"ip -n {NSR} link set lo up; ip -n {NSC} link set lo up")
        relay = subprocess.Popen(
            ["ip", "netns", "exec", NSR, RELAY, "-l", "0-1", "--no-pci", "--no-huge", "-m", "512",
             "--file-prefix", f"moqdp-exc-{PID}", "--log-level=lib.eal:error",
             f"--vdev=net_tap0,iface={DATA_IF}", "--", "--backend", "dpdk", "--listen",
             f"{IP}/24,{IP6}/64", "--port", str(PORT), "--tcp", "1", "--mgmt", "0.0.0.0:9464",
             "--stats-interval", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        exc_if = f"moqx{relay.pid}"
        up = False
        for _ in range(300):
            if relay.poll() is not None:
                break
            r = sh(f"ip -n {NSR} -4 addr show dev {exc_if}")
            if f"inet {IP}/24" in r.stdout:
                up = True
                break
            time.sleep(0.1)
        if not up:
            out = ""
            if relay.poll() is None:
                relay.kill()
            out = relay.communicate(timeout=10)[0]
            tap(False, "relay up with --backend dpdk --tcp 1, its exception port has the address",
                out)
            return 1
        r = sh(f"ip -n {NSR} link show dev {exc_if}")
        tap(re.search(r"UP", r.stdout) is not None,
            "relay up with --backend dpdk --tcp 1, its exception port has the address",
            r.stdout)
        sh(f"ip -n {NSR} link set {DATA_IF} netns {NSC}")
        sh(f"ip -n {NSC} link set {DATA_IF} up")
        for i in range(2, 12):
            sh(f"ip -n {NSC} addr add 10.79.0.{i}/24 dev {DATA_IF}")
        sh(f"ip netns exec {NSC} sysctl -qw net.ipv6.conf.{DATA_IF}.disable_ipv6=0")
        sh(f"ip -n {NSC} -6 addr add 2001:db8:79::2/64 dev {DATA_IF} nodad")
        code, body = 1, ""
        for _ in range(40):
            code, body = curl("/health")
            if code == 0:
                break
            time.sleep(0.5)
        tap(code == 0 and body == "ok\n", "GET /health over the data port", f"{code} {body!r}")
        code, fp = curl("/certificate.sha256")
        tap(code == 0 and re.fullmatch(r"[0-9a-f]{64}", fp) is not None,
            "GET /certificate.sha256: 64 lowercase hex", f"{code} {fp!r}")
        code, fp2 = curl("/certificate.sha256", tls=True)
        tap(code == 0 and fp2 == fp, "the same over TLS on the same port", f"{code} {fp2!r}")
        # another TCP listener on the relay's host, on every address
        other = subprocess.Popen(["ip", "netns", "exec", NSR, "python3", "-m", "http.server",
                                  str(OTHER_PORT), "--bind", "0.0.0.0"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        local = 1
        for _ in range(50):
            local = sh(f"ip netns exec {NSR} curl -s --max-time 2 -o /dev/null "
                       f"http://{IP}:{OTHER_PORT}/").returncode
            if local == 0:
                break
            time.sleep(0.1)
        code, body = curl("/", port=OTHER_PORT, max_time=3)
        tap(local == 0 and code != 0,
            f"another listener on the relay host (0.0.0.0:{OTHER_PORT}) answers in its "
            "namespace and not from the data network",
            f"in R: curl {local}; from C: curl {code} {body[:200]!r}")
        # the management listener gives a request 2 s to arrive (mgmt.c);
        # on a loaded machine, ask again
        for _ in range(10):
            code, body = curl("/health", port=9464)
            if code == 0:
                break
            time.sleep(0.3)
        tap(code == 0 and body == "ok\n",
            "--mgmt on 0.0.0.0: the relay's management port is its own, forwarded too",
            f"{code} {body!r}")
        code6, body6 = 1, ""
        for _ in range(20):
            r = sh(f"ip netns exec {NSC} curl -sg --max-time 5 http://[{IP6}]:{PORT}/health",
                   timeout=20)
            code6, body6 = r.returncode, r.stdout
            if code6 == 0:
                break
            time.sleep(0.5)
        tap(code6 == 0 and body6 == "ok\n", "IPv6: GET /health over the data port",
            f"{code6} {body6!r}\n" + sh(f"ip -n {NSR} -6 addr; ip -n {NSR} -6 neigh").stdout)
        r = sh(f"ip netns exec {NSC} curl -skg --max-time 5 "
               f"https://[{IP6}]:{PORT}/certificate.sha256", timeout=20)
        tap(r.returncode == 0 and r.stdout == fp, "IPv6: the same fingerprint over TLS",
            f"{r.returncode} {r.stdout!r}")
        code, body = curl("/health")
        met = sh(f"ip netns exec {NSR} curl -s --max-time 5 http://127.0.0.1:9464/metrics").stdout
        m = re.search(r"^moqdp_exception_refused_total (\S+)$", met, re.M)
        tap(code == 0 and body == "ok\n" and m is not None and float(m.group(1)) > 0,
            "the relay's own port still answers; the refused frames are counted",
            f"{code} {body!r} refused {m.group(1) if m else None}")
        ws = load(["--transport", "ws"], "exc/ws", "10.79.0.2")
        time.sleep(0.5)
        quic = load([], "exc/quic", "10.79.0.7")
        load_ok(ws, "WebSocket (qmux-01) through the exception port")
        load_ok(quic, "QUIC on the same port, beside it")
        met = sh(f"ip netns exec {NSR} curl -s --max-time 5 http://127.0.0.1:9464/metrics").stdout
        vals = {k: int(float(v)) for k, v in
                re.findall(r"^moqdp_(exception_\w+|tcp_connections_total|ws_sessions_total) "
                           r"(\S+)$", met, re.M)}
        tap(vals.get("exception_to_kernel_total", 0) > 100 and
            vals.get("exception_from_kernel_total", 0) > 100 and
            vals.get("exception_drops_total", 1) == 0 and
            vals.get("tcp_connections_total", 0) >= 8 and vals.get("ws_sessions_total", 0) >= 5,
            "/metrics: frames both ways through the exception port, none dropped; "
            "TCP connections and WebSocket sessions counted", repr(vals))
        if NODE:
            r = sh(f"ip netns exec {NSC} {NODE} {WS_REMOTE} http://{IP}:{PORT}/", timeout=90)
            tap(r.returncode == 0 and "not ok" not in r.stdout and r.stdout.count("ok ") >= 3,
                "@moq/net (node) over WebSocket through the exception port: the http:// "
                "path, every byte verified", r.stdout + r.stderr)
        else:
            tap(True, "# SKIP @moq/net: no node or tests/web/node_modules (scripts/setup)")
        relay.send_signal(signal.SIGTERM)
        try:
            out = relay.communicate(timeout=30)[0]
        except subprocess.TimeoutExpired:
            relay.kill()
            out = relay.communicate()[0]
        gone = exc_if not in sh(f"ip -n {NSR} link show").stdout
        tap(relay.returncode == 0 and gone,
            "SIGTERM: the relay exits 0 and removes its exception interface",
            f"rc {relay.returncode}\n{out}")
        relay = None
    finally:
        if other is not None:
            other.kill()
            other.wait()
        if relay is not None and relay.poll() is None:
            relay.kill()
            relay.wait()
        for ns in (NSC, NSR):
            sh(f"ip netns del {ns}")
        sh(f"rm -rf /var/run/dpdk/moqdp-exc-{PID}")
    return 1 if failed else 0


sys.exit(main())
