/* The API as a C program sees it: names, versions, opening, deciding, and bad arguments. */
#include "rl_test.h"

#include <unistd.h>

void test_version(void) {
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", RL_VERSION_MAJOR, RL_VERSION_MINOR, RL_VERSION_PATCH);
    CHECK(strcmp(rl_version(), RL_VERSION) == 0, "rl_version() %s vs RL_VERSION %s", rl_version(), RL_VERSION);
    CHECK(strcmp(want, RL_VERSION) == 0, "macros %s vs RL_VERSION %s", want, RL_VERSION);
}

void test_names(void) {
    CHECK(strcmp(rl_mode_name(RL_MODE_NORMAL), "normal") == 0, "%s", rl_mode_name(RL_MODE_NORMAL));
    CHECK(strcmp(rl_mode_name(RL_MODE_MEMORY), "memory") == 0, "%s", rl_mode_name(RL_MODE_MEMORY));
    CHECK(strcmp(rl_mode_name(RL_MODE_LOCAL), "local") == 0, "%s", rl_mode_name(RL_MODE_LOCAL));
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

void test_options_default(void) {
    rl_options o = rl_options_default();
    CHECK(o.struct_size == sizeof(rl_options), "struct_size %zu vs %zu", o.struct_size, sizeof(rl_options));
    CHECK(o.key_prefix == NULL, "key_prefix not NULL");
    CHECK(o.connect_timeout_ms == 0 && o.request_timeout_ms == 0, "timeouts not zero");
    CHECK(o.retry_delay_ms == 0 && !o.disable_local_fallback && o.degrade_rtt_ms == 0 && o.degrade_after_ms == 0 &&
              o.recover_rtt_ms == 0 && o.recover_after_ms == 0 && o.instances == 0 && o.local_max_keys == 0,
          "version 2 fields not zero");
    CHECK(!o.client_clock && o.max_clock_skew_ms == 0, "version 3 fields not zero");
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

void test_null_safe_frees(void) {
    rl_limiter_free(NULL);
    rl_limiter_free(NULL);
    rl_error_free(NULL);
    rl_error_free(NULL);
    CHECK(rl_error_code(NULL) == RL_OK, "rl_error_code(NULL)");
    CHECK(strcmp(rl_error_message(NULL), "") == 0, "rl_error_message(NULL)");
}

void test_open_and_decide(void) {
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

void test_retry_after_is_honest(void) {
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

void test_binary_keys(void) {
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

void test_key_size_bounds(void) {
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
    /* Keys over 64 KiB are rows of tests/conformance/invalid.json. */
    /* A length no buffer could have is refused before anything is read. */
    st = rl_acquire(l, key, SIZE_MAX, 1, 1000, 1, &d, &err);
    CHECK(st == RL_INVALID_ARGUMENT, "SIZE_MAX key_len: %s", rl_status_name((int)st));
    CHECK(err && starts_with(rl_error_message(err), "invalid argument `key`: is 18446744073709551615 bytes"), "%s",
          rl_error_message(err));
    rl_error_free(err);
    free(key);
    rl_limiter_free(l);
}

void test_bad_arguments(void) {
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

    /* Empty keys, bad windows, limits and costs, *out untouched and nothing written: the call
     * rows of tests/conformance/invalid.json (test_conformance.c). */
    CHECK(memcmp(&d, &untouched, sizeof d) == 0, "a failed call wrote to *out");
    rl_limiter_free(l);
}

void test_bad_open(void) {
    rl_limiter *l = (rl_limiter *)&l; /* garbage: must be set to NULL on failure */
    rl_error *err = NULL;
    rl_options o = rl_options_default();
    rl_status st;

    st = rl_limiter_open(NULL, NULL, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
    CHECK(rl_limiter_open(NULL, NULL, NULL, NULL) == RL_INVALID_ARGUMENT, "NULL out, NULL err");

    /* Bad URLs, prefixes and option values: the open rows of tests/conformance/invalid.json. */

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
