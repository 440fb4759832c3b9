/*
 * test_dev_registry.c - choosing a backend by name: Garnet's --device-type / --device-io-backend
 * names, case-insensitive, the native default, and the messages a refused or mistaken choice gets.
 */
#include <errno.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "device/dev_test.h"

static char tdir[256];

static int setup(void **state)
{
	(void)state;
	return dev_test_dir_make(tdir, sizeof(tdir), "devreg");
}

static int teardown(void **state)
{
	(void)state;
	dev_test_dir_remove(tdir);
	return 0;
}

static dev_config cfg_for(const char *type, const char *io)
{
	dev_config cfg;
	dev_config_init(&cfg);
	cfg.type = type;
	cfg.io_backend = io;
	cfg.dir = tdir;
	cfg.prefix = "hlog.";
	cfg.segment_bytes = 1 << 20;
	return cfg;
}

static void test_registry_lists_built_backends_and_knows_names_in_any_case(void **state)
{
	(void)state;
	bool mem = false, posix = false;
	for (int i = 0; dev_backend_name(i); i++) {
		mem |= strcmp(dev_backend_name(i), "localmemory") == 0;
		posix |= strcmp(dev_backend_name(i), "posix") == 0;
	}
	assert_true(mem && posix);
	assert_null(dev_backend_name(-1));
	assert_true(dev_backend_built("LocalMemory"));
	assert_int_equal(dev_backend_built("NATIVE"), SPW_WITH_URING || SPW_WITH_AIO);
	assert_true(dev_backend_built("fault:posix"));
	assert_false(dev_backend_built("floppy"));
	assert_false(dev_backend_built(NULL));
	assert_int_equal(dev_backend_built("uring"), SPW_WITH_URING);
	assert_int_equal(dev_backend_built("IO_URING"), SPW_WITH_URING);
	assert_int_equal(dev_backend_built("libaio"), SPW_WITH_AIO);
}

static void test_registry_native_defaults_to_uring_when_the_kernel_allows_it(void **state)
{
	(void)state;
	dev_config cfg = cfg_for("native", NULL);
	char err[256] = "";
	dev *d = NULL;
	int rc = dev_open(&cfg, &d, err, sizeof(err));
	if (rc == -ENOSYS || rc == -EPERM || rc == -EOPNOTSUPP || rc == -ENOENT)
		skip();
	assert_int_equal(rc, 0);
	/* uring when it is built and allowed, else libaio: never something else unasked. */
	assert_true(strcmp(d->name, "uring") == 0 || strcmp(d->name, "libaio") == 0);
	if (SPW_WITH_URING) {
		dev_config u = cfg_for("uring", NULL);
		dev *du = NULL;
		if (dev_open(&u, &du, NULL, 0) == 0) {
			assert_string_equal(d->name, "uring");
			dev_close(du);
		}
	}
	assert_true(d->caps & DEV_CAP_DIRECT);
	dev_close(d);
}

static void test_registry_native_honours_the_io_backend_option(void **state)
{
	(void)state;
	const char *names[] = { "uring", "LIBAIO" };
	const char *want[] = { "uring", "libaio" };
	for (int i = 0; i < 2; i++) {
		dev_config cfg = cfg_for("Native", names[i]);
		dev *d = NULL;
		char err[256] = "";
		int rc = dev_open(&cfg, &d, err, sizeof(err));
		if (rc == -ENOSYS || rc == -EPERM || rc == -EOPNOTSUPP || rc == -ENOENT) {
			assert_true(err[0] != '\0');   /* a refusal always says why */
			continue;
		}
		assert_int_equal(rc, 0);
		assert_string_equal(d->name, want[i]);
		dev_close(d);
	}
}

static void test_registry_explains_unknown_names_and_bad_options(void **state)
{
	(void)state;
	char err[256];
	dev *d = (dev *)1;
	dev_config cfg = cfg_for("native", "floppy");

	err[0] = 0;
	assert_int_equal(dev_open(&cfg, &d, err, sizeof(err)), -ENOENT);
	assert_null(d);
	assert_non_null(strstr(err, "floppy"));
	cfg = cfg_for("posix", NULL);
	cfg.dir = NULL;
	err[0] = 0;
	assert_int_equal(dev_open(&cfg, &d, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "directory"));
	cfg = cfg_for("localmemory", NULL);
	cfg.segment_bytes = 4096;                    /* below the minimum */
	assert_int_equal(dev_open(&cfg, &d, err, sizeof(err)), -EINVAL);
	cfg.segment_bytes = 1 << 20;
	cfg.completion_threads = -1;
	assert_int_equal(dev_open(&cfg, &d, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "completion-threads"));
	assert_int_equal(dev_open(NULL, &d, NULL, 0), -EINVAL);
	assert_int_equal(dev_open(&cfg, NULL, NULL, 0), -EINVAL);
	dev_close(NULL);
	dev_queue_close(NULL);
}

static void test_registry_reports_a_directory_it_cannot_create(void **state)
{
	(void)state;
	char err[256] = "";
	dev *d = NULL;
	dev_config cfg = cfg_for("posix", NULL);
	cfg.dir = "/proc/no/such/place";
	assert_true(dev_open(&cfg, &d, err, sizeof(err)) < 0);
	assert_null(d);
	assert_non_null(strstr(err, "/proc/no/such/place"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_registry_lists_built_backends_and_knows_names_in_any_case,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry_native_defaults_to_uring_when_the_kernel_allows_it,
		                                setup, teardown),
		cmocka_unit_test_setup_teardown(test_registry_native_honours_the_io_backend_option, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_registry_explains_unknown_names_and_bad_options, setup,
		                                teardown),
		cmocka_unit_test_setup_teardown(test_registry_reports_a_directory_it_cannot_create, setup,
		                                teardown),
	};
	return cmocka_run_group_tests_name("device registry", tests, NULL, NULL);
}
