#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_systemd_unit.py: dpdk_app/moqdp-relay.service starts the relay (TAP).

  test_systemd_unit.py UNIT RELAY

1. `systemd-analyze verify` accepts a copy of UNIT in which only ExecStart's
   binary (/usr/local/bin/moqdp-relay -> RELAY, the build's) and the
   EnvironmentFile's path (/etc/default/moqdp-relay -> a file of this test)
   are rewritten (skipped when systemd-analyze is not installed);
2. the unit's own Environment= lines and ExecStart expand, the way systemd
   does (systemd.service(5), "Command lines": `$VAR` as a word of its own is
   split at whitespace into zero or more arguments), to
   `moqdp-relay -l 0-2 --socket-mem=2048 --file-prefix=moqdp --`;
3. that command line, with the environment systemd gives the service (the
   unit's Environment=, then the EnvironmentFile, which here sets MOQDP_EAL to
   EAL arguments that work on any machine - --no-huge, net_ring, a unique
   --file-prefix - and MOQDP_CONFIG to a small valid config file) runs the
   relay: it reports it is up, and on SIGTERM exits 0; no "unknown option";
   ExecStartPre= runs first and passes;
4. the same, stopped as `systemctl stop` does: the unit's KillSignal=, and the
   relay exits 0 within the unit's TimeoutStopSec=;
5. with MOQDP_BOGUS=1 added to the EnvironmentFile the relay exits 2 with one
   line naming it, and the unit does not restart on exit 2
   (RestartPreventExitStatus=2).

Needs root (EAL); the relay's run directory /var/run/dpdk/<prefix> is removed.
"""
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

UNIT_BIN = "/usr/local/bin/moqdp-relay"
UNIT_ENVFILE = "/etc/default/moqdp-relay"

results = []


def tap(ok, name, diag=""):
    results.append(ok)
    n = len(results)
    print(f"{'ok' if ok else 'not ok'} {n} - {name}")
    for line in diag.splitlines():
        print(f"# {line}")
    sys.stdout.flush()


def skip(name, why):
    results.append(True)
    print(f"ok {len(results)} - {name} # SKIP {why}")


def unit_settings(text):
    """[Service] settings of a unit file: a list of (key, value), in order."""
    out, section = [], None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]" and "=" in line:
            k, v = line.split("=", 1)
            out.append((k.strip(), v.strip()))
    return out


def parse_assignments(value):
    """Environment=: space-separated, quoted (shell-like) VAR=VALUE words."""
    env = {}
    for word in shlex.split(value):
        if "=" in word:
            k, v = word.split("=", 1)
            env[k] = v
    return env


def parse_envfile(path):
    """EnvironmentFile=: VAR=VALUE lines, '#' comments, quotes removed."""
    env = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#;" or "=" not in line:
                continue
            k, v = line.split("=", 1)
            words = shlex.split(v, comments=True)
            env[k.strip()] = " ".join(words) if len(words) != 1 else words[0]
    return env


def service_env(settings, envfile_override=None):
    """The environment systemd gives the service: Environment= in order, then
    the EnvironmentFile= (a leading '-': optional)."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
    for k, v in settings:
        if k == "Environment":
            env.update(parse_assignments(v))
    for k, v in settings:
        if k == "EnvironmentFile":
            path = envfile_override or v.lstrip("-")
            if os.path.exists(path):
                env.update(parse_envfile(path))
            elif not v.startswith("-"):
                raise FileNotFoundError(path)
    return env


def expand_exec(line, env):
    """ExecStart=: words (shell-like quoting); `$VAR` alone is split at
    whitespace, `${VAR}` inside a word is replaced as one string, `$$` is a
    literal `$`."""
    argv = []
    for word in shlex.split(line):
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if m:
            argv += env.get(m.group(1), "").split()
            continue
        argv.append(re.sub(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}",
                           lambda x: "$" if x.group(0) == "$$" else env.get(x.group(1), ""),
                           word))
    return argv


def get(settings, key):
    return next((v for k, v in settings if k == key), None)


