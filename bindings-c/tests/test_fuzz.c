/* Random calls across the C boundary: keys of any bytes and length (NULL, empty, 64 KiB and one
 * past, SIZE_MAX), limits, windows and costs at and past every edge, NULL or mis-sized out
 * structs, random rule lists and groups, random option structs and policy text (invalid UTF-8
 * included). Every call returns RL_OK with a well-formed result or RL_INVALID_ARGUMENT with an
 * error naming an argument: never RL_PANIC, never a crash, and (under valgrind, as test.sh runs
 * the suite) never an invalid read or a definite leak. RL_FUZZ_SEED replays a run; RL_FUZZ_RUNS
 * sets the calls (default 60 per kind). */
#include "rl_test.h"

#include <time.h>
#include <unistd.h>

static uint64_t g_rng;

static uint64_t next(void) { /* xorshift64* */
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ull;
}

static uint64_t below(uint64_t n) { return n ? next() % n : 0; }

static const uint64_t EDGES[] = {0, 1, 2, 1000000000000000ull, 1000000000000001ull, 2592000000ull, 2592000001ull,
                                 1ull << 53, (1ull << 53) + 1, UINT64_MAX, UINT64_MAX - 1, 1ull << 63, 60000, 60001, 64, 65};

static uint64_t number(void) {
    switch (below(3)) {
    case 0: return 1 + below(100);
    case 1: return EDGES[below(sizeof EDGES / sizeof EDGES[0])];
    default: return next() >> below(64);
    }
}

static uint8_t g_buf[(1u << 16) + 2];

/* A key: NULL, or g_buf's first n bytes (random), n from the edges. */
static const uint8_t *key(size_t *len) {
    size_t n;
    switch (below(8)) {
    case 0: *len = below(3); return NULL;
    case 1: n = 65536; break;
    case 2: n = 65537; break;
    case 3: *len = SIZE_MAX; return g_buf; /* refused before anything is read */
    default: n = below(40);
    }
    if (n > 64) {
        memset(g_buf, 'k', n); /* random bytes one by one would be most of the run under valgrind */
    }
    for (size_t i = 0; i < n && i < 64; i++) g_buf[i] = (uint8_t)next();
    *len = n;
    return g_buf;
}

static int g_runs = 60; /* under valgrind ~20 Redis calls/s; test.sh asks more natively */
static int g_ok, g_refused; /* outcomes, printed: both must occur */

/* The status is OK or INVALID_ARGUMENT, and an error (when asked for) agrees and names an argument. */
static int typed(rl_status st, rl_error *err, int asked, const char *what) {
    CHECK(st == RL_OK || st == RL_INVALID_ARGUMENT, "%s: %s: %s (seed %llu)", what, rl_status_name((int)st),
          rl_error_message(err), (unsigned long long)g_rng);
    if (st == RL_INVALID_ARGUMENT && asked) {
        CHECK(err && rl_error_code(err) == RL_INVALID_ARGUMENT && starts_with(rl_error_message(err), "invalid argument `"),
              "%s: error %s", what, err ? rl_error_message(err) : "NULL");
    }
    if (st == RL_OK && asked) CHECK(err == NULL, "%s: an error on RL_OK", what);
    rl_error_free(err);
    if (st == RL_OK) g_ok++;
    else g_refused++;
    return st == RL_OK;
}

static void well_formed(const rl_decision *d, const char *what) {
    CHECK(d->now_ms > 0, "%s: now_ms %llu", what, (unsigned long long)d->now_ms);
    CHECK(d->mode == RL_MODE_NORMAL || d->mode == RL_MODE_MEMORY || d->mode == RL_MODE_LOCAL ||
              d->mode == RL_MODE_LEASE,
          "%s: mode %d", what,
          (int)d->mode);
}

/* Whether to run call i: the first g_runs calls, then more (up to 20 x g_runs) while one outcome
 * has not occurred yet: a short run (60 calls under valgrind) can draw no valid call by chance. */
