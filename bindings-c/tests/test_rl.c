/*
 * The C suite for librl: the API as a C program sees it, against a real Redis (the URL comes from
 * RL_TEST_REDIS_URL, set by `rl-harness run`) or the memory backend (NULL url).
 *
 *   test_rl --backend redis|memory [--limit N] [--window-ms N] [--threads N] [--only NAME]
 *           [--skip NAME]...
 *
 * --limit/--window-ms size the 8-thread exactness test (small under valgrind, larger natively).
 * Prints one line per test and ends with `RESULT passed=N failed=M` for bindings-c/test.sh.
 * Exit status: 0 if every test passed.
 */
#define _GNU_SOURCE
#include "rl.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* ---- a tiny test framework -------------------------------------------------------------- */

static int g_failed_checks; /* failures inside the running test */
static const char *g_backend = "memory";
static const char *g_url;          /* NULL for memory */
static uint64_t g_exact_limit = 50; /* 8-thread exactness test: limit per window */
static uint64_t g_exact_window = 200;
static int g_threads = 8;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            g_failed_checks++;                                                                  \
            fprintf(stderr, "    %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
        }                                                                                       \
    } while (0)

static uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sleep_ms(uint64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Generous timeouts: under valgrind everything runs ~30x slower, and the first call connects.
 * Slow round trips never send these limiters local (degrade only above 60 s, the longest allowed):
 * under valgrind every round trip is over the 5 ms default, and the tests below check that Redis
 * decides. Failures still would (the fallback is on); the fallback tests use their own options. */
static rl_options test_options(void) {
    rl_options o = rl_options_default();
    o.connect_timeout_ms = 10000;
    o.request_timeout_ms = 10000;
    o.degrade_rtt_ms = 60000;
    return o;
}

static rl_limiter *open_or_die(void) {
    rl_options o = test_options();
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    rl_status st = rl_limiter_open(g_url, &o, &l, &err);
    if (st != RL_OK) {
        fprintf(stderr, "rl_limiter_open(%s): %s: %s\n", g_url ? g_url : "NULL", rl_status_name((int)st),
                rl_error_message(err));
        exit(2);
    }
    return l;
}

/* A key unique to this process and test, so reruns against one Redis never share a window. */
static size_t unique_key(char *buf, size_t cap, const char *name) {
    int n = snprintf(buf, cap, "ctest:%ld:%s:%s", (long)getpid(), g_backend, name);
    return (size_t)n;
}

static rl_mode expected_mode(void) { return g_url ? RL_MODE_NORMAL : RL_MODE_MEMORY; }

/* Checks a failed call: status, message, and that the error object agrees; frees the error. */
static void expect_error(rl_status st, rl_error *err, rl_status want, const char *want_message, int line) {
    if (st != want) {
        g_failed_checks++;
        fprintf(stderr, "    line %d: status %s, want %s (message: %s)\n", line, rl_status_name((int)st),
                rl_status_name((int)want), rl_error_message(err));
    }
    if (err == NULL) {
        g_failed_checks++;
        fprintf(stderr, "    line %d: no rl_error was stored\n", line);
        return;
    }
    if (rl_error_code(err) != want) {
        g_failed_checks++;
        fprintf(stderr, "    line %d: rl_error_code %d, want %d\n", line, (int)rl_error_code(err), (int)want);
    }
    if (want_message != NULL && strcmp(rl_error_message(err), want_message) != 0) {
        g_failed_checks++;
        fprintf(stderr, "    line %d: message\n      got:  %s\n      want: %s\n", line, rl_error_message(err),
                want_message);
    }
    rl_error_free(err);
}
#define EXPECT_ERROR(st, err, want, msg) expect_error((st), (err), (want), (msg), __LINE__)

static int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* ---- tests -------------------------------------------------------------------------------- */

static void test_version(void) {
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH);
    CHECK(strcmp(rl_version(), RL_VERSION) == 0, "rl_version() %s vs RL_VERSION %s", rl_version(), RL_VERSION);
    CHECK(strcmp(want, RL_VERSION) == 0, "macros %s vs RL_VERSION %s", want, RL_VERSION);
}

static void test_names(void) {
    CHECK(strcmp(rl_mode_name(RL_MODE_NORMAL), "normal") == 0, "%s", rl_mode_name(RL_MODE_NORMAL));
    CHECK(strcmp(rl_mode_name(RL_MODE_MEMORY), "memory") == 0, "%s", rl_mode_name(RL_MODE_MEMORY));
    CHECK(strcmp(rl_mode_name(RL_MODE_LOCAL), "local") == 0, "%s", rl_mode_name(RL_MODE_LOCAL));
    CHECK(strcmp(rl_mode_name(RL_MODE_LEASE), "lease") == 0, "%s", rl_mode_name(RL_MODE_LEASE));
    CHECK(strcmp(rl_mode_name(-1), "unknown") == 0, "%s", rl_mode_name(-1));
    CHECK(strcmp(rl_mode_name(1 << 30), "unknown") == 0, "%s", rl_mode_name(1 << 30));
    CHECK(strcmp(rl_status_name(RL_OK), "ok") == 0, "%s", rl_status_name(RL_OK));
    CHECK(strcmp(rl_status_name(RL_INVALID_ARGUMENT), "invalid_argument") == 0, "x");
    CHECK(strcmp(rl_status_name(RL_BACKEND_UNAVAILABLE), "backend_unavailable") == 0, "x");
    CHECK(strcmp(rl_status_name(RL_BACKEND_ERROR), "backend_error") == 0, "x");
    CHECK(strcmp(rl_status_name(RL_CLOCK_SKEW), "clock_skew") == 0, "x");
    CHECK(strcmp(rl_status_name(RL_PANIC), "panic") == 0, "x");
    CHECK(strcmp(rl_status_name(12345), "unknown") == 0, "x");
    CHECK(RL_OK == 0, "RL_OK must be 0");
}

static void test_options_default(void) {
    rl_options o = rl_options_default();
    CHECK(o.struct_size == sizeof(rl_options), "struct_size %zu vs %zu", o.struct_size, sizeof(rl_options));
    CHECK(o.key_prefix == NULL, "key_prefix not NULL");
    CHECK(o.connect_timeout_ms == 0 && o.request_timeout_ms == 0, "timeouts not zero");
    CHECK(o.retry_delay_ms == 0 && !o.disable_local_fallback && o.degrade_rtt_ms == 0 && o.degrade_after_ms == 0 &&
              o.recover_rtt_ms == 0 && o.recover_after_ms == 0 && o.instances == 0 && o.local_max_keys == 0,
          "version 2 fields not zero");
    /* A zeroed struct with struct_size set is all defaults too. */
    rl_options z;
    memset(&z, 0, sizeof z);
    z.struct_size = sizeof z;
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    CHECK(rl_limiter_open(NULL, &z, &l, &err) == RL_OK, "zeroed options: %s", rl_error_message(err));
    rl_error_free(err);
    rl_limiter_free(l);
}

static void test_null_safe_frees(void) {
    rl_limiter_free(NULL);
    rl_limiter_free(NULL);
    rl_error_free(NULL);
    rl_error_free(NULL);
    CHECK(rl_error_code(NULL) == RL_OK, "rl_error_code(NULL)");
    CHECK(strcmp(rl_error_message(NULL), "") == 0, "rl_error_message(NULL)");
}

