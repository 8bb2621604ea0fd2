#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_package.py: scripts/package's .deb installs and runs (TAP).

  test_package.py SOURCE_DIR BUILD_DIR

1. scripts/package builds a .deb (dpkg-buildpackage from debian/, on a copy
   of SOURCE_DIR) within its deadline;
2. `dpkg-deb -I`: Package moqdp, Architecture amd64, Depends from
   shlibs:Depends naming DPDK's librte-* and the other shared libraries,
   none of them wolfSSL or ngtcp2 (linked in statically: Built-Using names
   their Debian sources), the /etc files as conffiles;
3. `dpkg-deb -c`: the binaries in /usr/bin (every executable BUILD_DIR's
   meson marks install: true, so a new one must land there), the unit in
   /lib/systemd/system, /etc/default/moqdp-relay, /etc/moqdp/relay.conf, the
   docs and the Grafana dashboard in /usr/share/doc/moqdp;
4. `dpkg -x` into a scratch root: the installed binaries need no library
   that is not in a package the Depends name (ldd, dpkg -S), and none is
   wolfSSL or ngtcp2;
5. the installed unit names the installed binary and config paths, and
   `systemd-analyze verify` accepts it (its ExecStart binary pointed into the
   scratch root: the only rewrite);
6. the installed relay, with the installed /etc/moqdp/relay.conf as its
   config, runs on the kernel backend on loopback: GET /health on its TCP
   listener answers "ok", /metrics on --mgmt answers, and the installed
   moqdp-load (a publisher and subscribers over QUIC) gets frames delivered
   and verified through it.

Needs root (EAL); the relay's run directory /var/run/dpdk/<prefix> is removed.
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

results = []


def tap(ok, name, diag=""):
    results.append(ok)
    print(f"{'ok' if ok else 'not ok'} {len(results)} - {name}")
    for line in str(diag).splitlines()[-40:]:
        print(f"# {line}")
    sys.stdout.flush()
    return ok


