#!/usr/bin/python3
"""diff_random.py - the randomized differential test: the same random command stream sent to a real
redis-server and to spillway-server, pipelined, and every reply compared byte for byte.

The stream is drawn from the family modules in tests/integration/random/*.py (one per command family,
each a table of command templates: diffgen.py, and docs/ARCHITECTURE.md "The randomized
differential test"). Per seed, three rounds by default, each on freshly FLUSHALLed servers and fresh
connections:
  resp2  spillway-server as test_differential.c starts it, RESP2;
  resp3  the same server after HELLO 3 on both connections, the templates marked resp3, fewer commands;
  tier   spillway-server with --storage-tier and a --memory of a few pages, so that values spill to
         the device and come back through pending reads (INFO tier_pending_reads must grow).
Two more rounds test the large layout of hashes, sets and sorted sets (docs/ARCHITECTURE.md "Large
collections"), with their own families (tests/integration/random_large/*.py: a few keys, hundreds of
members each) and, on both servers, CONFIG SET hash-max-listpack-entries 4,
set-max-intset-entries 4 and zset-max-listpack-entries 4 (so that most of those are hashtable- or
skiplist-encoded), restored after the round:
  large       spillway-server as in resp2 with --coll-record-max 128 (so that they become large);
  large-tier  the same on the tier round's geometry, so that parts spill and are read back.
Both must make INFO coll_large_conversions, coll_bucket_splits, coll_list_node_writes and
coll_zset_point_writes grow (else they did not test the layout; random_large/lists.py makes lists
past 2 x --coll-record-max large lists, server/coll_list_large.c); large-tier also
tier_pending_reads. ctest runs them as integration_diff_random_large.

Environment: SPW_BIN (the folder of spillway-server, as ctest sets it), SPW_DIFF_SEED=N (one seed
instead of the default list), SPW_DIFF_COMMANDS=N (commands per round; the RESP3 round runs a quarter),
SPW_DIFF_ROUNDS="resp2 tier" (the rounds to run; default "resp2 resp3 tier").

Notes:
 1. Commands go out in batches of 1..64 (drawn from the seed), written to both servers at once and
    read back as raw bytes: pipelined parsing and replies are part of what is compared.
 2. Volatile commands (VOLATILE below, and each family's own) are those whose replies differ by
    design. A generated command that is volatile under a comparator that compares its reply (EXACT,
    SORTED) stops the test: nothing is excluded silently, as in test_differential.c.
 3. On a mismatch the round stops (the two states may differ from then on) and a reproduction is
    shrunk: the commands back to the last FLUSHALL that touch the failing command's keys, closed over
    the keys they touch in turn (COMMAND GETKEYS on redis-server), cut at the first mismatch, then
    chunks removed while it still fails on a command of the same name, long arguments cut; every try
    runs on both servers after FLUSHALL, and the result is checked one command at a time and printed
    as diff/*.txt lines.
 4. Exit status: 0 all matched, 1 a mismatch or a failure, 77 (SKIP) only when redis-server is not
    installed; a missing spillway-server is a failure.
"""
import ctypes
import importlib.util
import os
import random
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import diffgen as g  # noqa: E402

DEFAULT_SEEDS = [1, 20240613]
DEFAULT_COMMANDS = 20000
BATCH_MAX = 64
IO_TIMEOUT = 30.0
SHRINK_TRIES = 300
SHRINK_SECONDS = 30.0
REPRO_MAX = 300

# Why a command's reply differs between the two servers by design (test_differential.c's list).
VOLATILE = {
	"INFO": "server-specific fields: versions, pids, ports, uptime, memory",
	"TIME": "the clock",
	"LASTSAVE": "the clock",
	"CLIENT ID": "connection counters differ between servers",
	"CLIENT LIST": "ids, addresses, ages, buffer sizes",
	"CLIENT INFO": "ids, addresses, ages, buffer sizes",
	"HELLO": "server name, version, connection id",
	"COMMAND": "Spillway implements a subset of Redis's commands",
	"DEBUG": "server internals",
	"RANDOMKEY": "random by definition",
	"SCAN": "cursors are implementation-defined; SCANALL compares the whole iteration",
	"OBJECT": "encodings, refcounts, idle times",
	"MEMORY": "allocator figures",
	"LATENCY": "measurements",
	"SLOWLOG": "measurements",
}
# CONFIG GET is volatile for these parameters (they differ between the processes) and for globs.
VOLATILE_CONFIG = {
	b"port", b"bind", b"dir", b"logfile", b"pidfile", b"dbfilename", b"save", b"appendonly",
	b"maxmemory", b"maxclients", b"io-threads", b"daemonize", b"unixsocket", b"logdir", b"threads",
	b"memory", b"page", b"index", b"tls-port", b"supervised", b"loglevel",
}