static void test_open_and_decide(void) {
    rl_limiter *l = open_or_die();
    char key[128];
    size_t n = unique_key(key, sizeof key, "basic");
    rl_decision d;
    rl_error *err = (rl_error *)&err; /* garbage in: must be overwritten with NULL on success */

    CHECK(rl_ping(l, &err) == RL_OK, "ping: %s", rl_error_message(err));
    CHECK(err == NULL, "err not cleared on success");
    CHECK(rl_reset(l, (const uint8_t *)key, n, NULL) == RL_OK, "reset");
    for (uint64_t i = 1; i <= 3; i++) {
        rl_status st = rl_acquire(l, (const uint8_t *)key, n, 3, 60000, 1, &d, &err);
        CHECK(st == RL_OK, "acquire %" PRIu64 ": %s", i, rl_error_message(err));
        CHECK(err == NULL, "err set on success");
        CHECK(d.allowed, "acquire %" PRIu64 " denied", i);
        CHECK(d.used == i && d.remaining == 3 - i, "used %" PRIu64 " remaining %" PRIu64, d.used, d.remaining);
        CHECK(d.retry_after_ms == 0, "retry_after_ms %" PRIu64, d.retry_after_ms);
        CHECK(d.reset_after_ms == 60000, "reset_after_ms %" PRIu64, d.reset_after_ms);
        CHECK(d.mode == expected_mode(), "mode %s", rl_mode_name((int)d.mode));
        CHECK(d.now_ms > 1600000000000ull, "now_ms %" PRIu64 " is not a Unix time in ms", d.now_ms);
    }
    CHECK(rl_acquire(l, (const uint8_t *)key, n, 3, 60000, 1, &d, NULL) == RL_OK, "4th acquire");
    CHECK(!d.allowed, "4th acquire allowed");
    CHECK(d.used == 3 && d.remaining == 0, "denied: used %" PRIu64 " remaining %" PRIu64, d.used, d.remaining);
    CHECK(d.retry_after_ms > 0 && d.retry_after_ms <= 60000, "retry_after_ms %" PRIu64, d.retry_after_ms);

    CHECK(rl_peek(l, (const uint8_t *)key, n, 3, 60000, &d, NULL) == RL_OK, "peek");
    CHECK(!d.allowed && d.used == 3, "peek allowed=%d used=%" PRIu64, d.allowed, d.used);
    CHECK(rl_peek(l, (const uint8_t *)key, n, 10, 60000, &d, NULL) == RL_OK, "peek with a higher limit");
    CHECK(d.allowed && d.used == 3 && d.remaining == 7, "peek 10: allowed=%d used=%" PRIu64, d.allowed, d.used);

    CHECK(rl_reset(l, (const uint8_t *)key, n, &err) == RL_OK, "reset: %s", rl_error_message(err));
    CHECK(rl_peek(l, (const uint8_t *)key, n, 3, 60000, &d, NULL) == RL_OK, "peek after reset");
    CHECK(d.allowed && d.used == 0 && d.remaining == 3 && d.reset_after_ms == 0, "after reset used %" PRIu64,
          d.used);
    CHECK(rl_acquire(l, (const uint8_t *)key, n, 5, 60000, 5, &d, NULL) == RL_OK && d.allowed && d.used == 5,
          "cost == limit is granted: used %" PRIu64, d.used);
    rl_reset(l, (const uint8_t *)key, n, NULL);
    rl_limiter_free(l);
}

static void test_retry_after_is_honest(void) {
    rl_limiter *l = open_or_die();
    char key[128];
    size_t n = unique_key(key, sizeof key, "retry");
    rl_decision d;
    rl_reset(l, (const uint8_t *)key, n, NULL);
    CHECK(rl_acquire(l, (const uint8_t *)key, n, 2, 300, 2, &d, NULL) == RL_OK && d.allowed, "first");
    CHECK(rl_acquire(l, (const uint8_t *)key, n, 2, 300, 1, &d, NULL) == RL_OK && !d.allowed, "second");
    CHECK(d.retry_after_ms > 0 && d.retry_after_ms <= 300, "retry_after_ms %" PRIu64, d.retry_after_ms);
    sleep_ms(d.retry_after_ms + 5);
    CHECK(rl_acquire(l, (const uint8_t *)key, n, 2, 300, 1, &d, NULL) == RL_OK && d.allowed,
          "after retry_after_ms: allowed=%d used=%" PRIu64, d.allowed, d.used);
    rl_reset(l, (const uint8_t *)key, n, NULL);
    rl_limiter_free(l);
}

static void test_binary_keys(void) {
    rl_limiter *l = open_or_die();
    char base[96];
    size_t bn = unique_key(base, sizeof base, "bin");
    /* Same printable prefix, differing after a NUL, and keys with braces/percent signs. */
    uint8_t k1[128], k2[128], k3[128];
    memcpy(k1, base, bn);
    memcpy(k2, base, bn);
    memcpy(k3, base, bn);
    memcpy(k1 + bn, "\0a", 2);
    memcpy(k2 + bn, "\0b", 2);
    memcpy(k3 + bn, "}{%7D\xff", 6);
    rl_decision d;
    rl_reset(l, k1, bn + 2, NULL);
    rl_reset(l, k2, bn + 2, NULL);
    rl_reset(l, k3, bn + 6, NULL);
    CHECK(rl_acquire(l, k1, bn + 2, 1, 60000, 1, &d, NULL) == RL_OK && d.allowed, "k1");
    CHECK(rl_acquire(l, k2, bn + 2, 1, 60000, 1, &d, NULL) == RL_OK && d.allowed, "k2 shares k1's window");
    CHECK(rl_acquire(l, k3, bn + 6, 1, 60000, 1, &d, NULL) == RL_OK && d.allowed, "k3");
    CHECK(rl_acquire(l, k1, bn + 2, 1, 60000, 1, &d, NULL) == RL_OK && !d.allowed, "k1 again allowed");
    rl_reset(l, k1, bn + 2, NULL);
    rl_reset(l, k2, bn + 2, NULL);
    rl_reset(l, k3, bn + 6, NULL);
    rl_limiter_free(l);
}

