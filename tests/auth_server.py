#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# auth_server.py: an auth server of the tests' own for --auth-url
# (moq-relay's contract, doc/bin/relay/auth.md, The contract): it answers
# each JSON POST (connect / revalidate / end) by the first segment of the
# request's `path`, and appends every request body as one line to --log.
#
#   admit*      {"publish": ["**"], "subscribe": ["**"]}
#   refuse*     403
#   slow*       sleeps --slow seconds, then admits
#   malformed*  200 with a body that is not JSON
#   useless*    {} (a grant that names nothing)
#   expired*    a grant whose expires has passed
#   unbounded*  revalidate without expires
#   status500*  500
#   narrow*     connect: subscribe a/** and b/**, publish **, revalidate 1 s;
#               revalidate: subscribe b/** only (publish **)
#   widenpub*   connect: publish a/**; revalidate: a/** and b/** (subscribe **)
#   widen*      connect: subscribe b/**; revalidate: a/** and b/**
#   pattern*    connect: subscribe ["live/*"], publish ["live/*"]
#   peer*       admit with "peer": true and root "pid/room"
#   reroot*     admit (revalidate 1 s); revalidate: the same with root "elsewhere"
#   httpalice*  subscribe ["alice/**"] only (the HTTP endpoints' filtering)
#   short*      admit, expires in 2 s (a cached HTTP answer lives that long)
#   tier*       admit with "tier": "gold"
#   mounts*     admit with "mounts": {"ext": "elsewhere"}
# A `mode=NAME` query parameter, or a `jwt` (in the query, or the request's
# `token`: an HTTP Authorization: Bearer) whose payload is {"mode": NAME},
# overrides the path. Anything else: 404.
# An end is answered 204.
#
# usage: auth_server.py --log FILE (--port N | --unix PATH) [--cert C --key K]
#                       [--slow S] [--host H]
# prints "listening PORT" (or the socket path) once it accepts.
import argparse, base64, http.server, json, os, socket, socketserver, ssl, sys, threading, time

ap = argparse.ArgumentParser()
ap.add_argument('--log', required=True)
ap.add_argument('--port', type=int)
ap.add_argument('--unix')
ap.add_argument('--host', default='127.0.0.1')
ap.add_argument('--cert')
ap.add_argument('--key')
ap.add_argument('--slow', type=float, default=3.0)
ap.add_argument('--lifetime', type=float, default=120.0)
args = ap.parse_args()
lock = threading.Lock()


def grant_for(req):
    seg = req.get('path', '').strip('/').split('/')[0]
    # a client that cannot choose its path (moqdp-load dials "") picks the
    # behaviour with a `mode=` query parameter
    for kv in (req.get('query') or '').split('&'):
        if kv.startswith('mode='):
            seg = kv[5:]
        # or an unsigned stand-in token whose payload is {"mode": NAME}
        # (moqdp-load sends only what looks like a JWT)
        if kv.startswith('jwt=') and kv.count('.') == 2:
            try:
                part = kv[4:].split('.')[1]
                seg = json.loads(base64.urlsafe_b64decode(part + '=' * (-len(part) % 4)))['mode']
            except (ValueError, KeyError, TypeError):
                pass
    tk = (req.get('token') or {}).get('value')
    if tk:
        try:
            t = base64.urlsafe_b64decode(tk + '=' * (-len(tk) % 4)).decode()
            part = t.split('.')[1]
            seg = json.loads(base64.urlsafe_b64decode(part + '=' * (-len(part) % 4)))['mode']
        except (ValueError, KeyError, TypeError, IndexError):
            pass
    ev = req.get('event')
    now = int(time.time())
    if ev == 'end':
        return 204, None
    if seg.startswith('admit'):
        return 200, {'publish': ['**'], 'subscribe': ['**']}
    if seg.startswith('refuse'):
        return 403, None
    if seg.startswith('slow'):
        time.sleep(args.slow)
        return 200, {'publish': ['**'], 'subscribe': ['**']}
    if seg.startswith('malformed'):
        return 200, 'this is {not json'
    if seg.startswith('useless'):
        return 200, {}
    if seg.startswith('expired'):
        return 200, {'subscribe': ['**'], 'expires': now - 5}
    if seg.startswith('unbounded'):
        return 200, {'subscribe': ['**'], 'revalidate': 5}
    if seg.startswith('status500'):
        return 500, None
    if seg.startswith('narrow'):
        sub = ['a/**', 'b/**'] if ev == 'connect' else ['b/**']
        return 200, {'publish': ['**'], 'subscribe': sub, 'expires': now + 60, 'revalidate': 1}
    if seg.startswith('widenpub'):
        pub = ['a/**'] if ev == 'connect' else ['a/**', 'b/**']
        return 200, {'publish': pub, 'subscribe': ['**'], 'expires': now + 60, 'revalidate': 1}
    if seg.startswith('widen'):
        sub = ['b/**'] if ev == 'connect' else ['a/**', 'b/**']
        return 200, {'publish': ['**'], 'subscribe': sub, 'expires': now + 60, 'revalidate': 1}
    if seg.startswith('pattern'):
        return 200, {'publish': ['live/*'], 'subscribe': ['live/*']}
    if seg.startswith('reroot'):
        g = {'publish': ['**'], 'subscribe': ['**'], 'expires': now + 60, 'revalidate': 1}
        if ev == 'revalidate':
            g['root'] = 'elsewhere'
        return 200, g
    if seg.startswith('httpalice'):
        return 200, {'subscribe': ['alice/**']}
    if seg.startswith('short'):
        return 200, {'publish': ['**'], 'subscribe': ['**'], 'expires': now + 2}
    if seg.startswith('tier'):
        return 200, {'publish': ['**'], 'subscribe': ['**'], 'tier': 'gold'}
    if seg.startswith('mounts'):
        return 200, {'publish': ['**'], 'subscribe': ['**'], 'mounts': {'ext': 'elsewhere'}}
    if seg.startswith('peer'):
        return 200, {'publish': ['**'], 'subscribe': ['**'], 'root': 'pid/room', 'peer': True}
    return 404, None


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get('Content-Length', '0'))
        body = self.rfile.read(n)
        try:
            req = json.loads(body)
        except ValueError:
            req = {'unparsed': body.decode(errors='replace')}
        with lock:
            with open(args.log, 'a') as f:
                f.write(json.dumps(req) + '\n')
        status, out = grant_for(req)
        data = b'' if out is None else (out if isinstance(out, str) else json.dumps(out)).encode()
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class TCP(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class Unix(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def get_request(self):
        s, _ = self.socket.accept()
        return s, ('unix', 0)


if args.unix:
    if os.path.exists(args.unix):
        os.unlink(args.unix)
    srv = Unix(args.unix, H)
    where = args.unix
else:
    srv = TCP((args.host, args.port or 0), H)
    if args.cert:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(args.cert, args.key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    where = str(srv.server_address[1])
# bounded: the server ends by itself
threading.Timer(args.lifetime, lambda: os._exit(0)).start()
print('listening', where, flush=True)
srv.serve_forever()