SPW_FLAGS = ["--threads", "2", "--memory", "64m", "--page", "1m", "--index", "1m"]
SPW_TIER_FLAGS = ["--storage-tier", "--device-type", "posix", "--threads", "2", "--memory", "512k",
                  "--page", "64k", "--segment", "1m", "--index", "1m"]
SPW_LARGE_FLAGS = SPW_FLAGS + ["--coll-record-max", "128"]
SPW_LARGE_TIER_FLAGS = SPW_TIER_FLAGS + ["--coll-record-max", "128"]
# Sent to both servers before a large round (the old values are restored after it).
LARGE_CONFIG = [(b"hash-max-listpack-entries", b"4"), (b"set-max-intset-entries", b"4"),
                (b"zset-max-listpack-entries", b"4")]
LARGE_COUNTERS = ["coll_large_conversions", "coll_bucket_splits", "coll_list_node_writes",
                  "coll_zset_point_writes"]


class Round:
	"""A round: spillway-server's flags, the protocol, the share of the commands, the family folder,
	the CONFIG SETs both servers get first, and the INFO counters that must grow over it."""

	def __init__(self, flags, protocol, share, families="random", config=(), counters=()):
		self.flags, self.protocol, self.share = flags, protocol, share
		self.families, self.config, self.counters = families, list(config), list(counters)


ROUNDS = {
	"resp2": Round(SPW_FLAGS, 2, 1.0),
	"resp3": Round(SPW_FLAGS, 3, 0.25),
	"tier": Round(SPW_TIER_FLAGS, 2, 0.6, counters=["tier_pending_reads"]),
	"large": Round(SPW_LARGE_FLAGS, 2, 0.5, "random_large", LARGE_CONFIG, LARGE_COUNTERS),
	"large-tier": Round(SPW_LARGE_TIER_FLAGS, 2, 0.5, "random_large", LARGE_CONFIG,
	                    LARGE_COUNTERS + ["tier_pending_reads", "coll_part_reads"]),
}
DEFAULT_ROUNDS = "resp2 resp3 tier"


def say(*a):
	print(*a, flush=True)


# ---------------- families ----------------


class Family:
	def __init__(self, path):
		name = "spw_family_" + os.path.basename(path)[:-3]
		spec = importlib.util.spec_from_file_location(name, path)
		mod = importlib.util.module_from_spec(spec)
		spec.loader.exec_module(mod)
		self.path = path
		for field in ("FAMILY", "TEMPLATES"):
			if not hasattr(mod, field):
				raise SystemExit("FAIL: %s defines no %s (see strings.py's opening comment)" %
				                 (path, field))
		self.name = mod.FAMILY
		self.templates = list(mod.TEMPLATES)
		self.volatile = dict(getattr(mod, "VOLATILE", {}))
		self.excluded = dict(getattr(mod, "EXCLUDED", {}))
		self.weight = float(getattr(mod, "WEIGHT", 1.0))
		for t in self.templates:
			t.family = self.name


def families_load(folder):
	fams = [Family(os.path.join(folder, f)) for f in sorted(os.listdir(folder))
	        if f.endswith(".py") and not f.startswith("_")]
	if not fams:
		raise SystemExit("FAIL: no family modules in %s" % folder)
	return fams


def volatile_reason(argv, extra):
	"""Why argv's reply is volatile, or None."""
	w0 = argv[0].upper().decode("latin-1") if argv else ""
	w1 = argv[1].upper().decode("latin-1") if len(argv) > 1 else ""
	for name in (w0 + " " + w1, w0):
		why = VOLATILE.get(name) or extra.get(name)
		if why:
			return why
	if w0 == "CONFIG" and w1 == "GET":
		for a in argv[2:]:
			if a.lower() in VOLATILE_CONFIG or any(c in a for c in b"*?["):
				return "CONFIG GET of a parameter that differs between the processes, or a glob"
	return None


def coverage_note(fams, src):
	"""Say which commands of cmd_table no family generates nor excludes (a reminder, not a failure:
	a new command's family may come in a later change)."""
	path = os.path.join(src, "server", "commands.c")
	try:
		text = open(path).read()
	except OSError:
		return
	table = text[text.find("cmd_table[]"):]
	names = {n.upper() for n in re.findall(r'\.name = "([a-z]+)"', table)}
	seen = set()
	for f in fams:
		seen |= {t.name.split()[0] for t in f.templates if t.name}
		seen |= {n.split()[0] for n in f.excluded} | {n.split()[0] for n in f.volatile}
	missing = sorted(names - seen)
	if missing:
		say("diff_random: note: no family generates or excludes %s" % " ".join(missing))


