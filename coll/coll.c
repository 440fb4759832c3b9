/*
 * coll.c - the names of collection types and encodings (coll.h), as Redis's TYPE and OBJECT
 * ENCODING answer them.
 */
#include "coll/coll.h"

const char *coll_type_name(int type)
{
	switch (type) {
	case COLL_HASH: return "hash";
	case COLL_LIST: return "list";
	case COLL_SET: return "set";
	case COLL_ZSET: return "zset";
	default: return "none";
	}
}

const char *coll_enc_name(int enc)
{
	switch (enc) {
	case CENC_LISTPACK: return "listpack";
	case CENC_INTSET: return "intset";
	case CENC_QUICKLIST: return "quicklist";
	case CENC_HASHTABLE: return "hashtable";
	case CENC_SKIPLIST: return "skiplist";
	default: return "unknown";
	}
}
