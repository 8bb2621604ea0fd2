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
        ok(len(ends) == 4 and all(r['duration'] > 0.3 for r in ends) and
           (tr == 'ws' or all(r['bytes']['sent'] > 0 for r in ends)),
           '%s: 4 ends with duration and bytes: %s' % (tr, ends[:1]))
    for tr in ('quic', 'ws'):
        ready, delivered, out = load(port, 'live/x', fake('refuse'), tr)
        ok(ready == 0 and delivered == 0, '%s: refused by the auth server (403): none ready' % tr)
    ready, delivered, out = load(port, 'live/x', fake('malformed'), 'quic')
    ok(ready == 0, 'a malformed answer: refused')
    err = open(errp).read()
    ok('refused (HTTP 403)' in err and 'the answer is not a JSON object' in err,
       'the reasons in the relay log: ' +
       ' / '.join(l for l in err.splitlines() if 'auth-url' in l)[:200])
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
    # /announced and /fetch: an HTTP request has no admission here yet, so
    # they are refused (fail closed), never answered unchecked
    st, _ = http(port, '/announced/?jwt=' + fake('admit'))
    ok(st == 401, '/announced under --auth-url: 401 (fail closed), got %d' % st)
    stop(p)
    # the server down: refused
    srv.terminate()
    srv.wait(5)
    p, errp = relay(port, ['--auth-url', 'http://127.0.0.1:%d/' % aport], 'down')
    ok(wait_health(port, p), 'relay with --auth-url (server down) up')
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
