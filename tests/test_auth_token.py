#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# test_auth_token.py: moqdp-token (auth/token.c) side by side with independent
# minting: python's hmac for HS256 and the openssl CLI for ES256 and EdDSA,
# both ways: what moqdp-token signs the independent side verifies, and what
# the independent side signs `moqdp-token verify` (the relay's own verifier)
# accepts; a tampered, expired or not-yet-valid token is refused. TAP.
# usage: test_auth_token.py MOQDP_TOKEN
import base64, hashlib, hmac, json, os, re, subprocess, sys, tempfile, time

TOOL = sys.argv[1]
n = 0
failed = 0


def ok(cond, what):
    global n, failed
    n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, what))
    if not cond:
        failed += 1


def b64u(b):
    return base64.urlsafe_b64encode(b).rstrip(b'=').decode()


def unb64u(s):
    return base64.urlsafe_b64decode(s + '=' * (-len(s) % 4))


def run(*args, inp=None):
    return subprocess.run([TOOL] + list(args), input=inp, capture_output=True, text=True)


def openssl(*args, inp=None):
    r = subprocess.run(['openssl'] + list(args), input=inp, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError('openssl %s: %s' % (' '.join(args), r.stderr.decode()))
    return r.stdout


def der_len(n):
    return bytes([n]) if n < 128 else bytes([0x81, n])


def der_int(b):
    b = b.lstrip(b'\0') or b'\0'
    if b[0] & 0x80:
        b = b'\0' + b
    return b'\x02' + der_len(len(b)) + b


def rs_to_der(rs):
    body = der_int(rs[:32]) + der_int(rs[32:])
    return b'\x30' + der_len(len(body)) + body


def der_to_rs(der):
    i = 2 if der[1] < 128 else 3
    out = b''
    for _ in range(2):
        l = der[i + 1]
        v = der[i + 2:i + 2 + l].lstrip(b'\0')
        out += v.rjust(32, b'\0')
        i += 2 + l
    return out


def pem(kind, der):
    return ('-----BEGIN %s-----\n%s\n-----END %s-----\n' %
            (kind, base64.encodebytes(der).decode().strip(), kind)).encode()


# DER templates: SPKI of a P-256 / Ed25519 public key (RFC 5480, RFC 8410)
P256_SPKI = bytes.fromhex('3059301306072a8648ce3d020106082a8648ce3d030107034200')
ED_SPKI = bytes.fromhex('302a300506032b6570032100')


def hexblock(text, label):
    m = re.search(label + r':\s*\n((?:\s+[0-9a-f:]+\n)+)', text)
    return bytes.fromhex(re.sub(r'[\s:]', '', m.group(1)))


d = tempfile.mkdtemp(prefix='moqdp-test-token-')
P = lambda name: os.path.join(d, name)
now = int(time.time())
claims = {'root': 'rooms/123', 'publish': ['alice/**'], 'subscribe': ['**'], 'exp': now + 3600}
signing = lambda hdr, c: b64u(json.dumps(hdr).encode()) + '.' + b64u(json.dumps(c).encode())

# ---- HS256: moqdp-token generate/sign, python hmac recomputes and mints
r = run('generate', '--algorithm', 'HS256', '--out', P('hs.jwk'))
ok(r.returncode == 0, 'generate HS256')
jwk = json.load(open(P('hs.jwk')))
ok(jwk['kty'] == 'oct' and jwk['alg'] == 'HS256' and len(unb64u(jwk['k'])) == 32,
   'HS256 JWK: oct, 32-byte k')
ok(oct(os.stat(P('hs.jwk')).st_mode & 0o777) == '0o600', 'the secret is written 0600')
secret = unb64u(jwk['k'])
r = run('sign', '--key', P('hs.jwk'), '--root', 'rooms/123', '--publish', 'alice/**',
        '--subscribe', '**', '--get', 'old', '--expires', str(now + 3600))
tok = r.stdout.strip()
h, c, s = tok.split('.')
mac = hmac.new(secret, (h + '.' + c).encode(), hashlib.sha256).digest()
ok(r.returncode == 0 and b64u(mac) == s, 'moqdp-token sign HS256 == python hmac over the same input')
body = json.loads(unb64u(c))
ok(body['root'] == 'rooms/123' and body['publish'] == ['alice/**'] and
   body['subscribe'] == ['**'] and body['get'] == ['old'] and body['exp'] == now + 3600 and
   abs(body['iat'] - now) < 60, 'claims as given: root, publish, subscribe, get, exp, iat')
ok(json.loads(unb64u(h)) == {'typ': 'JWT', 'alg': 'HS256'}, 'header {typ, alg}')
hdr = {'typ': 'JWT', 'alg': 'HS256'}
m = signing(hdr, claims)
py = m + '.' + b64u(hmac.new(secret, m.encode(), hashlib.sha256).digest())
r = run('verify', '--key', P('hs.jwk'), inp=py)
ok(r.returncode == 0 and 'publish: rooms/123/alice/**' in r.stdout and
   'subscribe: rooms/123/**' in r.stdout, 'a python-minted HS256 token verifies: ' +
   r.stdout.strip().replace('\n', ' | ')[-90:])
r = run('verify', '--key', P('hs.jwk'), '--path', 'rooms/123/alice/cam', inp=py)
ok(r.returncode == 0 and 'publish: rooms/123/alice/cam/**' in r.stdout,
   'verify --path narrows the grant to the dialed path')
r = run('verify', '--key', P('hs.jwk'), '--path', 'other', inp=py)
ok(r.returncode == 1 and 'root' in r.stderr, 'an unrelated path is refused: ' + r.stderr.strip())
tampered = signing(hdr, dict(claims, subscribe=['**', 'x/**'])) + '.' + py.split('.')[2]
r = run('verify', '--key', P('hs.jwk'), inp=tampered)
ok(r.returncode == 1 and 'bad_signature' in r.stderr, 'tampered claims: bad signature')
for name, extra, why in (('expired', {'exp': now - 1}, 'expired'),
                         ('nbf in the future', {'nbf': now + 600}, 'not yet valid'),
                         ('iat in the future', {'iat': now + 600}, 'not yet valid'),
                         ('an unknown claim', {'aud': 'x'}, 'malformed')):
    m = signing(hdr, dict(claims, **extra))
    t = m + '.' + b64u(hmac.new(secret, m.encode(), hashlib.sha256).digest())
    r = run('verify', '--key', P('hs.jwk'), inp=t)
    ok(r.returncode == 1 and why in r.stderr, '%s: refused (%s)' % (name, r.stderr.strip()))
r = run('sign', '--key', P('hs.jwk'), '--root', 'x')
ok(r.returncode == 2 and 'grant nothing' in r.stderr, 'sign refuses a token granting nothing')
r = run('generate', '--algorithm', 'RS256')
ok(r.returncode == 2 and 'HS256, ES256 or EdDSA' in r.stderr, 'generate RS256: refused with the list')

# ---- ES256 and EdDSA
for alg in ('ES256', 'EdDSA'):
    # moqdp-token's key and signature, verified by openssl
    r = run('generate', '--algorithm', alg, '--out', P(alg + '.jwk'), '--public',
            P(alg + '.pub.jwk'), '--kid', 'k1')
    ok(r.returncode == 0, 'generate ' + alg)
    priv = json.load(open(P(alg + '.jwk')))
    pub = json.load(open(P(alg + '.pub.jwk')))
    ok('d' in priv and 'd' not in pub and pub['key_ops'] == ['verify'] and pub['kid'] == 'k1',
       alg + ': private JWK has d, the public one not (key_ops verify, kid)')
    x = unb64u(pub['x'])
    spki = P256_SPKI + b'\x04' + x + unb64u(pub['y']) if alg == 'ES256' else ED_SPKI + x
    open(P(alg + '.pub.pem'), 'wb').write(pem('PUBLIC KEY', spki))
    r = run('sign', '--key', P(alg + '.jwk'), '--root', 'demo', '--subscribe', '**')
    tok = r.stdout.strip()
    h, c, s = tok.split('.')
    ok(json.loads(unb64u(h)) == {'typ': 'JWT', 'alg': alg, 'kid': 'k1'},
       alg + ': header carries the kid')
    open(P('msg'), 'wb').write((h + '.' + c).encode())
    sig = unb64u(s)
    if alg == 'ES256':
        open(P('sig'), 'wb').write(rs_to_der(sig))
        v = subprocess.run(['openssl', 'dgst', '-sha256', '-verify', P(alg + '.pub.pem'),
                            '-signature', P('sig'), P('msg')], capture_output=True)
    else:
        open(P('sig'), 'wb').write(sig)
        v = subprocess.run(['openssl', 'pkeyutl', '-verify', '-pubin', '-inkey',
                            P(alg + '.pub.pem'), '-rawin', '-in', P('msg'), '-sigfile',
                            P('sig')], capture_output=True)
    ok(len(sig) == 64 and v.returncode == 0,
       alg + ': openssl verifies what moqdp-token signed (' + v.stdout.decode().strip() + ')')
    r = run('verify', '--key', P(alg + '.pub.jwk'), inp=tok)
    ok(r.returncode == 0 and 'subscribe: demo/**' in r.stdout,
       alg + ': moqdp-token verify with the public JWK')

    # openssl's key and signature, verified by moqdp-token
    if alg == 'ES256':
        openssl('ecparam', '-name', 'prime256v1', '-genkey', '-noout', '-out', P('o.pem'))
        text = openssl('ec', '-in', P('o.pem'), '-text', '-noout').decode()
        q = hexblock(text, 'pub')
        ojwk = {'kty': 'EC', 'alg': 'ES256', 'crv': 'P-256', 'x': b64u(q[1:33]),
                'y': b64u(q[33:65])}
    else:
        openssl('genpkey', '-algorithm', 'ed25519', '-out', P('o.pem'))
        text = openssl('pkey', '-in', P('o.pem'), '-text', '-noout').decode()
        ojwk = {'kty': 'OKP', 'alg': 'EdDSA', 'crv': 'Ed25519', 'x': b64u(hexblock(text, 'pub'))}
    json.dump(ojwk, open(P('o.jwk'), 'w'))
    m = signing({'typ': 'JWT', 'alg': alg}, claims)
    open(P('msg'), 'wb').write(m.encode())
    if alg == 'ES256':
        sig = der_to_rs(openssl('dgst', '-sha256', '-sign', P('o.pem'), P('msg')))
    else:
        sig = openssl('pkeyutl', '-sign', '-inkey', P('o.pem'), '-rawin', '-in', P('msg'))
    r = run('verify', '--key', P('o.jwk'), inp=m + '.' + b64u(sig))
    ok(r.returncode == 0 and 'publish: rooms/123/alice/**' in r.stdout,
       alg + ': an openssl-signed token verifies with moqdp-token')
    bad = bytearray(sig)
    bad[10] ^= 1
    r = run('verify', '--key', P('o.jwk'), inp=m + '.' + b64u(bytes(bad)))
    ok(r.returncode == 1 and 'bad_signature' in r.stderr, alg + ': a flipped signature bit: refused')
    r = run('sign', '--key', P(alg + '.pub.jwk'), '--get', 'x')
    ok(r.returncode == 2 and 'cannot sign' in r.stderr, alg + ': a public key cannot sign')

subprocess.run(['rm', '-rf', d])
print('1..%d' % n)
sys.exit(1 if failed else 0)
