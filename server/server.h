/*
 * server.h - the public face of the server layer: start it from a command line.
 * Everything the command files share lives in server_int.h.
 */
#ifndef SPW_SERVER_H
#define SPW_SERVER_H

/* Parse flags and config file, open the store, run the workers until SHUTDOWN or a signal.
 * Returns the process exit code (0 after a graceful stop, 1 on bad configuration). */
int server_main(int argc, char **argv);

#endif
