/* rl_options: the core's rules through the struct, and older versions of the struct. */
#include "rl_test.h"

#include <stdbool.h>
#include <time.h>

/* C's own conventions for valid options (zero = default, RL_RETRY_IMMEDIATELY, the disable_ switch). */
void test_option_conventions(void) {
    rl_limiter *l = (rl_limiter *)&l;
    rl_error *err = NULL;
    /* Every invalid option is a row of tests/conformance/invalid.json (test_conformance.c). */
    rl_options o;
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

void test_old_options_struct(void) {
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
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `connect_timeout_ms`: is 60001 ms; must be between 1 and 60000 ms");
    free(v1);
}

/* Version 2 (up to local_max_keys, before client_clock): its fields are read, the later ones take
 * their defaults, and nothing past its size is read (on the heap, so valgrind would see it). */
struct rl_options_v2 {
    size_t struct_size;
    const char *key_prefix;
    uint64_t connect_timeout_ms;
    uint64_t request_timeout_ms;
    uint64_t retry_delay_ms;
    bool disable_local_fallback;
    uint64_t degrade_rtt_ms;
    uint64_t degrade_after_ms;
    uint64_t recover_rtt_ms;
    uint64_t recover_after_ms;
    uint64_t instances;
    uint64_t local_max_keys;
};

void test_options_v2_struct(void) {
    struct rl_options_v2 *v2 = calloc(1, sizeof *v2);
    v2->struct_size = sizeof *v2;
    v2->connect_timeout_ms = 10000;
    v2->request_timeout_ms = 10000;
    v2->retry_delay_ms = 1;
    v2->instances = 4;
    v2->degrade_rtt_ms = 60000;
    CHECK(sizeof *v2 < sizeof(rl_options), "version 2 is smaller");
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/", free_port());
    CHECK(rl_limiter_open(url, (const rl_options *)v2, &l, &err) == RL_OK, "version 2 struct: %s", rl_error_message(err));
    rl_decision d;
    rl_status st = rl_acquire(l, (const uint8_t *)"k", 1, 100, 60000, 1, &d, &err);
    /* instances = 4 was read: the local budget of 100 is 25. */
    CHECK(st == RL_OK && d.allowed && d.mode == RL_MODE_LOCAL && d.remaining == 24, "%s %s mode=%s remaining=%" PRIu64,
          rl_status_name((int)st), rl_error_message(err), st == RL_OK ? rl_mode_name((int)d.mode) : "-", d.remaining);
    rl_limiter_free(l);
    v2->disable_local_fallback = true;
    v2->local_max_keys = 10000001;
    st = rl_limiter_open(NULL, (const rl_options *)v2, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `local_max_keys`: is 10000001; must be between 1 and 10000000");
    free(v2);
}

/* client_clock (version 3): decisions on this host's clock, checked against Redis TIME within
 * max_clock_skew_ms; this host and the test Redis share a clock, so calls succeed. */
void test_client_clock(void) {
    rl_options o = test_options();
    o.client_clock = true;
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    CHECK(rl_limiter_open(g_url, &o, &l, &err) == RL_OK, "open: %s", rl_error_message(err));
    if (!l) return;
    char key[128];
    size_t n = unique_key(key, sizeof key, "client-clock");
    const uint8_t *k = (const uint8_t *)key;
    rl_decision d;
    rl_reset(l, k, n, NULL);
    for (uint64_t i = 1; i <= 3; i++) {
        rl_status st = rl_acquire(l, k, n, 2, 60000, 1, &d, &err);
        CHECK(st == RL_OK && d.mode == expected_mode() && d.allowed == (i <= 2) && d.used == (i <= 2 ? i : 2),
              "acquire %" PRIu64 ": %s %s allowed=%d used=%" PRIu64, i, rl_status_name((int)st), rl_error_message(err),
              d.allowed, d.used);
    }
    /* The decision's time is this host's clock (to within the test's own run time). */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t host_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
    CHECK(d.now_ms <= host_ms && host_ms - d.now_ms < 60000, "now_ms %" PRIu64 ", host %" PRIu64, d.now_ms, host_ms);
    rl_reset(l, k, n, NULL);
    rl_limiter_free(l);
    /* The skew bound is the core's option, named as the field. */
    o.max_clock_skew_ms = 2592000001ull;
    rl_status st = rl_limiter_open(g_url, &o, &l, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `max_clock_skew_ms`: is 2592000001 ms; must be between 0 and 2592000000 ms");
    o.max_clock_skew_ms = 5000;
    CHECK(rl_limiter_open(g_url, &o, &l, &err) == RL_OK, "max_clock_skew_ms 5000: %s", rl_error_message(err));
    rl_limiter_free(l);
}
