#!/usr/bin/python3
"""gen-command-rows.py - print server/commands.c table rows for commands, read off a running
redis-server 7.0 (COMMAND INFO and COMMAND DOCS), so that COMMAND shows what clients expect
(commands.c note 1). It speaks RESP2 itself (client libraries reshape COMMAND's replies):

    redis-server --port 7399 --save '' --daemonize yes
    tools/gen-command-rows.py --port 7399 hset hget ... > server/cmdtab_hash.inc

A row's handler is cmd_<name> (a '|' or '-' becomes '_'). Key specs are written in commands.c's
form (see key_specs in server_int.h): "FLAGS:index:lastkey:keystep[:notes]" for a range, and
"FLAGS:index:#keynumidx:firstkey:keystep[:notes]" for a key count argument. A begin_search by
keyword is not supported: the tool stops with an error naming the command.
"""
import argparse
import socket
import sys

FLAGS = {
    'write': 'CMD_WRITE', 'readonly': 'CMD_READONLY', 'denyoom': 'CMD_DENYOOM', 'admin': 'CMD_ADMIN',
    'pubsub': 'CMD_PUBSUB', 'noscript': 'CMD_NOSCRIPT', 'loading': 'CMD_LOADING', 'stale': 'CMD_STALE',
    'fast': 'CMD_FAST', 'no_auth': 'CMD_NOAUTH', 'may_replicate': 'CMD_MAY_REPLICATE',
    'sentinel': 'CMD_SENTINEL', 'no_async_loading': 'CMD_NO_ASYNC_LOADING', 'no_multi': 'CMD_NO_MULTI',
    'allow_busy': 'CMD_ALLOW_BUSY', 'movablekeys': 'CMD_MOVABLE_KEYS',
}


def s(x):
    return x.decode() if isinstance(x, bytes) else str(x)


def cstr(x):
    return '"' + s(x).replace('\\', '\\\\').replace('"', '\\"') + '"'


def pairs(lst):
    """A RESP2 flat list [k, v, k, v] (or a dict) as a dict with str keys."""
    if isinstance(lst, dict):
        return {s(k): v for k, v in lst.items()}
    return {s(lst[i]): lst[i + 1] for i in range(0, len(lst), 2)}


def key_spec(name, ks):
    ks = pairs(ks)
    flags = ' '.join(s(f) for f in ks['flags'])
    bs, fk = pairs(ks['begin_search']), pairs(ks['find_keys'])
    if s(bs['type']) != 'index':
        sys.exit(f'{name}: begin_search {s(bs["type"])} is not supported')
    index = pairs(bs['spec'])['index']
    spec = pairs(fk['spec'])
    if s(fk['type']) == 'range':
        if spec['limit'] != 0:
            sys.exit(f'{name}: a range limit is not supported')
        out = f'{flags}:{index}:{spec["lastkey"]}:{spec["keystep"]}'
    elif s(fk['type']) == 'keynum':
        out = f'{flags}:{index}:#{spec["keynumidx"]}:{spec["firstkey"]}:{spec["keystep"]}'
    else:
        sys.exit(f'{name}: find_keys {s(fk["type"])} is not supported')
    if 'notes' in ks:
        out += ':' + s(ks['notes'])
    return out


def row(r, name):
    info = r.execute_command('COMMAND', 'INFO', name)[0]
    if info is None:
        sys.exit(f'{name}: unknown to this redis-server')
    docs = pairs(r.execute_command('COMMAND', 'DOCS', name)[1])
    cname, arity, flags, first, last, step, acl, tips, specs = info[:9]
    fl = ' | '.join(FLAGS[s(f)] for f in flags) or '0'
    fn = 'cmd_' + s(cname).replace('|', '_').replace('-', '_')
    lines = [f'\t{{ .name = {cstr(cname)}, .fn = {fn}, .arity = {arity}, .flags = {fl},',
             f'\t  .first_key = {first}, .last_key = {last}, .step = {step}, '
             f'.acl_categories = {cstr(" ".join(s(a) for a in acl))},',
             f'\t  .since = {cstr(docs["since"])}, .group = {cstr(docs["group"])}, '
             f'.complexity = {cstr(docs.get("complexity", ""))},',
             f'\t  .summary = {cstr(docs["summary"])}']
    extra = []
    if tips:
        extra.append(f'.tips = {cstr(" ".join(s(t) for t in tips))}')
    if specs:
        extra.append(f'.key_specs = {cstr(";".join(key_spec(name, k) for k in specs))}')
    if 'deprecated_since' in docs:
        extra.append(f'.deprecated_since = {cstr(docs["deprecated_since"])}, '
                     f'.replaced_by = {cstr(docs.get("replaced_by", ""))}')
    for e in extra:
        lines[-1] += ','
        lines.append('\t  ' + e)
    lines[-1] += ' },'
    return '\n'.join(lines)


class Resp:
    """The least RESP2 client: one command, its reply as nested lists of bytes and ints."""

    def __init__(self, port):
        self.f = socket.create_connection(('127.0.0.1', port)).makefile('rwb')

    def execute_command(self, *args):
        out = b'*%d\r\n' % len(args)
        for a in args:
            a = a.encode() if isinstance(a, str) else a
            out += b'$%d\r\n%s\r\n' % (len(a), a)
        self.f.write(out)
        self.f.flush()
        return self.read()

    def read(self):
        line = self.f.readline()[:-2]
        t, rest = line[:1], line[1:]
        if t == b'+':
            return rest
        if t == b'-':
            sys.exit('redis-server: ' + rest.decode())
        if t == b':':
            return int(rest)
        if t == b'$':
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b'*':
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        sys.exit('unexpected reply %r' % line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--port', type=int, default=7399)
    ap.add_argument('names', nargs='+')
    a = ap.parse_args()
    r = Resp(a.port)
    print('/* Generated by tools/gen-command-rows.py from redis-server %s: do not edit by hand. */'
          % s([l for l in r.execute_command('INFO', 'server').split(b'\r\n')
             if l.startswith(b'redis_version:')][0][14:]))
    for n in a.names:
        print(row(r, n.lower()))


if __name__ == '__main__':
    main()
