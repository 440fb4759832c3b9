/*
 * rdb_int.h - what enc/'s files share and nothing above them needs.
 */
#ifndef SPW_ENC_RDB_INT_H
#define SPW_ENC_RDB_INT_H

#include "enc/rdb.h"

/* A module's typed opcodes (Redis's rdbLoadCheckModuleValue) up to their EOF opcode: MODULE_2
 * values and MODULE_AUX fields are stepped over with it (rdb_value.c). */
int rdb_module_opcodes_skip(rdb_reader *r);

#endif
