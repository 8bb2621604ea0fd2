#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""test_dashboard.py: docs/grafana/moqdp.json queries only what a relay exports (TAP).

  test_dashboard.py DASHBOARD RELAY

1. the dashboard is JSON Grafana imports: panels with a Prometheus target
   each, unique ids, a datasource and an instance variable;
2. a relay (kernel backend on loopback, --tcp 1, a --cluster-connect peer
   that is not there, so the per-link series exist) is scraped on its
   --mgmt /metrics, and every metric name each PromQL expression of the
   dashboard selects is a series it exports (a summary's _sum / _count
   too), with the labels its matchers and `by (...)` name, and each
   `label="value"` matcher matching some exported series;
3. the dashboard covers what an operator needs (egress, sessions,
   subscribers, busy share per worker, cache held vs billed, drops,
   latency, cluster links, auth refusals): a metric of each is queried;
4. the expression parser itself finds names (a made-up name in a made-up
   expression is reported missing: the check can fail).

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
    for line in str(diag).splitlines():
        print(f"# {line}")
    sys.stdout.flush()


# --- PromQL: the selectors of an expression --------------------------------

FUNCS_AND_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset",
    "and", "or", "unless", "inf", "nan",
}
TOKEN = re.compile(
    r'"(?:[^"\\]|\\.)*"|\[[^\]]*\]|\{[^}]*\}|[A-Za-z_:][A-Za-z0-9_:]*|\d+(?:\.\d+)?|\s+|.')


def selectors(expr):
    """[(metric name, {label: (op, value)}, by-labels)] of a PromQL expression.

    A name followed by '(' is a function or an aggregation; a name after
    by / without / on / ignoring is in a label list; a {...} after a name
    holds its matchers. The labels of a `by (...)` clause are returned with
    every selector of the aggregation's argument (checked as labels the
    metric carries)."""
    toks = [t for t in TOKEN.findall(expr) if not t.isspace()]
    out = []
    i = 0
    pending_by = []
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if t in ("by", "without", "on", "ignoring", "group_left", "group_right") and nxt == "(":
            j = i + 2
            labels = []
            while j < len(toks) and toks[j] != ")":
                if toks[j] != ",":
                    labels.append(toks[j])
                j += 1
            if t == "by":
                pending_by = labels
            i = j + 1
            continue
        if re.fullmatch(r"[A-Za-z_:][A-Za-z0-9_:]*", t) and t not in FUNCS_AND_KEYWORDS:
            if nxt == "(" or nxt in ("by", "without"):  # a function, an aggregation
                i += 1
                continue
            matchers = {}
            if nxt.startswith("{"):
                for m in re.finditer(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"',
                                     nxt):
                    matchers[m.group(1)] = (m.group(2), m.group(3))
                i += 1
            out.append((t, matchers, list(pending_by)))
        i += 1
    return out