# ---------------- streams ----------------


class Stream:
	"""A round's commands: argv lists with their templates, drawn from one seed."""

	def __init__(self, fams, seed, rnd, n, protocol):
		r = random.Random("%d/%s" % (seed, rnd))
		pools = []
		for f in fams:
			ts = [t for t in f.templates if protocol == 2 or t.resp3]
			if ts:
				pools.append((f, ts, [t.weight for t in ts]))
		fw = [p[0].weight for p in pools]
		self.cmds = []
		for _ in range(n):
			f, ts, ws = r.choices(pools, fw)[0]
			t = r.choices(ts, ws)[0]
			argv = t.make(r)
			why = volatile_reason(argv, f.volatile)
			if why and t.cmp in (g.EXACT, g.SORTED):
				raise SystemExit("FAIL: family %s: '%s' is volatile (%s): its template must not compare "
				                 "it exactly (use SKIP, TYPE, LENGTH or a check)" %
				                 (f.name, g.cli_line(argv), why))
			self.cmds.append((argv, t))


# ---------------- servers and connections ----------------


def _pdeathsig():
	# The server dies with this process (a crash, ctest's timeout), as itest_proc.c's note 1.
	try:
		ctypes.CDLL("libc.so.6").prctl(1, signal.SIGKILL)
	except OSError:
		pass


def port_pick():
	s = socket.socket()
	s.bind(("127.0.0.1", 0))
	p = s.getsockname()[1]
	s.close()
	return p


class Server:
	def __init__(self, name, argv_fn):
		self.name = name
		self.dir = tempfile.mkdtemp(prefix="spw-diffrand-")
		self.log = os.path.join(self.dir, "server.log")
		for attempt in range(4):   # another process may take the port first (itest_proc.c note 2)
			self.port = port_pick()
			with open(self.log, "ab") as lf:
				self.proc = subprocess.Popen(argv_fn(self.port, self.dir), stdin=subprocess.DEVNULL,
				                             stdout=lf, stderr=lf, preexec_fn=_pdeathsig)
			if self._wait_ready():
				return
			say("diff_random: %s exited with %s before answering PING (try %d)" %
			    (name, self.proc.returncode, attempt + 1))
		self.log_dump()
		raise SystemExit("FAIL: cannot start %s" % name)

	def _wait_ready(self):
		deadline = time.monotonic() + 30
		while time.monotonic() < deadline:
			if self.proc.poll() is not None:
				return False
			try:
				with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
					s.sendall(b"PING\r\n")
					if s.recv(16) == b"+PONG\r\n":
						return True
			except OSError:
				pass
			time.sleep(0.02)
		self.proc.kill()
		self.proc.wait()
		self.log_dump()
		raise SystemExit("FAIL: %s did not answer PING within 30 s" % self.name)

	def stop(self):
		"""SIGTERM and wait; the exit status. The folder goes only after a clean exit."""
		if self.proc.poll() is None:
			self.proc.terminate()
			try:
				self.proc.wait(60)
			except subprocess.TimeoutExpired:
				self.proc.kill()
				self.proc.wait()
		rc = self.proc.returncode
		if rc == 0:
			shutil.rmtree(self.dir, ignore_errors=True)
		else:
			say("diff_random: %s exited with status %s; its files are kept in %s" % (self.name, rc, self.dir))
		return rc

	def log_dump(self):
		try:
			with open(self.log, "rb") as f:
				data = f.read()[-8192:]
		except OSError:
			return
		say("---- %s log (%s) ----\n%s\n---- end of %s log ----" %
		    (self.name, self.log, data.decode("utf-8", "replace"), self.name))