static int keep_going(int i) {
    if (g_failed_checks) return 0;
    return i < g_runs || ((g_ok == 0 || g_refused == 0) && i < 20 * g_runs);
}

static void outcomes(void) {
    printf("   %d calls OK, %d refused\n", g_ok, g_refused);
    CHECK(g_ok > 0 && g_refused > 0, "one outcome never occurred");
}

static void seed(void) {
    const char *s = getenv("RL_FUZZ_SEED");
    g_rng = s ? strtoull(s, NULL, 10) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    if (!g_rng) g_rng = 1;
    const char *r = getenv("RL_FUZZ_RUNS");
    if (r) g_runs = atoi(r);
    g_ok = g_refused = 0;
    printf("   fuzz seed %llu, %d runs\n", (unsigned long long)g_rng, g_runs);
}

void test_fuzz_acquire_peek_reset(void) {
    seed();
    rl_limiter *l = open_or_die();
    for (int i = 0; keep_going(i); i++) {
        size_t len;
        const uint8_t *k = key(&len);
        uint64_t limit = number(), window = number(), cost = number();
        const rl_limiter *lim = below(30) ? l : NULL;
        rl_decision d;
        rl_decision *out = below(20) ? &d : NULL;
        int asked = (int)below(4);
        rl_error *err = NULL;
        rl_status st = rl_acquire(lim, k, len, limit, window, cost, out, asked ? &err : NULL);
        if (typed(st, err, asked, "rl_acquire")) well_formed(&d, "rl_acquire");
        err = NULL;
        st = rl_peek(lim, k, len, limit, window, out, asked ? &err : NULL);
        if (typed(st, err, asked, "rl_peek")) well_formed(&d, "rl_peek");
        err = NULL;
        st = rl_reset(lim, k, len, asked ? &err : NULL);
        typed(st, err, asked, "rl_reset");
    }
    outcomes();
    rl_limiter_free(l);
}

void test_fuzz_acquire_all(void) {
    seed();
    rl_limiter *l = open_or_die();
    static uint8_t keys[3][16];
    for (int i = 0; keep_going(i); i++) {
        rl_rule rules[20];
        size_t n = below(20);
        for (size_t j = 0; j < n; j++) {
            size_t which = below(4);
            memset(&rules[j], 0, sizeof rules[j]);
            if (which < 3) {
                for (size_t b = 0; b < sizeof keys[which]; b++) keys[which][b] = (uint8_t)('a' + below(3));
                rules[j].key = keys[which];
                rules[j].key_len = 1 + below(sizeof keys[which]);
            } else {
                rules[j].key = key(&rules[j].key_len);
            }
            rules[j].limit = below(3) ? 1 + below(100) : number();
            rules[j].window_ms = below(3) ? 1 + below(100000) : number();
            rules[j].cost = below(2) ? 1 : number();
        }
        rl_decision ds[20];
        rl_composite c;
        c.struct_size = below(10) ? sizeof c : below(sizeof c);
        c.decisions = below(10) ? ds : NULL;
        c.decisions_cap = below(5) ? 20 : below(20);
        size_t group_len = 0;
        const uint8_t *group = NULL;
        switch (below(4)) {
        case 0: group = key(&group_len); break;
        case 1: group_len = below(10) ? 0 : 3; break; /* NULL, with a length sometimes */
        default: group = (const uint8_t *)"g", group_len = 1; /* keys on any slots, one window each */
        }
        rl_error *err = NULL;
        rl_status st = rl_acquire_all(l, below(20) ? rules : NULL, n, group, group_len, below(20) ? &c : NULL, &err);
        if (typed(st, err, 1, "rl_acquire_all")) {
            CHECK(c.n_decisions == n, "n_decisions %zu of %zu", c.n_decisions, n);
            for (size_t j = 0; j < c.n_decisions && j < 20; j++) well_formed(&ds[j], "rl_acquire_all");
        }
    }
    outcomes();
    rl_limiter_free(l);
}