def run_relay(argv, env, stop_sig, stop_timeout):
    """Start @argv, wait for its 'up' lines, send @stop_sig; returns (rc, output,
    up, seconds to stop)."""
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, bufsize=1)
    out, up, t_stop = [], False, None
    end = time.time() + 60
    try:
        while time.time() < end:
            line = p.stdout.readline()
            if not line:
                break
            out.append(line)
            if "moqdp-relay: certificate sha-256" in line:
                up = True
                break
        if up:
            time.sleep(0.5)
            t0 = time.time()
            p.send_signal(stop_sig)
            try:
                rest, _ = p.communicate(timeout=stop_timeout)
                out.append(rest)
                t_stop = time.time() - t0
            except subprocess.TimeoutExpired:
                p.kill()
                rest, _ = p.communicate()
                out.append(rest)
        else:
            if p.poll() is None:
                p.kill()
            rest, _ = p.communicate()
            out.append(rest)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return p.returncode, "".join(out), up, t_stop


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: test_systemd_unit.py UNIT RELAY")
    unit_path, relay = sys.argv[1], os.path.abspath(sys.argv[2])
    print("1..5")
    text = open(unit_path).read()
    settings = unit_settings(text)
    tmp = tempfile.mkdtemp(prefix="moqdp-unit.")
    prefix = f"moqdp-unit-{os.getpid()}"
    try:
        # the operator's files: EAL arguments for this machine, a relay.conf
        conf = os.path.join(tmp, "relay.conf")
        with open(conf, "w") as f:
            f.write("# a small valid relay.conf (docs/DEPLOY.md, 10)\n"
                    "listen = 10.99.0.1/24\n"
                    "cache-budget = 64MiB\n"
                    "mgmt = \"\"\n"
                    "stats-interval = 0\n")
        envfile = os.path.join(tmp, "moqdp-relay")
        with open(envfile, "w") as f:
            f.write("# /etc/default/moqdp-relay\n"
                    f"MOQDP_EAL=\"--no-huge -m 256 --no-pci -l 0-1 --file-prefix={prefix} "
                    "--vdev=net_ring0 --log-level=lib.eal:error\"\n"
                    f"MOQDP_CONFIG={conf}\n")

        # 1. systemd-analyze verify on the copy
        copy_dir = os.path.join(tmp, "unit")
        os.mkdir(copy_dir)
        copy = os.path.join(copy_dir, os.path.basename(unit_path))
        rewritten = "".join(
            l.replace(UNIT_BIN, relay) if l.startswith("ExecStart=") else
            l.replace(UNIT_ENVFILE, envfile) if l.startswith("EnvironmentFile=") else l
            for l in text.splitlines(keepends=True))
        changed = [(a, b) for a, b in zip(text.splitlines(), rewritten.splitlines()) if a != b]
        with open(copy, "w") as f:
            f.write(rewritten)
        if shutil.which("systemd-analyze") is None:
            skip("systemd-analyze verify", "systemd-analyze not installed")
        else:
            r = subprocess.run(["systemd-analyze", "verify", copy], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            ok = r.returncode == 0 and len(changed) == 2
            tap(ok, "systemd-analyze verify (ExecStart and EnvironmentFile paths rewritten)",
                f"rc={r.returncode} lines changed={len(changed)}\n{r.stdout}")

        # 2. the unit's own defaults expand to the documented command line
        exec_start = get(settings, "ExecStart")
        shipped = expand_exec(exec_start, service_env(settings, envfile_override="/nonexistent"))
        want = [UNIT_BIN, "-l", "0-2", "--socket-mem=2048", "--file-prefix=moqdp", "--"]
        tap(shipped == want, "ExecStart with the unit's Environment= expands to EAL args + '--'",
            f"got {shipped}\nwant {want}")

        # 3. the command line with this machine's EAL arguments runs the relay,
        # after ExecStartPre (its hugepage check passes with --no-huge)
        env = service_env(settings, envfile_override=envfile)
        argv = expand_exec(exec_start.replace(UNIT_BIN, relay), env)
        pre = [expand_exec(v, env) for k, v in settings if k == "ExecStartPre"]
        pre_r = [subprocess.run(a, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True) for a in pre]
        pre_ok = all(r.returncode == 0 for r in pre_r)
        rc, out, up, _ = run_relay(argv, env, signal.SIGTERM, 15)
        ok = pre_ok and up and rc == 0 and "unknown option" not in out
        tap(ok, "ExecStartPre passes and the unit's command line runs the relay; "
            "SIGTERM: exit 0",
            "".join(f"ExecStartPre {a}: rc={r.returncode} {r.stdout}\n"
                    for a, r in zip(pre, pre_r)) +
            f"argv {argv}\nMOQDP_* {sorted(k for k in env if k.startswith('MOQDP_'))}\n"
            f"up={up} rc={rc}\n{out[-3000:]}")

        # 4. stopped as systemctl stop does
        kill = get(settings, "KillSignal") or "SIGTERM"
        timeout = float((get(settings, "TimeoutStopSec") or "90").rstrip("s"))
        rc, out, up, t = run_relay(argv, env, getattr(signal, kill), timeout)
        ok = up and rc == 0 and t is not None and t < timeout
        tap(ok, f"KillSignal={kill}: exit 0 within TimeoutStopSec={timeout:g}",
            f"up={up} rc={rc} stopped after {t if t is None else round(t, 2)} s\n"
            f"{out[-3000:]}")

        # 5. a bad option: exit 2 with one line naming it, and no restart loop
        with open(envfile, "a") as f:
            f.write("MOQDP_BOGUS=1\n")
        env = service_env(settings, envfile_override=envfile)
        r = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
        prevent = (get(settings, "RestartPreventExitStatus") or "").split()
        ok = r.returncode == 2 and r.stdout == "moqdp-relay: MOQDP_BOGUS: unknown option\n" \
            and "2" in prevent
        tap(ok, "MOQDP_BOGUS: exit 2, one line; RestartPreventExitStatus has 2",
            f"rc={r.returncode} RestartPreventExitStatus={prevent}\n{r.stdout[-2000:]}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
