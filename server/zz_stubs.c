/* TEMP stubs: stand-ins for log/ckpt.c, log/recover.c, the redo hook and server/aof.c until the
 * lead's and the aof helper's code lands. Drop this file (its own commit). Checkpoints "succeed"
 * without writing anything; recovery finds nothing; the AOF records nothing. */
#include "server/aof.h"
#include "log/hlog.h"
#include <string.h>

void hlog_session_set_redo(hlog_session *s, hlog_redo_fn fn, void *arg) { (void)s; (void)fn; (void)arg; }
uint64_t hlog_redo_seq(hlog *l) { (void)l; return 1; }
void hlog_redo_seq_set(hlog *l, uint64_t next) { (void)l; (void)next; }
static uint64_t stub_id;
int hlog_checkpoint(hlog *l, hlog_session *s, const char *dir, struct dev *logdev, hlog_ckpt_info *out)
{
	(void)s; (void)dir; (void)logdev;
	hlog_info hi;
	hlog_info_get(l, &hi);
	memset(out, 0, sizeof(*out));
	out->id = ++stub_id;
	out->cut = hi.tail;
	out->keys = hi.keys;
	return 0;
}
int hlog_recover(hlog *l, hlog_session *s, const char *dir, struct dev *logdev, int which,
                 hlog_ckpt_info *out, char *why, size_t whylen)
{
	(void)l; (void)s; (void)dir; (void)logdev; (void)which; (void)out; (void)why; (void)whylen;
	return HLOG_NOTFOUND;
}
void hlog_recover_progress(hlog *l, uint64_t *done, uint64_t *total) { (void)l; *done = *total = 0; }

int aof_dir_prepare(const char *dir) { (void)dir; return 0; }
int aof_sync_thread_start(void) { return 0; }
void aof_sync_thread_stop(void) {}
struct aof_writer { int dirty; };
static struct aof_writer stub_writers[1024];
int aof_writer_open(aof_writer **out, const char *dir, int worker, uint64_t gen, int fsync_mode)
{
	(void)dir; (void)gen; (void)fsync_mode;
	*out = &stub_writers[worker & 1023];
	return 0;
}
void aof_writer_close(aof_writer *w) { (void)w; }
void aof_redo(void *arg, const hlog_redo *r) { (void)r; ((aof_writer *)arg)->dirty = 1; }
bool aof_writer_dirty(const aof_writer *w) { return w->dirty; }
int aof_writer_flush(aof_writer *w) { w->dirty = 0; return 0; }
int aof_writer_rotate(aof_writer *w, uint64_t gen) { (void)w; (void)gen; return 0; }
void aof_writer_set_fsync(aof_writer *w, int fsync_mode) { (void)w; (void)fsync_mode; }
int aof_prune(const char *dir, uint64_t cut) { (void)dir; (void)cut; return 0; }
int aof_remove_all(const char *dir, bool keep_aside) { (void)dir; (void)keep_aside; return 0; }
uint64_t aof_max_gen(const char *dir) { (void)dir; return 0; }
int aof_replay(const char *dir, uint64_t cut, int (*apply)(void *ctx, const aof_rec *r), void *ctx,
               aof_replay_stats *stats, char *why, size_t whylen)
{
	(void)dir; (void)cut; (void)apply; (void)ctx; (void)why; (void)whylen;
	memset(stats, 0, sizeof(*stats));
	return 0;
}