/* A NUL-terminated random text in g_buf: bytes, or pieces of the policy grammar. */
static const char *text(void) {
    static const char *pieces[] = {"1", "100", "0", "99999999999999999999", "/", " per ", "PER", "s", "ms", "hour",
                                   "month", "year", ";", ",", "|", ":", "name", "\"", "\\", " ", "\xe2\x82\xac",
                                   "a\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xff", "\xc3"};
    size_t n = 0;
    if (below(2)) {
        size_t parts = below(10);
        for (size_t p = 0; p < parts; p++) {
            const char *s = pieces[below(sizeof pieces / sizeof pieces[0])];
            size_t sl = strlen(s);
            memcpy(g_buf + n, s, sl);
            n += sl;
        }
    } else {
        n = below(40);
        for (size_t i = 0; i < n; i++) g_buf[i] = (uint8_t)(1 + below(255));
    }
    g_buf[n] = 0;
    return (const char *)g_buf;
}

void test_fuzz_policies_and_options(void) {
    seed();
    for (int i = 0; keep_going(i); i++) {
        rl_policies *ps = NULL;
        rl_error *err = NULL;
        const char *t = below(30) ? text() : NULL;
        rl_status st = rl_policies_parse(t, &ps, &err);
        if (typed(st, err, 1, "rl_policies_parse")) {
            size_t n = rl_policies_len(ps);
            CHECK(n > 0, "no policy");
            for (size_t j = 0; j <= n; j++) {
                rl_policy p;
                err = NULL;
                st = rl_policies_get(ps, j, &p, &err);
                if (j < n) CHECK(st == RL_OK && p.limit >= 1 && p.window_ms >= 1, "policy %zu", j);
                else CHECK(st == RL_INVALID_ARGUMENT, "index past the end");
                rl_error_free(err);
            }
        }
        rl_policies_free(ps);

        rl_options o = rl_options_default();
        uint64_t *fields[] = {&o.connect_timeout_ms, &o.request_timeout_ms, &o.retry_delay_ms, &o.degrade_rtt_ms,
                              &o.degrade_after_ms, &o.recover_rtt_ms, &o.recover_after_ms, &o.instances,
                              &o.local_max_keys, &o.max_clock_skew_ms, &o.key_shards, &o.lease_ms, &o.lease_hot_rate};
        size_t changes = 1 + below(4);
        static char prefix[64], leases[16];
        for (size_t c = 0; c < changes; c++) {
            size_t f = below(sizeof fields / sizeof fields[0] + 4);
            if (f < sizeof fields / sizeof fields[0]) {
                *fields[f] = number();
            } else if (f == sizeof fields / sizeof fields[0]) {
                snprintf(prefix, sizeof prefix, "%s", text());
                o.key_prefix = prefix;
            } else if (f == sizeof fields / sizeof fields[0] + 1) {
                static const char *modes[] = {"off", "on", "auto", "", "sometimes", "\xff"};
                snprintf(leases, sizeof leases, "%s", modes[below(6)]);
                o.leases = leases;
            } else {
                o.client_clock = below(2);
                o.disable_local_fallback = below(2);
                o.disable_denial_cache = below(2);
            }
        }
        if (!below(20)) o.struct_size = below(sizeof o);
        rl_limiter *l = NULL;
        err = NULL;
        st = rl_limiter_open(NULL, below(20) ? &o : NULL, below(30) ? &l : NULL, &err);
        if (typed(st, err, 1, "rl_limiter_open")) {
            if (l) {
                rl_decision d;
                CHECK(rl_acquire(l, (const uint8_t *)"k", 1, 5, 1000, 1, &d, NULL) == RL_OK, "acquire after open");
                rl_limiter_free(l);
            }
        }
    }
    outcomes();
}
