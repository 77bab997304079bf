/*
 * The C suite for librl (main.c: settings, helpers, the list of tests; the tests are in test_*.c): the API as a C program sees it, against a real Redis (the URL comes from
 * RL_TEST_REDIS_URL, set by `rl-harness run`) or the memory backend (NULL url).
 *
 *   test_rl --backend redis|memory [--limit N] [--window-ms N] [--threads N] [--only NAME]
 *           [--skip NAME]...
 *
 * --limit/--window-ms size the 8-thread exactness test (small under valgrind, larger natively).
 * Prints one line per test and ends with `RESULT passed=N failed=M` for bindings-c/test.sh.
 * Exit status: 0 if every test passed.
 */
#include "rl_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- a tiny test framework -------------------------------------------------------------- */

int g_failed_checks; /* failures inside the running test */
const char *g_backend = "memory";
const char *g_url;          /* NULL for memory */
uint64_t g_exact_limit = 50; /* 8-thread exactness test: limit per window */
uint64_t g_exact_window = 200;
int g_threads = 8;

uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void sleep_ms(uint64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* Generous timeouts: under valgrind everything runs ~30x slower, and the first call connects.
 * Slow round trips never send these limiters local (degrade only above 60 s, the longest allowed):
 * under valgrind every round trip is over the 5 ms default, and the tests below check that Redis
 * decides. Failures still would (the fallback is on); the fallback tests use their own options. */
rl_options test_options(void) {
    rl_options o = rl_options_default();
    o.connect_timeout_ms = 10000;
    o.request_timeout_ms = 10000;
    o.degrade_rtt_ms = 60000;
    return o;
}

rl_limiter *open_or_die(void) {
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
size_t unique_key(char *buf, size_t cap, const char *name) {
    int n = snprintf(buf, cap, "ctest:%ld:%s:%s", (long)getpid(), g_backend, name);
    return (size_t)n;
}

rl_mode expected_mode(void) { return g_url ? RL_MODE_NORMAL : RL_MODE_MEMORY; }

/* Checks a failed call: status, message, and that the error object agrees; frees the error. */
void expect_error(rl_status st, rl_error *err, rl_status want, const char *want_message, int line) {
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

int starts_with(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

/* A loopback port nothing listens on (bound, read, closed), so a connection there is refused. */
int free_port(void) {
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
    {"option_conventions", test_option_conventions, 0},
    {"old_options_struct", test_old_options_struct, 0},
    {"options_v2_struct", test_options_v2_struct, 0},
    {"client_clock", test_client_clock, 0},
    {"lease_mode_and_stats", test_lease_mode_and_stats, 0},
    {"close_returns_leases", test_close_returns_leases, 0},
    {"backend_error", test_backend_error, 1},
    {"composite_all_or_nothing", test_composite_all_or_nothing, 0},
    {"composite_burst_and_daily", test_composite_burst_and_daily, 0},
    {"composite_grouped_keys", test_composite_grouped_keys, 0},
    {"composite_invalid_input", test_composite_invalid_input, 0},
    {"composite_reset_in_group", test_composite_reset_in_group, 0},
    {"policies_parse", test_policies_parse, 0},
    {"headers_known_state", test_headers_known_state, 0},
    {"headers_for_calls", test_headers_for_calls, 0},
    {"open_free_from_threads", test_open_free_from_threads, 0},
    {"fork_child_uses_handle", test_fork_child_uses_handle, 0},
    {"instance_id", test_instance_id, 0},
    {"fork_child_is_a_new_instance", test_fork_child_is_a_new_instance, 1},
    {"fork_while_threads_mid_call", test_fork_while_threads_mid_call, 0},
    /* Needs no Redis, but once is enough: with the Redis suite. */
    {"fork_while_threads_mid_call_local", test_fork_while_threads_mid_call_local, 1},
    {"threads_exact", test_threads_exact, 0},
    {"fuzz_acquire_peek_reset", test_fuzz_acquire_peek_reset, 0},
    {"fuzz_acquire_all", test_fuzz_acquire_all, 0},
    {"fuzz_policies_and_options", test_fuzz_policies_and_options, 0},
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

