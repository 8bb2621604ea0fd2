#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# test_auth_relay.py: the running relay's auth on the kernel backend
# (loopback): --auth-url against tests/auth_server.py with moqdp-load over
# raw QUIC, WebTransport and WebSocket (admitted; refused with the reason in
# the relay's log; the requests' transport, query and end as the server saw
# them); both token dialects (moqdp-token: publish/subscribe patterns, and
# put/get) with --auth-key over the three transports, and /announced and
# /fetch honouring the same grants; the mutually exclusive options and a
# public pattern without a wildcard refused at start-up in one line. TAP.
# usage: test_auth_relay.py MOQDP_RELAY MOQDP_LOAD MOQDP_TOKEN AUTH_SERVER
import base64, json, os, re, signal, subprocess, sys, tempfile, time, urllib.request, urllib.error

RELAY, LOAD, TOKEN, SERVER = sys.argv[1:5]
n = failed = 0
d = tempfile.mkdtemp(prefix='moqdp-test-authrelay-')
base = 20000 + os.getpid() % 20000


def ok(cond, what):
    global n, failed
    n += 1
    print(('ok %d - %s' if cond else 'not ok %d - %s') % (n, what.replace('\n', ' | ')[:300]))
    if not cond:
        failed += 1


def relay(port, extra, name):
    err = open(os.path.join(d, name + '.err'), 'w')
    args = [RELAY, '--file-prefix=moqdp-authrelay-%d-%s' % (os.getpid(), name), '--no-huge',
            '-m', '512', '--no-pci', '-l', '0-1', '--', '--backend', 'kernel', '--listen',
            '127.0.0.1', '--port', str(port), '--mgmt', '127.0.0.1:%d' % (port + 1),
            '--stats-interval', '0', '--tcp', '1'] + extra
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err), err.name


def wait_health(port, proc, t=20):
    end = time.time() + t
    while time.time() < end and proc.poll() is None:
        try:
            urllib.request.urlopen('http://127.0.0.1:%d/health' % (port + 1), timeout=1).read()
            return True
        except Exception:
            time.sleep(0.1)
    return False


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def load(port, broadcast, jwt, transport='quic', subs=3):
    args = [LOAD, '--kernel', '--relay', '127.0.0.1:%d' % port, '--local', '127.0.0.2',
            '--publish', '--subscribers', str(subs), '--duration', '1', '--broadcast', broadcast,
            '--transport', transport, '--quiet']
    if jwt:
        args += ['--jwt', jwt]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    out = r.stdout + r.stderr
    m = re.search(r'subscribers (\d+) of (\d+) ready', out)
    dl = re.search(r'delivered\s+(\d+) frames', out)
    return (int(m.group(1)) if m else -1, int(dl.group(1)) if dl else -1, out)


def http(port, path):
    try:
        with urllib.request.urlopen('http://127.0.0.1:%d%s' % (port, path), timeout=5) as r:
            return r.status, r.read().decode(errors='replace')
    except urllib.error.HTTPError as e:
        return e.code, ''


def fake(mode, tag=''):
    # an unsigned stand-in token auth_server.py reads its mode from (the
    # relay forwards the query without reading it)
    b = lambda o: base64.urlsafe_b64encode(json.dumps(o).encode()).rstrip(b'=').decode()
    return '%s.%s.c2ln' % (b({'alg': 'none', 'tag': tag}), b({'mode': mode}))


def tok(*args):
    r = subprocess.run([TOKEN, 'sign', '--key', os.path.join(d, 'key.jwk')] + list(args),
                       capture_output=True, text=True)
    return r.stdout.strip()


