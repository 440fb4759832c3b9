"""server: the connection and server commands Spillway has (server/cmd_server.c, cmd_client.c) that
a random stream can send without changing the connection's protocol or ending it. Most of their
replies are volatile (a clock, an id, a version): those are sent, read and not compared.
The module format is the one strings.py describes.
"""
from diffgen import cmd, oneof, maybe, SKIP

FAMILY = "server"
WEIGHT = 0.15

TEMPLATES = [
	cmd("CONFIG", "GET", oneof(b"timeout", b"maxmemory-policy", b"databases", b"nosuchparam",
	                           b"TIMEOUT")),
	cmd("CONFIG", "GET", weight=0.2),
	cmd("CONFIG", "SET", b"timeout", oneof(0, b"0", b"abc", -1), weight=0.3),
	cmd("CLIENT", "GETNAME"),
	cmd("CLIENT", "SETNAME", oneof(b"app", b"", b"a b", b"x\x00")),
	cmd("CLIENT", "NOSUCH", weight=0.2),
	cmd("AUTH", oneof(b"pw", b""), maybe(b"pw")),
	cmd("TIME", cmp=SKIP, weight=0.2),
	cmd("LASTSAVE", cmp=SKIP, weight=0.2),
	cmd("CLIENT", "ID", cmp=SKIP, weight=0.2),
	cmd("INFO", maybe(oneof(b"server", b"keyspace", b"stats")), cmp=SKIP, weight=0.1),
	cmd("COMMAND", "COUNT", cmp=SKIP, weight=0.1),
]

VOLATILE = {}

EXCLUDED = {
	"QUIT": "closes the connection",
	"SHUTDOWN": "stops the server",
	"HELLO": "changes the protocol; the RESP3 round sends HELLO 3 itself",
	"CLIENT REPLY": "OFF and SKIP suppress replies, and the harness counts replies",
	"CLIENT KILL": "could close the harness's own connection",
	"CLIENT SETINFO": "Redis 7.2's; redis-server 7.0.15 does not know it",
	"SAVE": "persistence has its own tests; a checkpoint per draw would dominate the run time",
	"BGSAVE": "its reply depends on whether a save is running",
	"COMPACT": "Spillway's own command: redis-server does not know it",
	"CONFIG RESETSTAT": "statistics are volatile anyway",
	"CONFIG REWRITE": "writes a config file; redis-server started without one refuses",
	"MEMORY": "MEMORY USAGE is this server's record size, not Redis's allocation (cmd_object.c note 4)",
}
