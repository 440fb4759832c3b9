/* main.c - the spillway-server executable: everything lives in server_main(). */
#include "server/server.h"

int main(int argc, char **argv) { return server_main(argc, argv); }
