/* Threads: exactness with 8 threads on one key, and handles opened and freed concurrently. */
#include "rl_test.h"

#include <pthread.h>

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

void test_threads_exact(void) {
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

void test_open_free_from_threads(void) {
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