static void test_key_size_bounds(void) {
    rl_limiter *l = open_or_die();
    rl_decision d;
    rl_error *err = NULL;
    size_t big = 1u << 20; /* 1 MiB */
    uint8_t *key = malloc(big);
    memset(key, 'k', big);
    /* Exactly the largest allowed key works. */
    key[0] = (uint8_t)(getpid() & 0x7f) | 1;
    rl_status st = rl_acquire(l, key, 65536, 1, 1000, 1, &d, &err);
    CHECK(st == RL_OK && d.allowed, "64 KiB key: %s %s", rl_status_name((int)st), rl_error_message(err));
    rl_error_free(err);
    CHECK(rl_reset(l, key, 65536, NULL) == RL_OK, "reset 64 KiB key");
    err = NULL;
    st = rl_acquire(l, key, 65537, 1, 1000, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: is 65537 bytes; at most 65536 are allowed");
    st = rl_acquire(l, key, big, 1, 1000, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: is 1048576 bytes; at most 65536 are allowed");
    st = rl_peek(l, key, big, 1, 1000, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: is 1048576 bytes; at most 65536 are allowed");
    st = rl_reset(l, key, big, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: is 1048576 bytes; at most 65536 are allowed");
    /* A length no buffer could have is refused before anything is read. */
    st = rl_acquire(l, key, SIZE_MAX, 1, 1000, 1, &d, &err);
    CHECK(st == RL_INVALID_ARGUMENT, "SIZE_MAX key_len: %s", rl_status_name((int)st));
    CHECK(err && starts_with(rl_error_message(err), "invalid argument `key`: is 18446744073709551615 bytes"), "%s",
          rl_error_message(err));
    rl_error_free(err);
    free(key);
    rl_limiter_free(l);
}

static void test_bad_arguments(void) {
    rl_limiter *l = open_or_die();
    char key[128];
    size_t n = unique_key(key, sizeof key, "bad");
    const uint8_t *k = (const uint8_t *)key;
    rl_decision d;
    memset(&d, 0x5a, sizeof d);
    rl_decision untouched = d;
    rl_error *err = NULL;
    rl_status st;

    /* NULL pointers, one per parameter. */
    st = rl_acquire(NULL, k, n, 10, 1000, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limiter`: must not be NULL");
    st = rl_acquire(l, NULL, n, 10, 1000, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: must not be NULL");
    st = rl_acquire(l, NULL, 0, 10, 1000, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: must not be NULL");
    st = rl_acquire(l, k, n, 10, 1000, 1, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
    st = rl_peek(NULL, k, n, 10, 1000, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limiter`: must not be NULL");
    st = rl_peek(l, NULL, n, 10, 1000, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: must not be NULL");
    st = rl_peek(l, k, n, 10, 1000, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
    st = rl_reset(NULL, k, n, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limiter`: must not be NULL");
    st = rl_reset(l, NULL, n, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: must not be NULL");
    st = rl_ping(NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limiter`: must not be NULL");
    /* err == NULL: the status alone, nothing allocated (valgrind checks the "nothing"). */
    CHECK(rl_acquire(NULL, NULL, 0, 0, 0, 0, NULL, NULL) == RL_INVALID_ARGUMENT, "all NULL");
    CHECK(rl_peek(NULL, NULL, 0, 0, 0, NULL, NULL) == RL_INVALID_ARGUMENT, "all NULL");
    CHECK(rl_reset(NULL, NULL, 0, NULL) == RL_INVALID_ARGUMENT, "all NULL");

    /* Empty key. */
    st = rl_acquire(l, k, 0, 10, 1000, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: must not be empty");
    st = rl_reset(l, k, 0, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: must not be empty");

    /* Windows: zero, negative cast to unsigned, over 30 days. */
    st = rl_acquire(l, k, n, 10, 0, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `window_ms`: is 0; must be between 1 and 2592000000 (30 days)");
    st = rl_acquire(l, k, n, 10, (uint64_t)-1, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `window_ms`: is 18446744073709551615; must be between 1 and 2592000000 (30 days)");
    st = rl_peek(l, k, n, 10, (uint64_t)(int64_t)-1000, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `window_ms`: is 18446744073709550616; must be between 1 and 2592000000 (30 days)");
    st = rl_acquire(l, k, n, 10, 2592000001ull, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `window_ms`: is 2592000001; must be between 1 and 2592000000 (30 days)");

    /* Limits. */
    st = rl_acquire(l, k, n, 0, 1000, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limit`: is 0; must be between 1 and 1000000000000000");
    st = rl_peek(l, k, n, 0, 1000, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limit`: is 0; must be between 1 and 1000000000000000");
    st = rl_acquire(l, k, n, (uint64_t)-1, 1000, 1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `limit`: is 18446744073709551615; must be between 1 and 1000000000000000");

    /* Costs. */
    st = rl_acquire(l, k, n, 10, 1000, 0, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `cost`: is 0; must be at least 1");
    st = rl_acquire(l, k, n, 10, 1000, 11, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `cost`: is 11, above the limit 10: it could never be granted");
    st = rl_acquire(l, k, n, 10, 1000, (uint64_t)-1, &d, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `cost`: is 18446744073709551615, above the limit 10: it could never be granted");

    CHECK(memcmp(&d, &untouched, sizeof d) == 0, "a failed call wrote to *out");
    /* Nothing above reached the backend: the window is still empty. */
    CHECK(rl_peek(l, k, n, 10, 1000, &d, NULL) == RL_OK && d.used == 0, "used %" PRIu64 " after bad calls", d.used);
    rl_limiter_free(l);
}

static void test_bad_open(void) {
    rl_limiter *l = (rl_limiter *)&l; /* garbage: must be set to NULL on failure */
    rl_error *err = NULL;
    rl_options o = rl_options_default();
    rl_status st;

    st = rl_limiter_open(NULL, NULL, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
    CHECK(rl_limiter_open(NULL, NULL, NULL, NULL) == RL_INVALID_ARGUMENT, "NULL out, NULL err");

    st = rl_limiter_open("redis://127.0.0.1:6379/\xff\xfe", NULL, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `url`: is not valid UTF-8 (invalid byte at offset 23)");
    CHECK(l == NULL, "*out not NULL after a failed open");

    st = rl_limiter_open("http://127.0.0.1:6379/", NULL, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `url`: \"http://127.0.0.1:6379/\" is not a redis://, rediss://, redis+sentinel://, "
                 "redis+cluster:// or memory:// URL");
    st = rl_limiter_open("", NULL, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `url`: \"\" is not a redis://, rediss://, redis+sentinel://, redis+cluster:// or "
                 "memory:// URL");
    /* The password never shows in a message. */
    st = rl_limiter_open("nope://app:s3cret@127.0.0.1/", NULL, &l, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err && strstr(rl_error_message(err), "s3cret") == NULL, "%s",
          rl_error_message(err));
    rl_error_free(err);

    o.key_prefix = "rl:\xc3\x28";
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key_prefix`: is not valid UTF-8 (invalid byte at offset 3)");
    o.key_prefix = "rl:{x}:";
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `key_prefix`: \"rl:{x}:\" contains a brace; the hash tag must come from the user key");
    o = rl_options_default();
    o.connect_timeout_ms = 60001;
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `connect_timeout`: is 60001 ms; must be between 1 ms and 60 s");
    o = rl_options_default();
    o.request_timeout_ms = (uint64_t)-1;
    st = rl_limiter_open(NULL, &o, &l, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err && starts_with(rl_error_message(err), "invalid argument `request_timeout`"),
          "%s", rl_error_message(err));
    rl_error_free(err);

    /* struct_size: zero (not initialised), and larger than this library knows. */
    memset(&o, 0, sizeof o);
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `options`: struct_size is 0; initialise the struct with rl_options_default() or "
                 "set struct_size = sizeof(rl_options)");
    o = rl_options_default();
    o.struct_size = sizeof(rl_options) + 8;
    st = rl_limiter_open(NULL, &o, &l, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err && strstr(rl_error_message(err), "newer rl.h") != NULL, "%s",
          rl_error_message(err));
    rl_error_free(err);
    CHECK(l == NULL, "*out not NULL after a failed open");

    /* An rl_options size between the known versions. */
    o = rl_options_default();
    o.struct_size = 40;
    st = rl_limiter_open(NULL, &o, &l, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err && strstr(rl_error_message(err), "struct_size is 40, which is no version") != NULL,
          "%s", rl_error_message(err));
    rl_error_free(err);

    /* memory:// is the memory backend; "" prefix is allowed. */
    o = rl_options_default();
    o.key_prefix = "";
    CHECK(rl_limiter_open("memory://", &o, &l, &err) == RL_OK && l != NULL, "memory://: %s", rl_error_message(err));
    rl_decision d;
    CHECK(rl_acquire(l, (const uint8_t *)"k", 1, 1, 10, 1, &d, NULL) == RL_OK && d.mode == RL_MODE_MEMORY, "mode");
    rl_limiter_free(l);
}

/* Redis not listening, local fallback off: a bounded wait, then RL_BACKEND_UNAVAILABLE. */
static void test_backend_unavailable(void) {
    rl_options o = rl_options_default();
    o.connect_timeout_ms = 300;
    o.request_timeout_ms = 300;
    o.disable_local_fallback = true;
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    /* Port 1 on loopback: nothing listens there, so the connection is refused at once. */
    CHECK(rl_limiter_open("redis://127.0.0.1:1/", &o, &l, &err) == RL_OK, "open does no I/O: %s",
          rl_error_message(err));
    rl_decision d;
    uint64_t t0 = mono_ms();
    rl_status st = rl_acquire(l, (const uint8_t *)"k", 1, 10, 1000, 1, &d, &err);
    uint64_t took = mono_ms() - t0;
    CHECK(st == RL_BACKEND_UNAVAILABLE, "status %s: %s", rl_status_name((int)st), rl_error_message(err));
    CHECK(err && rl_error_code(err) == RL_BACKEND_UNAVAILABLE && starts_with(rl_error_message(err), "backend unavailable: "),
          "%s", rl_error_message(err));
    rl_error_free(err);
    CHECK(took < 5000, "waited %" PRIu64 " ms on a dead Redis (timeout 300 ms)", took);
    st = rl_ping(l, &err);
    CHECK(st == RL_BACKEND_UNAVAILABLE, "ping: %s", rl_status_name((int)st));
    rl_error_free(err);
    rl_stats s;
    s.struct_size = sizeof s;
    CHECK(rl_stats_get(l, &s, NULL) == RL_OK, "stats");
    /* (Not redis_errors: under valgrind the first call may reach its 300 ms deadline before the refusal.) */
    CHECK(s.mode == RL_MODE_NORMAL && s.decisions_local == 0 && s.transitions_to_local == 0,
          "no fallback: mode %s, local %" PRIu64 ", to_local %" PRIu64, rl_mode_name((int)s.mode), s.decisions_local,
          s.transitions_to_local);
    rl_limiter_free(l);
}

/* A loopback port nothing listens on (bound, read, closed), so a connection there is refused. */
static int free_port(void) {
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* Redis not listening, fallback on (the default): the first call is refused, retried once after
 * retry_delay, then decided locally (degrade_rtt is raised so only the errors can send it local); every later call is local at once. With instances = 4 the
 * local budget of a limit of 100 is 25. */
static void test_local_fallback(void) {
    char url[64];
    int port = free_port();
    CHECK(port > 0, "no free port");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/", port);
    rl_options o = rl_options_default();
    o.connect_timeout_ms = 10000;
    o.request_timeout_ms = 10000;
    o.retry_delay_ms = 20;
    o.instances = 4;
    /* This test is about the error path: a slow first connect (valgrind) must not win through the
     * slow-RTT rule before the refusal and its retry are counted. */
    o.degrade_rtt_ms = 60000;
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    CHECK(rl_limiter_open(url, &o, &l, &err) == RL_OK, "open: %s", rl_error_message(err));
    if (!l) return;
    char key[128];
    size_t n = unique_key(key, sizeof key, "fallback");
    const uint8_t *k = (const uint8_t *)key;
    rl_decision d;
    uint64_t t0 = mono_ms();
    rl_status st = rl_acquire(l, k, n, 100, 60000, 1, &d, &err);
    uint64_t first_ms = mono_ms() - t0;
    CHECK(st == RL_OK, "first acquire: %s %s", rl_status_name((int)st), rl_error_message(err));
    CHECK(first_ms >= 20 && first_ms < 5000, "first acquire took %" PRIu64 " ms (retry_delay 20 ms)", first_ms);
    CHECK(d.allowed && d.mode == RL_MODE_LOCAL && d.used == 1 && d.remaining == 24,
          "first: allowed=%d mode=%s used=%" PRIu64 " remaining=%" PRIu64, d.allowed, rl_mode_name((int)d.mode), d.used,
          d.remaining);
    int allowed = d.allowed ? 1 : 0;
    for (int i = 2; i <= 25; i++) {
        st = rl_acquire(l, k, n, 100, 60000, 1, &d, NULL);
        CHECK(st == RL_OK && d.allowed && d.mode == RL_MODE_LOCAL, "acquire %d: %s allowed=%d mode=%s", i,
              rl_status_name((int)st), d.allowed, rl_mode_name((int)d.mode));
        CHECK(d.used == (uint64_t)i && d.remaining == 25u - d.used, "acquire %d: used %" PRIu64 " remaining %" PRIu64, i,
              d.used, d.remaining);
        allowed += st == RL_OK && d.allowed;
    }
    CHECK(allowed == 25, "%d of the local budget 25 allowed", allowed);
    st = rl_acquire(l, k, n, 100, 60000, 1, &d, NULL);
    CHECK(st == RL_OK && !d.allowed && d.mode == RL_MODE_LOCAL && d.used == 25 && d.remaining == 0,
          "26th: allowed=%d used=%" PRIu64 " remaining=%" PRIu64, d.allowed, d.used, d.remaining);
    CHECK(d.retry_after_ms > 0 && d.retry_after_ms <= 60000, "26th: retry_after_ms %" PRIu64, d.retry_after_ms);

    rl_stats s;
    memset(&s, 0xa5, sizeof s);
    s.struct_size = sizeof s;
    CHECK(rl_stats_get(l, &s, &err) == RL_OK, "stats: %s", rl_error_message(err));
    CHECK(s.struct_size == sizeof s, "struct_size changed to %zu", s.struct_size);
    CHECK(s.mode == RL_MODE_LOCAL, "mode %s", rl_mode_name((int)s.mode));
    CHECK(strcmp(s.topology, "standalone") == 0, "topology %.16s", s.topology);
    CHECK(s.decisions_local == 26 && s.decisions_normal == 0 && s.decisions_memory == 0,
          "decisions local %" PRIu64 " normal %" PRIu64 " memory %" PRIu64, s.decisions_local, s.decisions_normal,
          s.decisions_memory);
    CHECK(s.transitions_to_local == 1 && s.transitions_to_normal == 0, "transitions %" PRIu64 "/%" PRIu64,
          s.transitions_to_local, s.transitions_to_normal);
    CHECK(s.redis_errors >= 1 && s.retries >= 1, "errors %" PRIu64 " retries %" PRIu64, s.redis_errors, s.retries);
    CHECK(s.instances == 4, "instances %" PRIu64, s.instances);
    CHECK(s.local_keys == 1, "local_keys %" PRIu64, s.local_keys);
    CHECK(memchr(s.state_reason, '\0', sizeof s.state_reason) != NULL && s.state_reason[0] != '\0', "state_reason");
    CHECK(memchr(s.topology, '\0', sizeof s.topology) != NULL, "topology not terminated");
    printf("    local: state \"%s\" for %" PRIu64 " ms, %" PRIu64 " errors, %" PRIu64 " retries, %" PRIu64 " probes\n",
           s.state_reason, s.state_ms, s.redis_errors, s.retries, s.probes);
    rl_limiter_free(l);
}

/* rl_stats_get on the suite's backend: Redis decides (normal, round trips measured) or memory. */
static void test_stats(void) {
    rl_limiter *l = open_or_die();
    char key[128];
    size_t n = unique_key(key, sizeof key, "stats");
    const uint8_t *k = (const uint8_t *)key;
    rl_decision d;
    rl_stats s;
    memset(&s, 0xa5, sizeof s);
    s.struct_size = sizeof s;
    rl_error *err = (rl_error *)&err; /* garbage in: must be overwritten with NULL on success */
    CHECK(rl_stats_get(l, &s, &err) == RL_OK && err == NULL, "stats before any call");
    CHECK(s.decisions_normal == 0 && s.decisions_local == 0 && s.decisions_memory == 0, "fresh limiter counts decisions");
    rl_reset(l, k, n, NULL);
    for (int i = 0; i < 5; i++)
        CHECK(rl_acquire(l, k, n, 3, 60000, 1, &d, NULL) == RL_OK, "acquire %d", i);
    CHECK(rl_stats_get(l, &s, &err) == RL_OK, "stats: %s", rl_error_message(err));
    CHECK(s.mode == expected_mode(), "mode %s", rl_mode_name((int)s.mode));
    if (g_url) {
        CHECK(strcmp(s.topology, "standalone") == 0, "topology %.16s", s.topology);
        CHECK(s.decisions_normal == 5 && s.decisions_local == 0 && s.decisions_memory == 0,
              "decisions normal %" PRIu64 " local %" PRIu64, s.decisions_normal, s.decisions_local);
        CHECK(s.rtt_samples > 0 && s.rtt_max_us >= s.rtt_p50_us && s.rtt_max_us > 0, "rtt samples %" PRIu64 " max %" PRIu64,
              s.rtt_samples, s.rtt_max_us);
        CHECK(s.transitions_to_local == 0 && s.redis_errors == 0, "to_local %" PRIu64 " errors %" PRIu64,
              s.transitions_to_local, s.redis_errors);
        CHECK(s.instances >= 1, "instances %" PRIu64, s.instances);
    } else {
        CHECK(strcmp(s.topology, "memory") == 0, "topology %.16s", s.topology);
        CHECK(s.decisions_memory == 5 && s.decisions_normal == 0 && s.decisions_local == 0, "decisions memory %" PRIu64,
              s.decisions_memory);
        CHECK(s.rtt_samples == 0, "rtt samples %" PRIu64, s.rtt_samples);
    }
    CHECK(memchr(s.state_reason, '\0', sizeof s.state_reason) != NULL, "state_reason not terminated");
    printf("    %s: mode %s, state \"%s\", rtt p50 %" PRIu64 " us, p99 %" PRIu64 " us over %" PRIu64 " samples\n",
           s.topology, rl_mode_name((int)s.mode), s.state_reason, s.rtt_p50_us, s.rtt_p99_us, s.rtt_samples);

    /* Bad calls: NULL pointers and a struct_size this library does not know; *out untouched. */
    rl_status st = rl_stats_get(NULL, &s, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limiter`: must not be NULL");
    st = rl_stats_get(l, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
    CHECK(rl_stats_get(NULL, NULL, NULL) == RL_INVALID_ARGUMENT, "all NULL");
    memset(&s, 0, sizeof s);
    st = rl_stats_get(l, &s, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `out`: struct_size is 0; set out->struct_size = sizeof(rl_stats) before the call");
    CHECK(s.decisions_normal == 0 && s.decisions_memory == 0 && s.topology[0] == 0, "a failed call wrote to *out");
    s.struct_size = sizeof s + 8;
    st = rl_stats_get(l, &s, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err && strstr(rl_error_message(err), "newer rl.h") != NULL, "%s",
          rl_error_message(err));
    rl_error_free(err);
    rl_reset(l, k, n, NULL);
    rl_limiter_free(l);
}

/* The new options' rules are the core's: RL_INVALID_ARGUMENT naming the option. */
static void test_bad_fallback_options(void) {
    rl_limiter *l = (rl_limiter *)&l;
    rl_error *err = NULL;
    rl_status st;
    rl_options o = rl_options_default();
    o.recover_rtt_ms = 10; /* above the default degrade_rtt of 5 ms */
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `recover_rtt`: is 10 ms, above degrade_rtt (5 ms): recovery must demand a faster "
                 "Redis than degradation tolerates");
    CHECK(l == NULL, "*out not NULL after a failed open");
    o = rl_options_default();
    o.degrade_rtt_ms = 20;
    o.recover_rtt_ms = 30;
    st = rl_limiter_open("redis://127.0.0.1:1/", &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `recover_rtt`: is 30 ms, above degrade_rtt (20 ms): recovery must demand a faster "
                 "Redis than degradation tolerates");
    o = rl_options_default();
    o.instances = 1000001;
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `instances`: is 1000001; must be between 1 and 1000000");
    o.instances = (uint64_t)-1;
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `instances`: is 18446744073709551615; must be between 1 and 1000000");
    o = rl_options_default();
    o.local_max_keys = 10000001;
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `local_max_keys`: is 10000001; must be between 1 and 10000000");
    o = rl_options_default();
    o.degrade_after_ms = 60001;
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `degrade_after`: is 60001 ms; must be between 1 ms and 60 s");
    o = rl_options_default();
    o.recover_after_ms = (uint64_t)-2;
    st = rl_limiter_open(NULL, &o, &l, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err && starts_with(rl_error_message(err), "invalid argument `recover_after`: is "),
          "%s", rl_error_message(err));
    rl_error_free(err);
    o = rl_options_default();
    o.degrade_rtt_ms = 60001;
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `degrade_rtt`: is 60001 ms; must be between 1 ms and 60 s");
    /* The retry delay is at most 60 s; one longer than the request timeout means no retry. */
    o = rl_options_default();
    o.retry_delay_ms = 60001;
    st = rl_limiter_open(NULL, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `retry_delay`: is 60001 ms; at most 60 s");
    o = rl_options_default();
    o.request_timeout_ms = 20;
    CHECK(rl_limiter_open(NULL, &o, &l, &err) == RL_OK, "a 20 ms timeout with the default retry delay: %s", rl_error_message(err));
    rl_limiter_free(l);
    o.retry_delay_ms = RL_RETRY_IMMEDIATELY;
    CHECK(rl_limiter_open(NULL, &o, &l, &err) == RL_OK, "retry at once with a 20 ms timeout: %s", rl_error_message(err));
    rl_limiter_free(l);
    /* Every new option at a valid non-default value. */
    o = rl_options_default();
    o.retry_delay_ms = 10;
    o.disable_local_fallback = true;
    o.degrade_rtt_ms = 50;
    o.degrade_after_ms = 200;
    o.recover_rtt_ms = 10;
    o.recover_after_ms = 1000;
    o.instances = 3;
    o.local_max_keys = 100;
    CHECK(rl_limiter_open("redis://127.0.0.1:1/", &o, &l, &err) == RL_OK, "valid options: %s", rl_error_message(err));
    rl_limiter_free(l);
}

/* A program compiled against version 1 of rl_options (four fields, no fallback options) keeps
 * working: only its bytes are read (the struct is on the heap, so valgrind would see an overread),
 * and the fallback options take their defaults: fallback on, retry after 50 ms. */
struct rl_options_v1 {
    size_t struct_size;
    const char *key_prefix;
    uint64_t connect_timeout_ms;
    uint64_t request_timeout_ms;
};

static void test_old_options_struct(void) {
    struct rl_options_v1 *v1 = malloc(sizeof *v1);
    v1->struct_size = sizeof *v1;
    v1->key_prefix = "old:";
    v1->connect_timeout_ms = 5000;
    v1->request_timeout_ms = 5000;
    CHECK(sizeof *v1 < sizeof(rl_options), "version 1 is smaller");
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/", free_port());
    CHECK(rl_limiter_open(url, (const rl_options *)v1, &l, &err) == RL_OK, "version 1 struct: %s", rl_error_message(err));
    rl_decision d;
    rl_status st = rl_acquire(l, (const uint8_t *)"k", 1, 10, 1000, 1, &d, &err);
    CHECK(st == RL_OK && d.allowed && d.mode == RL_MODE_LOCAL, "defaults: fallback on: %s %s mode=%s",
          rl_status_name((int)st), rl_error_message(err), st == RL_OK ? rl_mode_name((int)d.mode) : "-");
    rl_limiter_free(l);
    /* Version 1 with the memory backend, and a bad value in it still named. */
    l = NULL;
    CHECK(rl_limiter_open(NULL, (const rl_options *)v1, &l, &err) == RL_OK, "memory: %s", rl_error_message(err));
    rl_limiter_free(l);
    v1->connect_timeout_ms = 60001;
    st = rl_limiter_open(NULL, (const rl_options *)v1, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `connect_timeout`: is 60001 ms; must be between 1 ms and 60 s");
    free(v1);
}

/* One RESP command over a fresh socket to the test Redis; returns the reply's first byte. */
static char redis_command(const char *port, int argc, const char **argv) {
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)atoi(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0) close(fd);
        return 0;
    }
    char buf[1024];
    int len = snprintf(buf, sizeof buf, "*%d\r\n", argc);
    for (int i = 0; i < argc; i++)
        len += snprintf(buf + len, sizeof buf - (size_t)len, "$%zu\r\n%s\r\n", strlen(argv[i]), argv[i]);
    char reply = 0;
    if (write(fd, buf, (size_t)len) == len && read(fd, buf, sizeof buf) > 0) reply = buf[0];
    close(fd);
    return reply;
}

/* Something else stored at the key: Redis answers with an error, which is RL_BACKEND_ERROR. */
static void test_backend_error(void) {
    const char *port = getenv("RL_TEST_REDIS_PORT");
    CHECK(port != NULL, "RL_TEST_REDIS_PORT is not set");
    if (!port) return;
    char user_key[96], redis_key[128];
    unique_key(user_key, sizeof user_key, "wrongtype");
    snprintf(redis_key, sizeof redis_key, "rl:{%s}", user_key);
    const char *set[] = {"SET", redis_key, "not a window"};
    CHECK(redis_command(port, 3, set) == '+', "SET %s", redis_key);
    rl_limiter *l = open_or_die();
    rl_decision d;
    rl_error *err = NULL;
    rl_status st = rl_acquire(l, (const uint8_t *)user_key, strlen(user_key), 10, 1000, 1, &d, &err);
    CHECK(st == RL_BACKEND_ERROR, "status %s: %s", rl_status_name((int)st), rl_error_message(err));
    CHECK(err && starts_with(rl_error_message(err), "backend error: "), "%s", rl_error_message(err));
    rl_error_free(err);
    CHECK(rl_reset(l, (const uint8_t *)user_key, strlen(user_key), NULL) == RL_OK, "reset clears the wrong type");
    CHECK(rl_acquire(l, (const uint8_t *)user_key, strlen(user_key), 10, 1000, 1, &d, NULL) == RL_OK && d.allowed,
          "after reset");
    rl_reset(l, (const uint8_t *)user_key, strlen(user_key), NULL);
    rl_limiter_free(l);
}

/* A child process keeps using a handle opened before fork(): the library builds a new runtime and
 * Redis connection in the child. The child's window is the shared one on Redis; the memory
 * backend is per process, so the child starts with empty windows there. */
static void test_fork_child_uses_handle(void) {
    rl_limiter *l = open_or_die();
    char key[128];
    size_t n = unique_key(key, sizeof key, "fork");
    const uint8_t *k = (const uint8_t *)key;
    rl_decision d;
    rl_reset(l, k, n, NULL);
    CHECK(rl_acquire(l, k, n, 10, 60000, 1, &d, NULL) == RL_OK && d.used == 1, "parent before fork");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        rl_error *err = NULL;
        rl_status st = rl_acquire(l, k, n, 10, 60000, 1, &d, &err);
        int ok = st == RL_OK && d.allowed && d.used == (g_url ? 2u : 1u) && d.mode == expected_mode();
        if (!ok) fprintf(stderr, "    child: %s %s used=%" PRIu64 "\n", rl_status_name((int)st), rl_error_message(err), d.used);
        rl_error_free(err);
        rl_limiter_free(l);
        _exit(ok ? 0 : 1);
    }
    CHECK(pid > 0, "fork failed");
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    /* Redis: the child's permit counts here too. Memory: the child's windows were its own. */
    CHECK(rl_acquire(l, k, n, 10, 60000, 1, &d, NULL) == RL_OK && d.used == (g_url ? 3u : 2u),
          "parent after fork: used %" PRIu64, d.used);
    rl_reset(l, k, n, NULL);
    rl_limiter_free(l);
}

/* The instance id as a string ("" for memory); exits the test process on failure. */
static void instance_id(const rl_limiter *l, char *buf, size_t cap) {
    rl_error *err = NULL;
    size_t len = 0;
    rl_status st = rl_instance_id(l, buf, cap, &len, &err);
    CHECK(st == RL_OK && strlen(buf) == len, "rl_instance_id: %s %s", rl_status_name((int)st), rl_error_message(err));
    rl_error_free(err);
    if (st != RL_OK) buf[0] = '\0';
}

/* rl_instance_id's contract: NULL arguments and a short buffer are named, the needed length is
 * reported; the memory backend has none (""). */
static void test_instance_id(void) {
    rl_limiter *l = open_or_die();
    char id[256];
    instance_id(l, id, sizeof id);
    CHECK(g_url ? strlen(id) > 0 : strlen(id) == 0, "id \"%s\"", id);
    rl_error *err = NULL;
    size_t len = 12345;
    char small[2] = {'x', 'x'};
    rl_status st = rl_instance_id(l, small, 0, &len, &err);
    if (g_url) {
        EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, NULL);
        CHECK(len == strlen(id), "len %zu for an id of %zu bytes", len, strlen(id));
        CHECK(small[0] == 'x', "a failed call wrote to buf");
    } else {
        EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `cap`: is 0 bytes; the instance id and its NUL need 1");
    }
    st = rl_instance_id(l, NULL, 16, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `buf`: must not be NULL");
    st = rl_instance_id(NULL, id, sizeof id, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limiter`: must not be NULL");
    rl_limiter_free(l);
}

/* A prefix of its own, so the fleet's heartbeat set (`<prefix>instances`) holds only this test's
 * limiters, not the ones other tests opened on the same Redis in the last seconds. */
static rl_options fleet_options(char *prefix, size_t cap, const char *name) {
    snprintf(prefix, cap, "ctest:%ld:%s:", (long)getpid(), name);
    rl_options o = test_options();
    o.key_prefix = prefix;
    return o;
}

/* Reads the `instances` a limiter discovered until it is `want` (heartbeats are sent once a
 * second), at most `ms`; returns the last value seen. */
static uint64_t wait_instances(const rl_limiter *l, uint64_t want, uint64_t ms) {
    uint64_t end = mono_ms() + ms, got = 0;
    for (;;) {
        rl_stats s;
        memset(&s, 0, sizeof s);
        s.struct_size = sizeof s;
        if (rl_stats_get(l, &s, NULL) == RL_OK) got = s.instances;
        if (got == want || mono_ms() >= end) return got;
        sleep_ms(20);
    }
}

/* A limiter opened (and used) before fork() is a new instance in the child (issue 11, defect 1):
 * its own id, so its own heartbeat (the fleet counts parent + child = 2, and each local share is
 * limit/2) and its own repair tokens (`<id>:<flush>`). A twin of the parent would count as one
 * instance, and its repairs would collide with the parent's. */
static void test_fork_child_is_a_new_instance(void) {
    char prefix[96];
    rl_options o = fleet_options(prefix, sizeof prefix, "fork-id");
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    CHECK(rl_limiter_open(g_url, &o, &l, &err) == RL_OK, "open: %s", rl_error_message(err));
    if (!l) return;
    char key[128], parent_id[256];
    size_t n = unique_key(key, sizeof key, "fork-id");
    const uint8_t *k = (const uint8_t *)key;
    rl_decision d;
    /* The first call starts the heartbeats: the parent is a live instance. */
    CHECK(rl_acquire(l, k, n, 10, 60000, 1, &d, NULL) == RL_OK && d.allowed, "parent's acquire");
    instance_id(l, parent_id, sizeof parent_id);
    int fds[2];
    CHECK(pipe(fds) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        char id[256] = "";
        uint64_t seen = 0;
        if (rl_acquire(l, k, n, 10, 60000, 1, &d, NULL) == RL_OK) {
            instance_id(l, id, sizeof id);
            seen = wait_instances(l, 2, 5000);
        }
        char line[320];
        int len = snprintf(line, sizeof line, "%" PRIu64 " %s", seen, id);
        int ok = write(fds[1], line, (size_t)len) == len;
        _exit(ok && g_failed_checks == 0 ? 0 : 1);
    }
    CHECK(pid > 0, "fork failed");
    close(fds[1]);
    char got[320] = "";
    size_t have = 0;
    ssize_t r;
    while (have < sizeof got - 1 && (r = read(fds[0], got + have, sizeof got - 1 - have)) > 0) have += (size_t)r;
    close(fds[0]);
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
    uint64_t child_sees = strtoull(got, NULL, 10);
    const char *child_id = strchr(got, ' ') ? strchr(got, ' ') + 1 : "";
    CHECK(strlen(child_id) > 0 && strcmp(child_id, parent_id) != 0, "the child's instance id \"%s\", the parent's \"%s\"",
          child_id, parent_id);
    CHECK(child_sees == 2, "the child discovered %" PRIu64 " instances (parent + child: 2)", child_sees);
    rl_reset(l, k, n, NULL);
    rl_limiter_free(l);
}

/* ---- fork() while 8 threads are inside rl calls (issue 11, defect 2) ---------------------- */

struct hammer {
    rl_limiter *l;
    const uint8_t *key;
    size_t key_len;
    volatile int stop;
    long calls, errors;
};

static void *hammer_worker(void *arg) {
    struct hammer *h = arg;
    rl_decision d;
    while (!__atomic_load_n(&h->stop, __ATOMIC_RELAXED)) {
        rl_status st = rl_acquire(h->l, h->key, h->key_len, 1000000000u, 60000, 1, &d, NULL);
        __atomic_fetch_add(st == RL_OK ? &h->calls : &h->errors, 1, __ATOMIC_RELAXED);
    }
    return NULL;
}

/* Waits up to `ms` for a child; a child still running then is killed and counted as hung. */
static int wait_child(pid_t pid, uint64_t ms, int *status) {
    uint64_t end = mono_ms() + ms;
    for (;;) {
        pid_t p = waitpid(pid, status, WNOHANG);
        if (p == pid) return 1;
        if (p < 0 || mono_ms() >= end) break;
        sleep_ms(1);
    }
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    return 0;
}

/* 200 forks, each while 8 threads call rl_acquire on the same handle and key (and, for Redis, the
 * limiter's background task heartbeats or probes): a lock one of them held at the instant of
 * fork() must not hang the child, which makes one call and leaves. Stops after 3 hung children.
 * `want`: the mode the limiter decides in (Redis, local fallback or memory). */
static void fork_while_busy(const char *url, rl_mode want) {
    rl_options o = test_options();
    o.request_timeout_ms = 5000; /* a hung child is one that never returns, not a slow call */
    o.retry_delay_ms = 1;
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    CHECK(rl_limiter_open(url, &o, &l, &err) == RL_OK, "open: %s", rl_error_message(err));
    if (!l) return;
    char key[128];
    size_t n = unique_key(key, sizeof key, "fork-busy");
    struct hammer h = {l, (const uint8_t *)key, n, 0, 0, 0};
    rl_decision d;
    CHECK(rl_acquire(l, h.key, n, 1000000000u, 60000, 1, &d, NULL) == RL_OK && d.mode == want, "first acquire: mode %s",
          rl_mode_name((int)d.mode));
    pthread_t tids[8];
    for (int i = 0; i < 8; i++) pthread_create(&tids[i], NULL, hammer_worker, &h);
    sleep_ms(50);
    int forks = 0, hung = 0, failed = 0;
    char first_failure[160] = "";
    for (int i = 0; i < 200 && hung < 3; i++) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            rl_status st = rl_acquire(l, h.key, n, 1000000000u, 60000, 1, &d, NULL);
            _exit(st == RL_OK && d.allowed ? 0 : 1);
        }
        if (pid < 0) {
            CHECK(pid > 0, "fork %d failed: %s", i, strerror(errno));
            break;
        }
        forks++;
        int status = 0;
        if (!wait_child(pid, 10000, &status)) {
            hung++;
            if (!first_failure[0]) snprintf(first_failure, sizeof first_failure, "child %d (pid %ld) hung for 10 s", i, (long)pid);
        } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            failed++;
            if (!first_failure[0]) snprintf(first_failure, sizeof first_failure, "child %d: status %d", i, status);
        }
        sleep_ms(2);
    }
    __atomic_store_n(&h.stop, 1, __ATOMIC_RELAXED);
    for (int i = 0; i < 8; i++) pthread_join(tids[i], NULL);
    printf("    %s: %d forks while 8 threads made %ld calls (%ld errors): %d hung, %d failed\n", rl_mode_name((int)want), forks, h.calls, h.errors, hung,
           failed);
    CHECK(hung == 0 && failed == 0, "%d of %d children hung, %d failed; first: %s", hung, forks, failed, first_failure);
    CHECK(h.errors == 0, "%ld calls of the threads failed", h.errors);
    rl_reset(l, h.key, n, NULL);
    rl_limiter_free(l);
}

static void test_fork_while_threads_mid_call(void) { fork_while_busy(g_url, expected_mode()); }

/* The same with nothing listening at the URL: every decision is local, on the fallback's record. */
static void test_fork_while_threads_mid_call_local(void) {
    char url[64];
    int port = free_port();
    CHECK(port > 0, "no free port");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/", port);
    fork_while_busy(url, RL_MODE_LOCAL);
}

/* ---- 8 threads, one handle, one key, 3x the limit offered for 3 windows ------------------- */

struct exact_shared {
    rl_limiter *l;
    const uint8_t *key;
    size_t key_len;
    uint64_t limit, window, start_ms, interval_us;
    int per_thread;
};

struct exact_thread {
    struct exact_shared *s;
    int index;
    uint64_t *admitted_at; /* now_ms of each admitted call */
    int admitted, denied, errors, bad_decisions;
    char first_error[256];
};

static void *exact_worker(void *arg) {
    struct exact_thread *t = arg;
    struct exact_shared *s = t->s;
    for (int i = 0; i < s->per_thread; i++) {
        /* Paced on an absolute schedule, threads interleaved: offered load is even in time. */
        uint64_t slot = (uint64_t)i * (uint64_t)g_threads + (uint64_t)t->index;
        uint64_t due_ms = s->start_ms + slot * s->interval_us / 1000u;
        uint64_t now = mono_ms();
        if (due_ms > now) sleep_ms(due_ms - now);
        rl_decision d;
        rl_error *err = NULL;
        rl_status st = rl_acquire(s->l, s->key, s->key_len, s->limit, s->window, 1, &d, &err);
        if (st != RL_OK) {
            if (t->errors++ == 0)
                snprintf(t->first_error, sizeof t->first_error, "%s: %s", rl_status_name((int)st), rl_error_message(err));
            rl_error_free(err);
            continue;
        }
        if (d.used > s->limit || d.remaining != s->limit - d.used || d.mode != expected_mode() ||
            (d.allowed && d.retry_after_ms != 0) || (!d.allowed && d.retry_after_ms == 0))
            t->bad_decisions++;
        if (d.allowed)
            t->admitted_at[t->admitted++] = d.now_ms;
        else
            t->denied++;
    }
    return NULL;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void test_threads_exact(void) {
    rl_limiter *l = open_or_die();
    char key[128];
    size_t n = unique_key(key, sizeof key, "threads");
    rl_reset(l, (const uint8_t *)key, n, NULL);

    const int windows = 3;
    uint64_t offered = 3 * g_exact_limit * (uint64_t)windows; /* 3x the limit in each of 3 windows */
    struct exact_shared s = {
        .l = l,
        .key = (const uint8_t *)key,
        .key_len = n,
        .limit = g_exact_limit,
        .window = g_exact_window,
        .per_thread = (int)((offered + (uint64_t)g_threads - 1) / (uint64_t)g_threads),
    };
    uint64_t total_calls = (uint64_t)s.per_thread * (uint64_t)g_threads;
    s.interval_us = g_exact_window * (uint64_t)windows * 1000u / total_calls;
    s.start_ms = mono_ms() + 20;

    struct exact_thread *ts = calloc((size_t)g_threads, sizeof *ts);
    pthread_t *tids = calloc((size_t)g_threads, sizeof *tids);
    for (int i = 0; i < g_threads; i++) {
        ts[i].s = &s;
        ts[i].index = i;
        ts[i].admitted_at = calloc((size_t)s.per_thread, sizeof(uint64_t));
        CHECK(pthread_create(&tids[i], NULL, exact_worker, &ts[i]) == 0, "pthread_create");
    }
    uint64_t *all = calloc(total_calls, sizeof(uint64_t));
    size_t admitted = 0;
    int denied = 0, errors = 0, bad = 0;
    for (int i = 0; i < g_threads; i++) {
        pthread_join(tids[i], NULL);
        memcpy(all + admitted, ts[i].admitted_at, (size_t)ts[i].admitted * sizeof(uint64_t));
        admitted += (size_t)ts[i].admitted;
        denied += ts[i].denied;
        bad += ts[i].bad_decisions;
        if (ts[i].errors && errors == 0) fprintf(stderr, "    thread %d: %s\n", i, ts[i].first_error);
        errors += ts[i].errors;
        free(ts[i].admitted_at);
    }
    /* The most admissions inside any span of `window` ms: a call at t counts until t + window. */
    qsort(all, admitted, sizeof(uint64_t), cmp_u64);
    uint64_t max_in_window = 0;
    for (size_t hi = 0, lo = 0; hi < admitted; hi++) {
        while (all[lo] + g_exact_window <= all[hi]) lo++;
        if (hi - lo + 1 > max_in_window) max_in_window = hi - lo + 1;
    }
    uint64_t span = admitted ? all[admitted - 1] - all[0] : 0;
    printf("    %d threads, limit %" PRIu64 " / %" PRIu64 " ms: offered %" PRIu64 ", admitted %zu, denied %d, "
           "errors %d; max admitted in any window %" PRIu64 " (server-time span %" PRIu64 " ms)\n",
           g_threads, g_exact_limit, g_exact_window, total_calls, admitted, denied, errors, max_in_window, span);
    CHECK(errors == 0, "%d calls failed", errors);
    CHECK(bad == 0, "%d decisions broke an invariant (used <= limit, remaining = limit - used, mode, retry_after)", bad);
    CHECK(max_in_window == g_exact_limit, "max admitted in a window %" PRIu64 ", limit %" PRIu64, max_in_window,
          g_exact_limit);
    /* Every window was saturated, so well over two windows' worth got in (and never more than 4). */
    CHECK(admitted >= 2 * g_exact_limit && admitted <= 4 * g_exact_limit, "admitted %zu of limit %" PRIu64, admitted,
          g_exact_limit);
    free(all);
    free(ts);
    free(tids);
    rl_reset(l, (const uint8_t *)key, n, NULL);
    rl_limiter_free(l);
}

/* Handles opened, shared and freed from many threads at once; nothing leaks (under valgrind). */
static void *churn_worker(void *arg) {
    int *failures = arg;
    for (int i = 0; i < 5; i++) {
        rl_options o = test_options();
        rl_limiter *l = NULL;
        rl_error *err = NULL;
        if (rl_limiter_open(g_url, &o, &l, &err) != RL_OK) {
            (*failures)++;
            rl_error_free(err);
            continue;
        }
        char key[96];
        size_t n = unique_key(key, sizeof key, "churn");
        rl_decision d;
        if (rl_acquire(l, (const uint8_t *)key, n, 1000000, 1000, 1, &d, NULL) != RL_OK) (*failures)++;
        /* An error made and dropped on every round. */
        if (rl_acquire(l, (const uint8_t *)key, n, 0, 1000, 1, &d, &err) != RL_INVALID_ARGUMENT) (*failures)++;
        rl_error_free(err);
        rl_limiter_free(l);
    }
    return NULL;
}

static void test_open_free_from_threads(void) {
    pthread_t tids[4];
    int failures[4] = {0};
    for (int i = 0; i < 4; i++) pthread_create(&tids[i], NULL, churn_worker, &failures[i]);
    for (int i = 0; i < 4; i++) pthread_join(tids[i], NULL);
    for (int i = 0; i < 4; i++) CHECK(failures[i] == 0, "thread %d: %d failures", i, failures[i]);
    rl_limiter *l = open_or_die();
    char key[96];
    size_t n = unique_key(key, sizeof key, "churn");
    rl_reset(l, (const uint8_t *)key, n, NULL);
    rl_limiter_free(l);
}

/* ---- main --------------------------------------------------------------------------------- */

struct test {
    const char *name;
    void (*run)(void);
    int redis_only;
};

static const struct test TESTS[] = {
    {"version", test_version, 0},
    {"names", test_names, 0},
    {"options_default", test_options_default, 0},
    {"null_safe_frees", test_null_safe_frees, 0},
    {"open_and_decide", test_open_and_decide, 0},
    {"retry_after_is_honest", test_retry_after_is_honest, 0},
    {"binary_keys", test_binary_keys, 0},
    {"key_size_bounds", test_key_size_bounds, 0},
    {"bad_arguments", test_bad_arguments, 0},
    {"bad_open", test_bad_open, 0},
    {"backend_unavailable", test_backend_unavailable, 0},
    {"local_fallback", test_local_fallback, 0},
    {"stats", test_stats, 0},
    {"bad_fallback_options", test_bad_fallback_options, 0},
    {"old_options_struct", test_old_options_struct, 0},
    {"backend_error", test_backend_error, 1},
    {"open_free_from_threads", test_open_free_from_threads, 0},
    {"fork_child_uses_handle", test_fork_child_uses_handle, 0},
    {"instance_id", test_instance_id, 0},
    {"fork_child_is_a_new_instance", test_fork_child_is_a_new_instance, 1},
    {"fork_while_threads_mid_call", test_fork_while_threads_mid_call, 0},
    /* Needs no Redis, but once is enough: with the Redis suite. */
    {"fork_while_threads_mid_call_local", test_fork_while_threads_mid_call_local, 1},
    {"threads_exact", test_threads_exact, 0},
};

int main(int argc, char **argv) {
    const char *only = NULL;
    const char *skip[8];
    int nskip = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--backend") == 0 && v) g_backend = v, i++;
        else if (strcmp(a, "--limit") == 0 && v) g_exact_limit = strtoull(v, NULL, 10), i++;
        else if (strcmp(a, "--window-ms") == 0 && v) g_exact_window = strtoull(v, NULL, 10), i++;
        else if (strcmp(a, "--threads") == 0 && v) g_threads = atoi(v), i++;
        else if (strcmp(a, "--only") == 0 && v) only = v, i++;
        else if (strcmp(a, "--skip") == 0 && v && nskip < 8) skip[nskip++] = v, i++;
        else {
            fprintf(stderr, "usage: %s --backend redis|memory [--limit N] [--window-ms N] [--threads N] [--only NAME] [--skip NAME]...\n",
                    argv[0]);
            return 2;
        }
    }
    if (strcmp(g_backend, "redis") == 0) {
        g_url = getenv("RL_TEST_REDIS_URL");
        if (!g_url) {
            fprintf(stderr, "RL_TEST_REDIS_URL is not set: run under `rl-harness run -- ...`\n");
            return 2;
        }
    } else if (strcmp(g_backend, "memory") != 0) {
        fprintf(stderr, "--backend must be redis or memory\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("C suite, backend %s (%s)\n", g_backend, g_url ? g_url : "NULL url");
    int passed = 0, failed = 0;
    for (size_t i = 0; i < sizeof TESTS / sizeof TESTS[0]; i++) {
        const struct test *t = &TESTS[i];
        if (only && strcmp(only, t->name) != 0) continue;
        if (t->redis_only && !g_url) continue;
        int skipped = 0;
        for (int j = 0; j < nskip; j++) skipped |= strcmp(skip[j], t->name) == 0;
        if (skipped) {
            printf("skip %s/%s\n", g_backend, t->name);
            continue;
        }
        g_failed_checks = 0;
        uint64_t t0 = mono_ms();
        t->run();
        fflush(stderr);
        if (g_failed_checks == 0) {
            passed++;
            printf("ok   %s/%s (%" PRIu64 " ms)\n", g_backend, t->name, mono_ms() - t0);
        } else {
            failed++;
            printf("FAIL %s/%s: %d checks failed\n", g_backend, t->name, g_failed_checks);
        }
    }
    printf("RESULT passed=%d failed=%d\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
