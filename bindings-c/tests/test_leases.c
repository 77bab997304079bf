/* Leases through the C API: decisions in RL_MODE_LEASE with the lease stats, and rl_limiter_close
 * returning unused leases at once, long before they would age out (lease_ms + window). */
#include "rl_test.h"

#define LEASE_LIMIT 100u
#define LEASE_WINDOW 60000u

static rl_limiter *open_leasing(void) {
    rl_options o = test_options();
    o.leases = "on";
    o.lease_ms = 10000;
    rl_limiter *l = NULL;
    rl_error *err = NULL;
    rl_status st = rl_limiter_open(g_url, &o, &l, &err);
    CHECK(st == RL_OK, "open with leases: %s", rl_error_message(err));
    rl_error_free(err);
    return l;
}

static uint64_t taken_by_another(const char *key, size_t n) {
    rl_limiter *b = open_or_die();
    rl_decision d;
    uint64_t got = 0;
    while (rl_acquire(b, (const uint8_t *)key, n, LEASE_LIMIT, LEASE_WINDOW, 1, &d, NULL) == RL_OK && d.allowed) {
        got++;
    }
    rl_limiter_free(b);
    return got;
}

void test_lease_mode_and_stats(void) {
    rl_limiter *a = open_leasing();
    if (!a) return;
    char key[128];
    size_t n = unique_key(key, sizeof key, "lease_mode");
    int leased = 0;
    for (int i = 0; i < 5; i++) {
        rl_decision d;
        CHECK(rl_acquire(a, (const uint8_t *)key, n, LEASE_LIMIT, LEASE_WINDOW, 1, &d, NULL) == RL_OK && d.allowed, "acquire");
        leased += d.mode == RL_MODE_LEASE;
    }
    CHECK(strcmp(rl_mode_name(RL_MODE_LEASE), "lease") == 0, "%s", rl_mode_name(RL_MODE_LEASE));
    rl_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK(rl_stats_get(a, &s, NULL) == RL_OK, "stats");
    if (g_url) {
        CHECK(leased >= 4, "%d of 5 decisions in mode lease", leased);
        CHECK(s.decisions_lease >= 4 && s.leases_taken == 1 && s.leased_permits >= 5 && s.lease_refunds == 0,
              "lease stats: decisions_lease %llu leases_taken %llu leased_permits %llu lease_refunds %llu",
              (unsigned long long)s.decisions_lease, (unsigned long long)s.leases_taken,
              (unsigned long long)s.leased_permits, (unsigned long long)s.lease_refunds);
    } else {
        /* The memory backend is one process holding every window: nothing to lease. */
        CHECK(leased == 0 && s.leases_taken == 0, "memory leased %d", leased);
    }
    CHECK(rl_limiter_close(a, NULL) == RL_OK, "close");
    rl_limiter_free(a);
}

void test_close_returns_leases(void) {
    rl_error *err = NULL;
    rl_status st = rl_limiter_close(NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limiter`: must not be NULL");
    rl_limiter *a = open_leasing();
    if (!a) return;
    char key[128];
    size_t n = unique_key(key, sizeof key, "lease_close");
    for (int i = 0; i < 3; i++) {
        rl_decision d;
        CHECK(rl_acquire(a, (const uint8_t *)key, n, LEASE_LIMIT, LEASE_WINDOW, 1, &d, NULL) == RL_OK && d.allowed, "acquire");
    }
    rl_stats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK(rl_stats_get(a, &s, NULL) == RL_OK, "stats");
    if (g_url) {
        CHECK(s.leased_permits > 3, "leased %llu", (unsigned long long)s.leased_permits);
        CHECK(taken_by_another(key, n) == LEASE_LIMIT - s.leased_permits, "the lease counts for everyone");
        CHECK(rl_reset(a, (const uint8_t *)key, n, NULL) == RL_OK, "reset");
        for (int i = 0; i < 3; i++) {
            rl_decision d;
            CHECK(rl_acquire(a, (const uint8_t *)key, n, LEASE_LIMIT, LEASE_WINDOW, 1, &d, NULL) == RL_OK && d.allowed, "acquire");
        }
    }
    CHECK(rl_limiter_close(a, &err) == RL_OK, "close: %s", rl_error_message(err));
    CHECK(err == NULL, "err set on success");
    CHECK(rl_limiter_close(a, NULL) == RL_OK, "close twice");
    if (g_url) {
        /* The lease would count for lease_ms + window (70 s); close gave back all but the 3 used. */
        uint64_t got = taken_by_another(key, n);
        CHECK(got == LEASE_LIMIT - 3, "another limiter took %llu after close", (unsigned long long)got);
    }
    rl_limiter_free(a);
}