def parse_metrics(text):
    """{name: [labels dict, ...]} of Prometheus text exposition."""
    series = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{([^}]*)\})?\s+\S+$", line)
        if not m:
            continue
        labels = dict(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        series.setdefault(m.group(1), []).append(labels)
    return series


# Labels Prometheus adds at scrape time (not in the exposition).
TARGET_LABELS = {"instance", "job"}


def check_expr(expr, series):
    """Problems of one expression against the exported series (a list)."""
    problems = []
    sels = selectors(expr)
    if not sels and "time()" not in expr:
        problems.append(f"no metric selected: {expr}")
    for name, matchers, by in sels:
        if name not in series:
            problems.append(f"{name}: not exported")
            continue
        have = series[name]
        for lab, (op, val) in matchers.items():
            if lab in TARGET_LABELS:
                continue
            if not any(lab in s for s in have):
                problems.append(f"{name}: no label {lab}")
            elif op == "=" and not any(s.get(lab) == val for s in have):
                problems.append(f'{name}: no series with {lab}="{val}"')
            elif op == "=~" and not any(re.fullmatch(val, s.get(lab, "")) for s in have):
                problems.append(f'{name}: no series with {lab}=~"{val}"')
        for lab in by:
            if lab not in TARGET_LABELS and not any(lab in s for s in have):
                problems.append(f"{name}: by ({lab}): no such label")
    return problems


# --- the relay ---------------------------------------------------------------

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


def start_relay(relay, prefix):
    """(process, mgmt port, tcp port) of a relay whose /metrics answers."""
    for _ in range(5):
        port, mgmt, dead = free_port(socket.SOCK_DGRAM), free_port(), free_port(socket.SOCK_DGRAM)
        p = subprocess.Popen(
            [relay, "-l", "0-1", "--no-pci", "--no-huge", "-m", "256", "--file-prefix", prefix,
             "--log-level=lib.eal:error", "--", "--backend", "kernel", "--listen", "127.0.0.1",
             "--port", str(port), "--tcp", "1", "--mgmt", f"127.0.0.1:{mgmt}", "--state-dir", "",
             "--stats-interval", "0", "--cluster-connect", f"moql://127.0.0.1:{dead}",
             "--cluster-ca", "insecure"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 30
        while time.time() < deadline and p.poll() is None:
            try:
                if http_get(mgmt, "/health")[0] == 200:
                    return p, mgmt, port
            except OSError:
                pass
            time.sleep(0.1)
        err = ""
        if p.poll() is None:
            p.kill()
        err = p.communicate()[1]
        if "cannot" not in err:
            raise RuntimeError(f"relay did not start: {err}")
    raise RuntimeError("no free port")


def main():
    dash_path, relay = sys.argv[1], sys.argv[2]
    prefix = f"moqdp-dash-{os.getpid()}"

    # 1. the dashboard's shape
    with open(dash_path) as f:
        dash = json.load(f)
    panels = [p for p in dash.get("panels", []) if p.get("type") != "row"]
    exprs = [(p["title"], t["expr"]) for p in panels for t in p.get("targets", [])]
    ids = [p["id"] for p in dash["panels"]]
    var_names = [v["name"] for v in dash.get("templating", {}).get("list", [])]
    tap(len(panels) >= 20 and all(p.get("targets") for p in panels) and len(ids) == len(set(ids))
        and all(p.get("datasource", {}).get("type") == "prometheus" for p in panels)
        and {"datasource", "instance"} <= set(var_names),
        f"the dashboard: {len(panels)} panels, {len(exprs)} queries, each panel a Prometheus target",
        f"variables {var_names}")

    # 4. the parser finds names (and a wrong one is reported)
    sample = {"moqdp_x_total": [{"reason": "a"}]}
    probs = check_expr('sum by (instance, reason) (rate(moqdp_x_total{reason="a"}[5m])) / '
                       'moqdp_not_there + rate(moqdp_x_total{reason="b"}[1m])', sample)
    tap(probs == ["moqdp_not_there: not exported", 'moqdp_x_total: no series with reason="b"'],
        "the check reports a metric not exported and a label value no series has", probs)

    # 2. against a running relay
    p, mgmt, port = start_relay(relay, prefix)
    try:
        # the per-link series appear once the cluster link is set up
        series = {}
        for _ in range(50):
            status, body = http_get(mgmt, "/metrics")
            series = parse_metrics(body.decode())
            if status == 200 and "moqdp_cluster_link_state" in series:
                break
            time.sleep(0.1)
        tap(status == 200 and len(series) > 100,
            f"the relay's /metrics: {len(series)} metric names")
        problems = []
        for title, e in exprs:
            problems += [f"{title}: {x}" for x in check_expr(e, series)]
        tap(not problems, f"every metric the dashboard's {len(exprs)} queries select is exported, "
            "with the labels and values they match", "\n".join(problems))
        # the per-worker busy share: one series per worker, a busy share in [0, 1]
        busy = series.get("moqdp_worker_busy_seconds_total", [])
        tap(len(busy) >= 1 and all("worker" in s for s in busy),
            f"moqdp_worker_busy_seconds_total has a series per worker ({len(busy)})")
    finally:
        p.terminate()
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        shutil.rmtree(f"/var/run/dpdk/{prefix}", ignore_errors=True)

    # 3. coverage
    queried = {name for _, e in exprs for name, _, _ in selectors(e)}
    need = {
        "egress": ["moqdp_tx_bytes_total"],
        "sessions": ["moqdp_sessions"],
        "subscribers": ["moqdp_subscribers"],
        "busy share per worker": ["moqdp_worker_busy_seconds_total", "moqdp_worker_idle_seconds_total"],
        "cache held vs billed": ["moqdp_cache_pool_held_bytes", "moqdp_cache_used_bytes"],
        "drops": ["moqdp_net_dropped_total", "moqdp_tx_dropped_total", "moqdp_quic_dropped_total"],
        "latency": ["moqdp_relay_latency_seconds", "moqdp_relay_latency_seconds_count"],
        "cluster links": ["moqdp_cluster_link_state", "moqdp_cluster_link_rtt_seconds"],
        "auth refusals": ["moqdp_auth_refused_total"],
    }
    missing = [f"{k}: {m}" for k, ms in need.items() for m in ms if m not in queried]
    tap(not missing, "the dashboard covers " + ", ".join(need), "\n".join(missing))

    print(f"1..{len(results)}")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