def http_h(port, path, headers=None, timeout=15):
    req = urllib.request.Request('http://127.0.0.1:%d%s' % (port, path), headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read().decode(errors='replace')
    except urllib.error.HTTPError as e:
        return e.code, ''


def http_reqs(alog):
    return [r for r in (json.loads(l) for l in open(alog) if l.strip())
            if r.get('transport') == 'http']


def http_auth_url(port, alog):
    """/announced, /fetch and /status/metrics admitted by the auth server
    (transport http): admit, refuse, filtering by the grant, the cache, the
    request's fields, a slow answer parked without holding the others."""
    pubs = [subprocess.Popen([LOAD, '--kernel', '--relay', '127.0.0.1:%d' % port, '--local',
                              '127.0.0.3', '--publish', '--subscribers', '0', '--duration', '8',
                              '--broadcast', b, '--jwt', fake('admit', b), '--quiet'],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for b in ('demo/alice/cam', 'demo/bob/cam')]
    try:
        open(alog, 'w').close()
        body, st = '', 0
        end = time.time() + 6
        while time.time() < end and not ('alice/cam' in body and 'bob/cam' in body):
            st, body = http(port, '/announced/demo?mode=admit')
            time.sleep(0.2)
        ok(st == 200 and 'alice/cam' in body and 'bob/cam' in body,
           'http: /announced admitted by the auth server lists both: %d %r' % (st, body.strip()))
        reqs = http_reqs(alog)
        conn = [r for r in reqs if r['event'] == 'connect']
        c0 = conn[0] if conn else {}
        ok(len(conn) == 1, 'http: the same request again is answered from the cache '
           '(%d connects for the repeated /announced)' % len(conn))
        ok(c0.get('path') == '/demo' and c0.get('query') == 'mode=admit' and
           c0.get('role') == 'subscriber' and len(c0.get('id', '')) == 32,
           'http: connect with transport http, path /demo, the raw query: %s' % c0)
        ok(c0.get('remote', '').startswith('127.0.0.1:') and
           c0.get('local') == '127.0.0.1:%d' % port and
           c0.get('server_name') == '127.0.0.1:%d' % port,
           'http: remote, local and server_name (the Host): %s %s %s' %
           (c0.get('remote'), c0.get('local'), c0.get('server_name')))
        time.sleep(0.3)
        ends = [r for r in http_reqs(alog) if r['event'] == 'end']
        ok(len(ends) >= 1 and ends[0]['id'] == c0.get('id') and ends[0]['bytes']['sent'] > 0,
           'http: the request ends with its bytes: %s' % (ends[:1],))
        # the grant decides what /announced lists
        st, body = http(port, '/announced/demo?mode=httpalice')
        ok(st == 200 and 'alice/cam' in body and 'bob' not in body,
           'http: a grant of alice/** lists alice/cam only: %d %r' % (st, body.strip()))
        # a token in Authorization: Bearer (sent as the request's token)
        st, body = http_h(port, '/announced/demo', {'Authorization': 'Bearer ' +
                                                     fake('httpalice', 'hdr')})
        tk = [r for r in http_reqs(alog) if r['event'] == 'connect' and r.get('token')]
        ok(st == 200 and 'alice/cam' in body and 'bob' not in body and tk and
           tk[0]['token']['kind'] == 0,
           'http: Authorization: Bearer reaches the server as token kind 0: %d %r' %
           (st, body.strip()))
        st, _ = http(port, '/announced/demo?mode=refuse')
        ok(st == 401, 'http: /announced refused by the server (403): 401, got %d' % st)
        st, _ = http(port, '/announced/demo?mode=status500')
        ok(st == 502, 'http: the server answers 500: 502 (fail closed), got %d' % st)
        st, _ = http(port, '/announced/demo?mode=malformed')
        ok(st == 502, 'http: a malformed answer: 502, got %d' % st)
        # /fetch reads only what the grant covers
        # (a /fetch is admitted at its broadcast's path: the grant's
        # patterns are relative to demo/alice/cam)
        st, body = http(port, '/fetch/demo/alice/cam/video?mode=admit')
        ok(st == 200 and len(body) > 0, 'http: /fetch inside the grant: 200, %d bytes' % len(body))
        st, body = http(port, '/fetch/demo/alice/cam/video?mode=httpalice')
        ok(st == 401, 'http: /fetch outside the grant (alice/** under the broadcast): 401, '
           'got %d' % st)
        # /status/metrics: a grant of everything from the root only
        st, body = http(port, '/status/metrics?mode=admit')
        ok(st == 200 and 'moqdp_' in body, 'http: /status/metrics with ** from the root: 200')
        st, _ = http(port, '/status/metrics?mode=httpalice')
        ok(st == 401, 'http: /status/metrics with a narrower grant: 401, got %d' % st)
        st, _ = http(port, '/status/metrics')
        ok(st in (401, 502), 'http: /status/metrics, the server answers 404: %d' % st)
        # a grant's lifetime bounds the cache: expires in 2 s, asked again after
        n0 = len([r for r in http_reqs(alog) if r['event'] == 'connect'])
        http(port, '/announced/demo?mode=short')
        http(port, '/announced/demo?mode=short')
        n1 = len([r for r in http_reqs(alog) if r['event'] == 'connect'])
        time.sleep(2.2)
        http(port, '/announced/demo?mode=short')
        n2 = len([r for r in http_reqs(alog) if r['event'] == 'connect'])
        ok(n1 - n0 == 1 and n2 - n1 == 1, 'http: cached until the grant expires '
           '(connects %d then %d)' % (n1 - n0, n2 - n1))
        # a slow server: the request is parked, the others are served meanwhile
        import threading
        slow = {}
        th = threading.Thread(target=lambda: slow.update(
            r=http_h(port, '/announced/demo?mode=slow', timeout=30), t=time.time()))
        t0 = time.time()
        th.start()
        time.sleep(0.3)
        st, body = http(port, '/announced/demo?mode=admit&other=1')
        t1 = time.time()
        th.join(30)
        ok(st == 200 and t1 - t0 < 2.5 and slow.get('r', (0,))[0] == 200 and
           slow['t'] - t0 >= 2.5,
           'http: a slow answer (3 s) parks its request only: another answered in %.2f s, the '
           'slow one %s after %.2f s' % (t1 - t0, slow.get('r', (0,))[0],
                                        slow.get('t', t0) - t0))
    finally:
        for q in pubs:
            q.wait(30)


def start_fail(extra, name):
    p, errp = relay(base + 90, extra, name)
    try:
        rc = p.wait(20)
    except subprocess.TimeoutExpired:
        stop(p)
        rc = None
    return rc, open(errp).read()


try:
    # ---- start-up refusals: one line naming the options
    rc, err = start_fail(['--auth-url', 'http://127.0.0.1:1/', '--auth-key', '/x.jwk'], 'excl')
    ok(rc == 2 and 'moqdp-relay: --auth-url: cannot be combined with --auth-key' in err,
       '--auth-url with --auth-key refused at start-up: ' + err.strip())
    rc, err = start_fail(['--auth-public', 'anon'], 'nowild')
    ok(rc == 1 and "--auth-public: 'anon' has no wildcard" in err and 'anon/**' in err,
       'a public pattern without a wildcard refused: ' + err.strip())
    rc, err = start_fail(['--auth-url', 'http://192.0.2.1/'], 'notloop')
    ok(rc == 1 and 'http:// is for a loopback host only' in err,
       'http:// to a host that is not loopback refused: ' + err.strip())

    # ---- --auth-url
    alog = os.path.join(d, 'auth.log')
    aport = base + 50
    srv = subprocess.Popen(['python3', SERVER, '--log', alog, '--port', str(aport),
                            '--lifetime', '300'], stdout=subprocess.PIPE, text=True)
    ok(srv.stdout.readline().startswith('listening'), 'auth_server.py listening')
    port = base
    p, errp = relay(port, ['--auth-url', 'http://127.0.0.1:%d/' % aport], 'url')
    ok(wait_health(port, p), 'relay with --auth-url up')
    for tr in ('quic', 'wt', 'ws'):
        open(alog, 'w').close()
        jwt = fake('admit', tr)
        ready, delivered, out = load(port, 'live/%s' % tr, jwt, tr)
        ok(ready == 3 and delivered > 20, '%s: admitted by the auth server: %d ready, %d '
           'frames' % (tr, ready, delivered))
        time.sleep(0.5)
        reqs = [json.loads(l) for l in open(alog) if l.strip()]
        conn = [r for r in reqs if r.get('event') == 'connect']
        ends = [r for r in reqs if r.get('event') == 'end']
        want = 'websocket' if tr == 'ws' else 'quic'
        ok(len(conn) == 4 and all(r['transport'] == want and
                                  r.get('query') == 'jwt=' + jwt and
                                  len(r['id']) == 32 for r in conn),
           '%s: 4 connects, transport %s, the raw query: %s' % (tr, want, conn[:1]))
        ok(sorted(r.get('role') for r in conn) == ['publisher'] + ['subscriber'] * 3,
           '%s: the roles the clients declared' % tr)
        # request.rs: remote, local and server_name on every transport
        ok(all(r.get('remote', '').startswith('127.0.0.') and
               r.get('local') == '127.0.0.1:%d' % port for r in conn),
           '%s: remote and local: %s' % (tr, [(r.get('remote'), r.get('local')) for r in conn]))
        ok(all(r.get('server_name') for r in conn),
           '%s: server_name: %s' % (tr, [r.get('server_name') for r in conn]))
        ok(len(ends) == 4 and all(r['duration'] > 0.3 for r in ends) and
           (tr == 'ws' or all(r['bytes']['sent'] > 0 for r in ends)),
           '%s: 4 ends with duration and bytes: %s' % (tr, ends[:1]))
    for tr in ('quic', 'ws'):
        ready, delivered, out = load(port, 'live/x', fake('refuse'), tr)
        ok(ready == 0 and delivered == 0, '%s: refused by the auth server (403): none ready' % tr)
    ready, delivered, out = load(port, 'live/x', fake('malformed'), 'quic')
    ok(ready == 0, 'a malformed answer: refused')
    # grant.rs `tier` and `mounts`: this relay has neither per-tier stats nor
    # mounts, so a grant asking for one is refused, never half applied
    for mode in ('tier', 'mounts'):
        ready, delivered, out = load(port, 'live/x', fake(mode), 'quic', subs=1)
        ok(ready == 0, 'a grant with %s: refused' % mode)
    st, _ = http(port, '/announced/demo?mode=tier')
    ok(st == 502, 'http: a grant with tier: 502 (refused, fail closed), got %d' % st)
    want = ('refused (HTTP 403)', 'the answer is not a JSON object',
            'tier is not supported by this relay', 'mounts are not supported by this relay')
    end = time.time() + 5  # the auth threads write them: wait for the last
    while True:
        err = open(errp).read()
        missing = [w for w in want if w not in err]
        if not missing or time.time() > end:
            break
        time.sleep(0.2)
    ok(not missing, 'the reasons in the relay log (missing %s): ' % missing +
       ' / '.join(sorted(set(l.split(': ', 3)[-1] for l in err.splitlines()
                              if 'auth-url' in l)))[:300])
    end = time.time() + 5  # /metrics is a snapshot: wait for the last answers in it
    while True:
        _, met = http(port + 1, '/metrics')
        ans = dict(re.findall(r'moqdp_auth_url_answers_total\{result="(\w+)"\} (\d+)', met))
        reqs = re.search(r'moqdp_auth_url_requests_total (\d+)', met)
        if int(ans.get('unavailable', 0)) >= 1 or time.time() > end:
            break
        time.sleep(0.2)
    ok(int(ans.get('admitted', 0)) >= 12 and int(ans.get('refused', 0)) >= 2 and
       int(ans.get('unavailable', 0)) >= 1 and reqs and int(reqs.group(1)) >= 24,
       '/metrics: --auth-url answers %s, requests %s' % (ans, reqs and reqs.group(1)))
    http_auth_url(port, alog)
    stop(p)
    # the server down: refused
    srv.terminate()
    srv.wait(5)
    p, errp = relay(port, ['--auth-url', 'http://127.0.0.1:%d/' % aport], 'down')
    ok(wait_health(port, p), 'relay with --auth-url (server down) up')
    st, _ = http(port, '/announced/demo?mode=admit')
    ok(st == 502, 'http: the server down: /announced 502 (fail closed), got %d' % st)
    st, _ = http(port, '/fetch/demo/alice/cam/video?mode=admit')
    ok(st == 502, 'http: the server down: /fetch 502, got %d' % st)
    ready, delivered, out = load(port, 'live/x', fake('admit'), 'quic')
    err = open(errp).read()
    ok(ready == 0 and 'Connection refused' in err, 'server down: refused, ' +
       ' / '.join(l for l in err.splitlines() if 'auth-url' in l)[:160])
    stop(p)

    # ---- both token dialects through --auth-key
    subprocess.run([TOKEN, 'generate', '--algorithm', 'ES256', '--out', os.path.join(d, 'key.jwk'),
                    '--public', os.path.join(d, 'pub.jwk')], check=True)
    p, errp = relay(port, ['--auth-key', os.path.join(d, 'pub.jwk')], 'key')
    ok(wait_health(port, p), 'relay with --auth-key (ES256 from moqdp-token) up')
    exp = str(int(time.time()) + 600)
    new = tok('--root', 'demo', '--publish', 'alice/*', '--subscribe', '**', '--expires', exp)
    old = tok('--root', 'demo', '--put', 'alice', '--get', '', '--expires', exp)
    bob = tok('--root', 'demo', '--publish', 'bob/**', '--subscribe', 'bob/**', '--expires', exp)
    for dialect, t in (('publish/subscribe', new), ('put/get', old)):
        for tr in ('quic', 'wt', 'ws'):
            ready, delivered, out = load(port, 'demo/alice/%s' % tr, t, tr)
            ok(ready == 3 and delivered > 20, '%s token over %s: %d ready, %d frames' %
               (dialect, tr, ready, delivered))
    # the pattern alice/* is one segment: alice/x/y is outside it
    ready, delivered, out = load(port, 'demo/alice/x/y', new, 'quic')
    ok(delivered == 0, 'publish alice/* does not reach demo/alice/x/y: %d frames' % delivered)
    ready, delivered, out = load(port, 'demo/alice/cam', None, 'quic')
    ok(ready == 0, 'no token: refused')
    # /announced and /fetch honour the same grants (a live publisher)
    pub = subprocess.Popen([LOAD, '--kernel', '--relay', '127.0.0.1:%d' % port, '--local',
                            '127.0.0.3', '--publish', '--subscribers', '0', '--duration', '6',
                            '--broadcast', 'demo/alice/cam', '--jwt', new, '--quiet'],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    body = ''
    end = time.time() + 5
    while time.time() < end and 'alice/cam' not in body:
        st, body = http(port, '/announced/demo?jwt=' + new)
        time.sleep(0.2)
    ok(st == 200 and 'alice/cam' in body, '/announced with the pattern token lists alice/cam: ' +
       body.strip())
    st, body = http(port, '/announced/demo?jwt=' + bob)
    ok(st in (200, 401) and 'alice' not in body, '/announced with a bob/** token hides alice '
       '(%d %r)' % (st, body.strip()))
    st, body = http(port, '/announced/demo')
    ok(st == 401, '/announced without a token: 401, got %d' % st)
    st, body = http(port, '/fetch/demo/alice/cam/video?jwt=' + new)
    ok(st == 200 and len(body) > 0, '/fetch with the token: 200, %d bytes' % len(body))
    st, body = http(port, '/fetch/demo/alice/cam/video?jwt=' + bob)
    ok(st in (401, 403, 404) and st != 200, '/fetch outside the grant: refused (%d)' % st)
    pub.wait(30)
    stop(p)
finally:
    subprocess.run(['rm', '-rf', d])
print('1..%d' % n)
sys.exit(1 if failed else 0)