def skip(name, why):
    results.append(True)
    print(f"ok {len(results)} - {name} # SKIP {why}")


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def http_get(port, path, timeout=2.0):
    """(status, body bytes) of GET path on 127.0.0.1:port."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def field(info, name):
    m = re.search(rf"^ {name}: (.*)$", info, re.M)
    return m.group(1) if m else ""


def installed_executables(build):
    out = subprocess.check_output(["meson", "introspect", "--targets", build], text=True)
    return sorted(os.path.basename(f) for t in json.loads(out)
                  if t.get("installed") and t["type"] == "executable" for f in t["filename"])


def main():
    src, build = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    scratch = tempfile.mkdtemp(prefix="moqdp-test-package-")
    prefix = f"moqdp-pkg-{os.getpid()}"
    relay_p = None
    try:
        # 1. build
        t0 = time.time()
        r = subprocess.run([os.path.join(src, "scripts", "package"), "--out", scratch],
                           cwd=src, capture_output=True, text=True, timeout=280)
        deb = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
        if not tap(r.returncode == 0 and deb.endswith(".deb") and os.path.isfile(deb),
                   f"scripts/package built {os.path.basename(deb)} in {time.time() - t0:.0f} s",
                   r.stderr):
            return
        # 2. control
        info = subprocess.check_output(["dpkg-deb", "-I", deb], text=True)
        depends = [d.strip().split()[0] for d in field(info, "Depends").split(",") if d.strip()]
        built_using = field(info, "Built-Using")
        tap(field(info, "Package") == "moqdp" and field(info, "Architecture") == "amd64",
            "dpkg-deb -I: Package moqdp, Architecture amd64", info)
        tap(any(d.startswith("librte-eal") for d in depends)
            and any(d.startswith("librte-ethdev") for d in depends)
            and any(d.startswith("libjansson") for d in depends)
            and any(d.startswith("libwslay") for d in depends)
            and any(d.startswith("librte-mempool-ring") for d in depends)
            and not any("wolfssl" in d or "ngtcp2" in d for d in depends),
            f"Depends: DPDK and the shared libraries ({len(depends)}), not wolfSSL or ngtcp2",
            ", ".join(depends))
        tap("wolfssl" in built_using and "ngtcp2" in built_using,
            f"Built-Using names the statically linked sources: {built_using}")
        subprocess.check_call(["dpkg-deb", "-e", deb, os.path.join(scratch, "ctl")])
        with open(os.path.join(scratch, "ctl", "conffiles")) as f:
            conffiles = f.read()
        tap(set(conffiles.split()) >= {"/etc/default/moqdp-relay", "/etc/moqdp/relay.conf"},
            "conffiles: /etc/default/moqdp-relay, /etc/moqdp/relay.conf", conffiles)

        # 3. files
        listing = subprocess.check_output(["dpkg-deb", "-c", deb], text=True)
        files = {re.sub(r"^\./", "/", l.split()[-1]) for l in listing.splitlines()}
        exes = installed_executables(build)
        want = {f"/usr/bin/{e}" for e in exes} | {
            "/lib/systemd/system/moqdp-relay.service", "/etc/default/moqdp-relay",
            "/etc/moqdp/relay.conf", "/usr/share/doc/moqdp/DEPLOY.md",
            "/usr/share/doc/moqdp/README.md", "/usr/share/doc/moqdp/copyright",
            "/usr/share/doc/moqdp/grafana/moqdp.json"}
        tap("moqdp-relay" in exes and "moqdp-load" in exes and want <= files,
            f"dpkg-deb -c: every install: true executable ({', '.join(exes)}), the unit, "
            "the config, the docs and the dashboard", "missing: " + ", ".join(sorted(want - files)))

        # 4. unpacked: libraries
        root = os.path.join(scratch, "root")
        subprocess.check_call(["dpkg", "-x", deb, root])
        problems = []
        # what the Depends pull in, recursively (libbsd0 -> libmd0, ...)
        deps = subprocess.run(["apt-cache", "depends", "--recurse", "--installed", "--no-recommends",
                               "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces",
                               "--no-enhances"] + depends, capture_output=True, text=True).stdout
        closure = set(depends) | {l.split()[-1].split(":")[0] for l in deps.splitlines()
                                  if l.strip() and not l.startswith(" ")} | {
            l.split()[-1].split(":")[0] for l in deps.splitlines() if "Depends:" in l}
        for e in exes:
            ldd = subprocess.run(["ldd", os.path.join(root, "usr/bin", e)], capture_output=True,
                                 text=True).stdout
            for m in re.finditer(r"^\s*(\S+) => (\S+)", ldd, re.M):
                lib, path = m.group(1), m.group(2)
                if "wolfssl" in lib or "ngtcp2" in lib:
                    problems.append(f"{e}: {lib} linked dynamically")
                    continue
                if path == "not":
                    problems.append(f"{e}: {lib} not found")
                    continue
                s = subprocess.run(["dpkg", "-S", os.path.realpath(path)], capture_output=True,
                                   text=True)
                if s.returncode != 0:
                    s = subprocess.run(["dpkg", "-S", path], capture_output=True, text=True)
                pkg = s.stdout.split(":")[0] if s.returncode == 0 else "?"
                if pkg not in closure:
                    problems.append(f"{e}: {lib} from {pkg}, not in Depends or theirs")
        tap(not problems, "dpkg -x: the installed binaries' libraries come from packages "
            "Depends names (or theirs); wolfSSL and ngtcp2 are inside", "\n".join(problems))

        # 5. the unit
        unit = open(os.path.join(root, "lib/systemd/system/moqdp-relay.service")).read()
        tap("ExecStart=/usr/bin/moqdp-relay $MOQDP_EAL --" in unit
            and "EnvironmentFile=-/etc/default/moqdp-relay" in unit
            and "MOQDP_CONFIG=/etc/moqdp/relay.conf" in unit
            and "file:///usr/share/doc/moqdp/DEPLOY.md" in unit and "/usr/local" not in unit,
            "the installed unit names /usr/bin/moqdp-relay, /etc/default/moqdp-relay, "
            "/etc/moqdp/relay.conf and /usr/share/doc/moqdp/DEPLOY.md", unit)
        if shutil.which("systemd-analyze"):
            udir = os.path.join(scratch, "unit")
            os.makedirs(udir)
            with open(os.path.join(udir, "moqdp-relay.service"), "w") as f:
                f.write(unit.replace("ExecStart=/usr/bin/moqdp-relay",
                                     f"ExecStart={root}/usr/bin/moqdp-relay"))
            v = subprocess.run(["systemd-analyze", "verify", os.path.join(udir, "moqdp-relay.service")],
                               capture_output=True, text=True)
            # on a container without systemd as PID 1 the unit's dependencies
            # (sysinit.target, ...) may be missing: only lines about the unit
            # itself count
            bad = [l for l in (v.stdout + v.stderr).splitlines()
                   if l.strip() and "sysinit.target not found" not in l]
            tap(not bad, "systemd-analyze verify accepts the installed unit", v.stdout + v.stderr)
        else:
            skip("systemd-analyze verify accepts the installed unit", "no systemd-analyze")

        # 6. run it
        relay = os.path.join(root, "usr/bin/moqdp-relay")
        env = dict(os.environ, MOQDP_CONFIG=os.path.join(root, "etc/moqdp/relay.conf"))
        for _ in range(5):
            port, mgmt = free_port(socket.SOCK_DGRAM), free_port()
            relay_p = subprocess.Popen(
                [relay, "-l", "0-1", "--no-pci", "--no-huge", "-m", "256", "--file-prefix", prefix,
                 "--log-level=lib.eal:error", "--", "--backend", "kernel", "--listen", "127.0.0.1",
                 "--port", str(port), "--tcp", "1", "--mgmt", f"127.0.0.1:{mgmt}",
                 "--state-dir", "", "--stats-interval", "0"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            health = None
            deadline = time.time() + 30
            while time.time() < deadline and relay_p.poll() is None:
                try:
                    health = http_get(port, "/health")
                    break
                except OSError:
                    time.sleep(0.1)
            if health is not None:
                break
            if relay_p.poll() is None:
                relay_p.kill()
            err = relay_p.communicate()[1]
            relay_p = None
            if "cannot" not in err:
                break
        if not tap(health == (200, b"ok\n"),
                   "the installed relay (kernel backend, the installed relay.conf) answers "
                   "GET /health on its TCP listener", err if relay_p is None else health):
            return
        status, body = http_get(mgmt, "/metrics")
        tap(status == 200 and b"moqdp_uptime_seconds" in body,
            "the installed relay's /metrics answers", body[:200])
        load = subprocess.run(
            [os.path.join(root, "usr/bin/moqdp-load"), "--kernel", "--relay", f"127.0.0.1:{port}",
             "--local", "127.0.0.1", "--publish", "--subscribers", "4", "--duration", "4",
             "--quiet"], capture_output=True, text=True, timeout=60)
        m = re.search(r"delivered\s+(\d+) frames verified", load.stderr)
        e = re.search(r"errors\s+(\d+)", load.stderr)
        tap(load.returncode == 0 and m and int(m.group(1)) > 0 and e and int(e.group(1)) == 0,
            f"the installed moqdp-load (a publisher, 4 subscribers over QUIC) through the "
            f"installed relay: {m.group(1) if m else '?'} frames verified", load.stderr)
    finally:
        if relay_p is not None:
            relay_p.terminate()
            try:
                relay_p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                relay_p.kill()
                relay_p.wait()
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"1..{len(results)}")
    return 0


if __name__ == "__main__":
    main()
    sys.exit(0 if results and all(results) else 1)
