/*
 * scan_int.h - scan.c's session teardown, private to log/. See scan.c's notes.
 */
#ifndef SPW_LOG_SCAN_INT_H
#define SPW_LOG_SCAN_INT_H

#include "log/hlog_int.h"

/* Free a closing session's scan bookkeeping. */
void scan_session_free(hlog_session *s);

#endif
