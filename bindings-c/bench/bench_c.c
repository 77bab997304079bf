/*
 * The C side of the binding benchmark (bindings-c/bench/run.sh runs it next to
 * examples/bench_rust.rs, which does the same through rl_core::blocking::Limiter).
 *
 *   bench_c memory ITERATIONS             one thread, memory backend: ns per rl_acquire
 *   bench_c redis URL THREADS SECONDS     THREADS threads sharing one handle: decisions/s
 */
#define _GNU_SOURCE
#include "rl.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define KEY "bench:c-vs-rust"
#define WINDOW_MS 1000
#define LIMIT 1000000000000000ull /* the largest limit: every call is admitted */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check(rl_status st, rl_error *err, const char *what) {
    if (st != RL_OK) {
        fprintf(stderr, "%s: %s: %s\n", what, rl_status_name((int)st), rl_error_message(err));
        exit(1);
    }
}

static rl_limiter *g_limiter;
static atomic_bool g_stop;
static atomic_ullong g_done;

static void *redis_worker(void *arg) {
    (void)arg;
    unsigned long long n = 0;
    rl_decision d;
    rl_error *err = NULL;
    while (!atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        check(rl_acquire(g_limiter, (const uint8_t *)KEY, strlen(KEY), LIMIT, WINDOW_MS, 1, &d, &err), err, "acquire");
        n++;
    }
    atomic_fetch_add(&g_done, n);
    return NULL;
}

int main(int argc, char **argv) {
    rl_error *err = NULL;
    rl_decision d;
    if (argc == 3 && strcmp(argv[1], "memory") == 0) {
        unsigned long long iters = strtoull(argv[2], NULL, 10), allowed = 0;
        check(rl_limiter_open(NULL, NULL, &g_limiter, &err), err, "open");
        for (unsigned long long i = 0; i < iters / 10; i++) /* warm up */
            check(rl_acquire(g_limiter, (const uint8_t *)KEY, strlen(KEY), LIMIT, WINDOW_MS, 1, &d, &err), err, "acquire");
        double t0 = now_s();
        for (unsigned long long i = 0; i < iters; i++) {
            check(rl_acquire(g_limiter, (const uint8_t *)KEY, strlen(KEY), LIMIT, WINDOW_MS, 1, &d, &err), err, "acquire");
            allowed += d.allowed;
        }
        double ns = (now_s() - t0) * 1e9 / (double)iters;
        if (allowed != iters) { fprintf(stderr, "only %llu of %llu allowed\n", allowed, iters); return 1; }
        printf("memory ns_per_call=%.1f\n", ns);
    } else if (argc == 5 && strcmp(argv[1], "redis") == 0) {
        int threads = atoi(argv[3]);
        double seconds = atof(argv[4]);
        rl_options o = rl_options_default();
        o.connect_timeout_ms = 5000;
        o.request_timeout_ms = 5000;
        check(rl_limiter_open(argv[2], &o, &g_limiter, &err), err, "open");
        check(rl_ping(g_limiter, &err), err, "ping");
        check(rl_reset(g_limiter, (const uint8_t *)KEY, strlen(KEY), &err), err, "reset");
        pthread_t *tids = calloc((size_t)threads, sizeof *tids);
        double t0 = now_s();
        for (int i = 0; i < threads; i++) pthread_create(&tids[i], NULL, redis_worker, NULL);
        struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
        nanosleep(&ts, NULL);
        atomic_store(&g_stop, true);
        for (int i = 0; i < threads; i++) pthread_join(tids[i], NULL);
        double elapsed = now_s() - t0;
        printf("redis threads=%d decisions_per_s=%.0f\n", threads, (double)atomic_load(&g_done) / elapsed);
        free(tids);
    } else {
        fprintf(stderr, "usage: bench_c memory ITERATIONS | bench_c redis URL THREADS SECONDS\n");
        return 2;
    }
    rl_limiter_free(g_limiter);
    return 0;
}