def redis_start():
	exe = shutil.which("redis-server")
	return Server("redis-server", lambda port, d: [
		exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--databases", "1", "--daemonize", "no", "--logfile", "", "--dir", d])


def spillway_start(exe, flags):
	return Server("spillway-server", lambda port, d: [
		exe, "--bind", "127.0.0.1", "--port", str(port), "--dir", d, "--logdir", d] + flags)


class Conn:
	def __init__(self, server, protocol=2):
		self.server = server
		self.sock = socket.create_connection(("127.0.0.1", server.port), timeout=IO_TIMEOUT)
		self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
		self.sock.setblocking(False)
		self.buf = bytearray()
		if protocol == 3:
			exchange([self], [g.encode([b"HELLO", b"3"])], 1)

	def fileno(self):
		return self.sock.fileno()

	def close(self):
		self.sock.close()


def exchange(conns, payloads, count):
	"""Write payloads[i] to conns[i] while reading count replies from each (both at once, so that
	neither side waits on the other's buffers). A list of reply lists, one per connection."""
	out = [memoryview(p) for p in payloads]
	got = [[] for _ in conns]
	while True:
		rd = [c for c, r in zip(conns, got) if len(r) < count]
		wr = [c for c, o in zip(conns, out) if len(o)]
		if not rd and not wr:
			return got
		rl, wl, _ = select.select(rd, wr, [], IO_TIMEOUT)
		if not rl and not wl:
			raise TimeoutError("no reply within %d s" % IO_TIMEOUT)
		for i, c in enumerate(conns):
			if c in wl:
				out[i] = out[i][c.sock.send(out[i]):]
			if c in rl:
				data = c.sock.recv(1 << 20)
				if not data:
					raise ConnectionError("%s closed the connection" % c.server.name)
				c.buf += data
				pos = 0
				while len(got[i]) < count:
					end = g.reply_end(c.buf, pos)
					if end < 0:
						break
					got[i].append(bytes(c.buf[pos:end]))
					pos = end
				del c.buf[:pos]


def call(conn, argv):
	return exchange([conn], [g.encode(argv)], 1)[0][0]


def scan_all(conn, argv):
	"""SCANALL: follow argv's cursor (SCAN's argv[1], SSCAN/HSCAN/ZSCAN's argv[2]) from its value to
	0; "*N" + the sorted unique elements (HSCAN/ZSCAN: field+value pairs), or the first reply that is
	not a cursor page (an error) as it came."""
	argv = list(argv)
	name = argv[0].upper()
	at = 2 if name in (b"SSCAN", b"HSCAN", b"ZSCAN") else 1
	per = 2 if name in (b"HSCAN", b"ZSCAN") else 1
	seen = set()
	for _ in range(100000):
		r = call(conn, argv)
		top = g.split_aggregate(r)
		if top is None or len(top[1]) != 2 or top[1][0][:1] != b"$" or top[1][1][:1] != b"*":
			return r
		cur = top[1][0]
		cur = cur[cur.find(b"\r\n") + 2:-2]
		elems = g.split_aggregate(top[1][1])[1]
		seen.update(b"".join(elems[i:i + per]) for i in range(0, len(elems), per))
		if cur == b"0":
			return b"*%d\r\n" % (len(seen) * per) + b"".join(sorted(seen))
		if len(argv) > at:
			argv[at] = cur
	raise RuntimeError("%s did not end" % name.decode())


# ---------------- running and comparing ----------------


class Mismatch:
	def __init__(self, index, argv, t, a, b, why):
		self.index, self.argv, self.t, self.a, self.b, self.why = index, argv, t, a, b, why


def run(conns, cmds, batch):
	"""Send cmds to both servers in batches of batch() commands (a SCANALL alone); the first
	Mismatch, or None."""
	i, n = 0, len(cmds)
	while i < n:
		if cmds[i][1].cmp is g.SCANALL:
			a, b = scan_all(conns[0], cmds[i][0]), scan_all(conns[1], cmds[i][0])
			if a != b:
				return Mismatch(i, cmds[i][0], cmds[i][1], a, b, "the keys of the whole SCAN differ")
			i += 1
			continue
		j = i
		limit = i + batch()
		while j < n and j < limit and cmds[j][1].cmp is not g.SCANALL:
			j += 1
		payload = b"".join(g.encode(argv) for argv, _ in cmds[i:j])
		ra, rb = exchange(conns, [payload, payload], j - i)
		for k in range(j - i):
			argv, t = cmds[i + k]
			why = t.cmp.compare(ra[k], rb[k], argv)
			if why:
				return Mismatch(i + k, argv, t, ra[k], rb[k], why)
		i = j
	return None


def fresh_conns(servers, protocol):
	conns = [Conn(s, protocol) for s in servers]
	for c in conns:
		r = call(c, [b"FLUSHALL"])
		if r != b"+OK\r\n":
			raise SystemExit("FAIL: FLUSHALL on %s: %s" % (c.server.name, g.escape(r, 400)))
	return conns


def replay(servers, protocol, cmds, batch=1):
	"""cmds on both servers after FLUSHALL, batch commands at a time; the first Mismatch or None."""
	conns = fresh_conns(servers, protocol)
	try:
		return run(conns, cmds, lambda: batch)
	finally:
		for c in conns:
			c.close()


# ---------------- shrinking (note 3) ----------------


def is_flush(argv):
	return (argv[0].upper() in (b"FLUSHALL", b"FLUSHDB") and
	        (len(argv) == 1 or (len(argv) == 2 and argv[1].upper() in (b"ASYNC", b"SYNC"))))


def command_keys(redis, cmds):
	"""The keys of each command, from COMMAND GETKEYS on redis-server ([] for none or an error)."""
	conn = Conn(redis)
	out = []
	try:
		for i in range(0, len(cmds), 256):
			part = cmds[i:i + 256]
			payload = b"".join(g.encode([b"COMMAND", b"GETKEYS"] + argv) for argv, _ in part)
			for r in exchange([conn], [payload], len(part))[0]:
				agg = g.split_aggregate(r)
				out.append(set(e[e.find(b"\r\n") + 2:-2] for e in agg[1]) if agg else set())
	finally:
		conn.close()
	return out


def backward_slice(cmds, keys, fail):
	"""The indexes of the commands since the last FLUSHALL before fail that touch its keys, closed
	over the keys they touch; all of them when the failing command has no keys (KEYS, DBSIZE)."""
	start = 0
	for j in range(fail - 1, -1, -1):
		if is_flush(cmds[j][0]):
			start = j + 1
			break
	want = set(keys[fail])
	if not want:
		return list(range(start, fail + 1))
	chosen = [fail]
	for j in range(fail - 1, start - 1, -1):
		if keys[j] & want:
			chosen.append(j)
			want |= keys[j]
	return sorted(chosen)


def shrink(servers, protocol, cmds, m):
	"""(a short list of commands that still fails on a command named as m's, whether it fails one
	command at a time), or None when the failure does not come back. The tries are pipelined
	(BATCH_MAX at a time: a replay of thousands of commands one by one would take the whole budget);
	the result is then checked one command at a time, as a diff/*.txt script runs it."""
	name = m.argv[0].upper()
	deadline = time.monotonic() + SHRINK_SECONDS
	prefix = cmds[:m.index + 1]
	keys = command_keys(servers[0], prefix)
	cur = None

	def fails(cand):
		r = replay(servers, protocol, cand, BATCH_MAX)
		return r.index if r is not None and r.argv[0].upper() == name else None

	for cand in ([prefix[i] for i in backward_slice(prefix, keys, m.index)], prefix):
		r = fails(cand)
		if r is not None:
			cur = cand[:r + 1]
			break
	if cur is None:
		return None
	n, tries = 2, 0
	while len(cur) > 1 and tries < SHRINK_TRIES and time.monotonic() < deadline:
		chunk = max(1, (len(cur) + n - 1) // n)
		for start in range(0, len(cur), chunk):
			cand = cur[:start] + cur[start + chunk:]
			tries += 1
			r = fails(cand) if cand else None
			if r is not None:
				cur = cand[:r + 1]
				n = max(n - 1, 2)
				break
			if tries >= SHRINK_TRIES or time.monotonic() >= deadline:
				break
		else:
			if chunk == 1:
				break
			n = min(n * 2, len(cur))
	cur = shorten_arguments(cur, fails, deadline)
	one = replay(servers, protocol, cur, 1)
	return cur, one is not None and one.argv[0].upper() == name


def shorten_arguments(cur, fails, deadline):
	"""Arguments of more than 64 bytes cut to 8 where the failure stays (a reproduction to read)."""
	for i in range(len(cur)):
		argv, t = cur[i]
		for a in range(len(argv)):
			if len(argv[a]) <= 64 or time.monotonic() >= deadline:
				continue
			short = argv[:a] + [argv[a][:8]] + argv[a + 1:]
			cand = cur[:i] + [(short, t)] + cur[i + 1:]
			r = fails(cand)
			if r is not None and r == len(cur) - 1:
				cur, argv = cand, short
	return cur


def repeat_unit(a):
	"""(unit, n) when a is unit repeated n > 8 times (a script's !repeat), else None."""
	for size in range(1, 9):
		if len(a) > 8 * size and len(a) % size == 0 and a == a[:size] * (len(a) // size):
			return a[:size], len(a) // size
	return None


def script_lines(protocol, cmds):
	"""cmds as diff/*.txt lines: the directives their comparators need, !repeat for a long last
	argument made of one short unit."""
	lines = ["!skip", "HELLO 3"] if protocol == 3 else []
	for argv, t in cmds:
		if t.cmp.directive:
			lines.append(t.cmp.directive)
		rep = repeat_unit(argv[-1]) if len(argv) > 1 else None
		if rep:
			lines.append("!repeat %d" % rep[1])
			argv = argv[:-1] + [rep[0]]
		lines.append(g.cli_line(argv))
	return lines


def report(seed, rnd, protocol, servers, cmds, m, share):
	rd = ROUNDS.get(rnd)
	a, b = m.a, m.b
	off = 0
	while off < len(a) and off < len(b) and a[off] == b[off]:
		off += 1
	frm = off - 60 if off > 60 else 0
	say("\nMISMATCH seed %d round %s command #%d (family %s, compared %s): %s" %
	    (seed, rnd, m.index, m.t.family, m.t.cmp, m.why))
	line = g.cli_line(m.argv)
	say("  command:      %s" % (line if len(line) <= 300 else line[:300] + "...(%d more)" % (len(line) - 300)))
	say("  first difference at byte %d (replies of %d and %d bytes)%s" %
	    (off, len(a), len(b), ", shown from byte %d" % frm if frm else ""))
	say('  %s: "%s"' % (servers[0].name, g.escape(a[frm:], 400)))
	say('  %s: "%s"' % (servers[1].name, g.escape(b[frm:], 400)))
	say("  rerun: SPW_DIFF_SEED=%d SPW_DIFF_ROUNDS=%s SPW_DIFF_COMMANDS=%d (the stream up to it)" %
	    (seed, rnd, int((m.index + 1) / share) + 1))
	try:
		small = shrink(servers, protocol, cmds, m)
	except (OSError, TimeoutError, ConnectionError, g.ProtocolError) as e:
		say("  (shrinking stopped: %s)" % e)
		return None
	if small is None:
		say("  the failure does not come back when the stream is replayed on flushed servers (it "
		    "needs the tier's spilled state, or it depends on timing)")
		return None
	small, sequential = small
	if not sequential:
		say("  (the reproduction below fails only when pipelined, %d commands a batch)" % BATCH_MAX)
	if len(small) > REPRO_MAX:
		say("  shrunk to %d commands only (more than %d: not printed); rerun with the line above" %
		    (len(small), REPRO_MAX))
		return small
	say("  reproduction (%d commands; paste into tests/integration/diff/NAME.txt):" % len(small))
	if rd is not None and rd.config:
		say("    (spillway-server ran with: %s)" % " ".join(rd.flags))
		small_lines = [g.cli_line([b"CONFIG", b"SET", k, v]) for k, v in rd.config]
	else:
		small_lines = []
	for line in small_lines + script_lines(protocol, small):
		say("    " + line)
	return small


# ---------------- main ----------------


def info_field(conn, name):
	r = call(conn, [b"INFO"])
	m = re.search(rb"\r\n" + re.escape(name.encode()) + rb":(-?\d+)", r)
	return int(m.group(1)) if m else None


def round_run(rnd, seed, n, fams, redis, spw):
	"""One round of one seed: None when every reply matched, else (the Mismatch, its shrunk
	reproduction or None)."""
	protocol, share = ROUNDS[rnd].protocol, ROUNDS[rnd].share
	count = max(1, int(n * share))
	t0 = time.monotonic()
	stream = Stream(fams, seed, rnd, count, protocol)
	servers = [redis, spw]
	conns = fresh_conns(servers, protocol)
	brng = random.Random("%d/%s/batches" % (seed, rnd))
	try:
		m = run(conns, stream.cmds, lambda: brng.randint(1, BATCH_MAX))
	finally:
		for c in conns:
			c.close()
	if m:
		return m, report(seed, rnd, protocol, servers, stream.cmds, m, share)
	say("diff_random: seed %d round %s: %d commands matched (%.1f s)" %
	    (seed, rnd, count, time.monotonic() - t0))
	return None


def config_set(servers, config):
	"""CONFIG SET each (name, value) on every server; the old values, as (name, value) pairs of the
	first server's CONFIG GET, to restore after."""
	old = []
	conns = [Conn(sv) for sv in servers]
	try:
		for name, val in config:
			got = g.split_aggregate(call(conns[0], [b"CONFIG", b"GET", name]))
			if got is None or len(got[1]) != 2:
				raise SystemExit("FAIL: CONFIG GET %s on %s: no value" % (name.decode(), servers[0].name))
			b = got[1][1]
			old.append((name, b[b.find(b"\r\n") + 2:-2]))
			for c in conns:
				r = call(c, [b"CONFIG", b"SET", name, val])
				if r != b"+OK\r\n":
					raise SystemExit("FAIL: CONFIG SET %s %s on %s: %s" %
					                 (name.decode(), val.decode(), c.server.name, g.escape(r, 200)))
	finally:
		for c in conns:
			c.close()
	return old


def counters_read(spw, names):
	probe = Conn(spw)
	try:
		return {name: info_field(probe, name) for name in names}
	finally:
		probe.close()


def rounds_of_seeds(rnd, seeds, n, fams, redis, spw):
	"""Round rnd for every seed, between its CONFIG SETs and their undoing; then the proof that it ran
	its path: each of its counters grew (for tier only at the default length or more: a short
	stream may fit in memory). True when all of it passed."""
	rd = ROUNDS[rnd]
	old = config_set([redis, spw], rd.config)
	before = counters_read(spw, rd.counters)
	ok = True
	try:
		for seed in seeds:
			ok = round_run(rnd, seed, n, fams, redis, spw) is None and ok
	finally:
		config_set([redis, spw], old)
	after = counters_read(spw, rd.counters)
	if not ok:
		return False
	must = n >= DEFAULT_COMMANDS if rnd == "tier" else n >= 1000
	for name in rd.counters:
		grew = (after[name] - before[name] if after[name] is not None and before[name] is not None
		        else None)
		say("diff_random: round %s: %s grew by %s" % (rnd, name, "(no such INFO field)" if grew is None
		                                               else grew))
		if must and not grew:
			say("FAIL: round %s did not test its path: INFO %s %s" %
			    (rnd, name, "is missing" if grew is None else "did not grow"))
			ok = False
	return ok


# ---------------- checks of the harness itself ----------------


def unit_checks():
	"""The RESP reader, the comparators, the script writer and the slicer, without servers. Raises
	AssertionError naming what is wrong."""
	samples = [b"+OK\r\n", b"-ERR x\r\n", b":-5\r\n", b"$-1\r\n", b"$0\r\n\r\n", b"$3\r\na\r\n\r\n",
	           b"*-1\r\n", b"*0\r\n", b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n", b"_\r\n", b",1.5\r\n", b"#t\r\n",
	           b"(123\r\n", b"%1\r\n+k\r\n$1\r\nv\r\n", b"~2\r\n+a\r\n+b\r\n", b"=7\r\ntxt:abc\r\n",
	           b"|1\r\n+a\r\n+b\r\n:1\r\n", b"!3\r\nerr\r\n"]
	for r in samples:
		assert g.reply_end(r + b"+next\r\n") == len(r), "reply_end(%r)" % r
		for cut in range(len(r)):
			assert g.reply_end(r[:cut]) == -1, "reply_end of %r cut at %d" % (r, cut)
	try:
		g.reply_end(b"?x\r\n")
		raise AssertionError("reply_end took a bad type byte")
	except g.ProtocolError:
		pass
	x, y = b"*3\r\n$1\r\nb\r\n$1\r\na\r\n$2\r\nab\r\n", b"*3\r\n$2\r\nab\r\n$1\r\nb\r\n$1\r\na\r\n"
	assert g.SORTED.compare(x, y, []) is None and g.EXACT.compare(x, y, []) is not None
	assert g.SORTED.compare(x, b"*2\r\n$1\r\na\r\n$1\r\nb\r\n", []) is not None
	assert g.LENGTH.compare(b"$2\r\nab\r\n", b"$2\r\ncd\r\n", []) is None
	assert g.LENGTH.compare(b"$2\r\nab\r\n", b"$1\r\nc\r\n", []) is not None
	assert g.TYPE.compare(b"$2\r\nab\r\n", b"$1\r\nc\r\n", []) is None
	assert g.TYPE.compare(b"$2\r\nab\r\n", b"$-1\r\n", []) is not None
	assert g.TYPE.compare(b"-ERR a\r\n", b"-ERR b\r\n", []) is not None, "errors compare exactly"
	assert g.SKIP.compare(b"-ERR a\r\n", b":1\r\n", []) is None
	near = g.near(30)
	assert near.compare(b":1000\r\n", b":999\r\n", []) is None
	assert near.compare(b":1000\r\n", b":-1\r\n", []) is not None
	assert near.compare(b":-2\r\n", b":-1\r\n", []) is not None
	assert g.cli_line([b"SET", b"a b", b"x\r\n\x00\"\\", b""]) == 'SET "a b" "x\\r\\n\\x00\\"\\\\" ""'
	assert g.cli_line([b"SET", b"k*", b"!x"]) == 'SET k* "!x"'
	assert repeat_unit(b"ab" * 100) == (b"ab", 100) and repeat_unit(b"abc") is None
	t = g.cmd("SET", "k", "v")
	cmds = [([b"SET", b"a", b"1"], t), ([b"FLUSHALL"], t), ([b"SET", b"c", b"2"], t),
	        ([b"SET", b"b", b"1"], t), ([b"RENAME", b"c", b"b"], t), ([b"SET", b"c", b"3"], t),
	        ([b"SET", b"d", b"2"], t), ([b"GET", b"b"], t)]
	keys = [{b"a"}, set(), {b"c"}, {b"b"}, {b"c", b"b"}, {b"c"}, {b"d"}, {b"b"}]
	# back to the FLUSHALL; d never meets b; c does through the RENAME, and only c's SET before it
	assert backward_slice(cmds, keys, 7) == [2, 3, 4, 7], backward_slice(cmds, keys, 7)
	assert backward_slice(cmds, [set()] * 8, 7) == list(range(2, 8)), "a keyless command"
	assert volatile_reason([b"config", b"get", b"port"], {}) and not volatile_reason(
		[b"CONFIG", b"GET", b"timeout"], {})
	assert volatile_reason([b"client", b"id"], {}) and volatile_reason([b"X"], {"X": "why"})


def self_test(fams):
	"""The harness must find a difference and shrink it: redis-server against a redis-server whose
	APPEND is renamed away (an unknown command there). 0 when the mismatch was found on an APPEND and
	shrunk to at most 2 commands ending with it."""
	exe = shutil.which("redis-server")
	a = redis_start()
	b = Server("redis-server (no APPEND)", lambda port, d: [
		exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--databases", "1", "--daemonize", "no", "--logfile", "", "--dir", d,
		"--rename-command", "APPEND", ""])
	try:
		res = round_run("resp2", 1, 3000, fams, a, b)
	finally:
		a.stop()
		b.stop()
	if res is None:
		say("FAIL: self-test: no mismatch found against a redis-server without APPEND")
		return 1
	m, small = res
	if m.argv[0].upper() != b"APPEND" or not small or len(small) > 2 or \
	   small[-1][0][0].upper() != b"APPEND":
		say("FAIL: self-test: expected a reproduction of at most 2 commands ending with APPEND")
		return 1
	say("diff_random: self-test: the APPEND difference was found and shrunk to %d command(s)" %
	    len(small))
	return 0


def main():
	if not shutil.which("redis-server"):
		say("SKIP: redis-server is not installed (Debian package redis-server)")
		return 77
	binp = os.environ.get("SPW_BIN", "")
	exe = os.path.join(binp, "spillway-server")
	if not binp or not os.access(exe, os.X_OK):
		say("FAIL: %s is missing or not executable (SPW_BIN: the folder of spillway-server)" % exe)
		return 1
	here = os.path.dirname(os.path.abspath(__file__))
	unit_checks()
	fams = {d: families_load(os.path.join(here, d)) for d in ("random", "random_large")}
	if "--self-test" in sys.argv[1:]:
		return self_test(fams["random"])
	coverage_note(fams["random"], os.environ.get("SPW_SRC", os.path.join(here, "..", "..")))
	seeds = [int(os.environ["SPW_DIFF_SEED"])] if os.environ.get("SPW_DIFF_SEED") else DEFAULT_SEEDS
	n = int(os.environ.get("SPW_DIFF_COMMANDS") or DEFAULT_COMMANDS)
	rounds = os.environ.get("SPW_DIFF_ROUNDS", DEFAULT_ROUNDS).split()
	for rnd in rounds:
		if rnd not in ROUNDS:
			say("FAIL: unknown round %s (rounds: %s)" % (rnd, " ".join(ROUNDS)))
			return 1
	names = sorted({f.name for r in rounds for f in fams[ROUNDS[r].families]})
	say("diff_random: seeds %s, %d commands per round, rounds %s, families %s" %
	    (" ".join(map(str, seeds)), n, " ".join(rounds), " ".join(names)))
	ok = True
	redis = redis_start()
	spw = None
	try:
		for rnd in rounds:
			rd = ROUNDS[rnd]
			if spw is None or spw.flags is not rd.flags:
				if spw is not None and spw.stop() != 0:
					ok = False
				spw = spillway_start(exe, rd.flags)
				spw.flags = rd.flags
			ok = rounds_of_seeds(rnd, seeds, n, fams[rd.families], redis, spw) and ok
	except (OSError, TimeoutError, ConnectionError, g.ProtocolError) as e:
		say("FAIL: %s: %s" % (type(e).__name__, e))
		if spw is not None:
			spw.log_dump()
		ok = False
	finally:
		if spw is not None and spw.stop() != 0:
			say("FAIL: spillway-server did not exit cleanly")
			spw.log_dump()
			ok = False
		redis.stop()
	return 0 if ok else 1


if __name__ == "__main__":
	sys.exit(main())
