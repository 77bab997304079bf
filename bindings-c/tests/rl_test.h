/*
 * What the C suite's files share: the check macros, the suite's settings, the helpers in main.c
 * and every test. The suite is one program (main.c has the list of tests); each test_*.c file
 * holds the tests of one concern.
 */
#ifndef RL_TEST_H
#define RL_TEST_H

#define _GNU_SOURCE
#include "rl.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int g_failed_checks;    /* failures inside the running test */
extern const char *g_backend;  /* "redis" or "memory" */
extern const char *g_url;      /* NULL for memory */
extern uint64_t g_exact_limit; /* 8-thread exactness test: limit per window */
extern uint64_t g_exact_window;
extern int g_threads;

#define CHECK(cond, ...)                                                                        \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            g_failed_checks++;                                                                  \
            fprintf(stderr, "    %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);        \
            fprintf(stderr, __VA_ARGS__);                                                       \
            fputc('\n', stderr);                                                                \
        }                                                                                       \
    } while (0)

uint64_t mono_ms(void);
void sleep_ms(uint64_t ms);
/* Options for the suite's limiters (see main.c). */
rl_options test_options(void);
/* A limiter on the suite's backend with test_options(); exits the process if it cannot open. */
rl_limiter *open_or_die(void);
/* A key unique to this process and test, so reruns against one Redis never share a window. */
size_t unique_key(char *buf, size_t cap, const char *name);
/* The mode the suite's backend decides in: RL_MODE_NORMAL (Redis) or RL_MODE_MEMORY. */
rl_mode expected_mode(void);
/* Checks a failed call: status, message (NULL: any), and that the error object agrees; frees it. */
void expect_error(rl_status st, rl_error *err, rl_status want, const char *want_message, int line);
#define EXPECT_ERROR(st, err, want, msg) expect_error((st), (err), (want), (msg), __LINE__)
int starts_with(const char *s, const char *prefix);
/* A loopback port nothing listens on (bound, read, closed), so a connection there is refused. */
int free_port(void);

/* test_api.c */
void test_fuzz_acquire_peek_reset(void);
void test_fuzz_acquire_all(void);
void test_fuzz_policies_and_options(void);
void test_version(void);
void test_names(void);
void test_options_default(void);
void test_null_safe_frees(void);
void test_open_and_decide(void);
void test_retry_after_is_honest(void);
void test_binary_keys(void);
void test_key_size_bounds(void);
void test_bad_arguments(void);
void test_bad_open(void);

/* test_options.c */
void test_option_conventions(void);
void test_old_options_struct(void);
void test_options_v2_struct(void);
void test_client_clock(void);

/* test_backend.c */
void test_backend_unavailable(void);
void test_local_fallback(void);
void test_stats(void);
void test_backend_error(void);

/* test_leases.c */
void test_lease_mode_and_stats(void);
void test_close_returns_leases(void);

/* test_composite.c */
void test_composite_all_or_nothing(void);
void test_composite_burst_and_daily(void);
void test_composite_grouped_keys(void);
void test_composite_invalid_input(void);
void test_composite_reset_in_group(void);
void test_policies_parse(void);
void test_headers_known_state(void);
void test_headers_for_calls(void);

/* test_fork.c */
void test_fork_child_uses_handle(void);
void test_instance_id(void);
void test_fork_child_is_a_new_instance(void);
void test_fork_while_threads_mid_call(void);
void test_fork_while_threads_mid_call_local(void);

/* test_threads.c */
void test_threads_exact(void);
void test_open_free_from_threads(void);

#endif
