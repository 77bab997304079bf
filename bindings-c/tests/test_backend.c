/* Backend failures and the local fallback, and rl_stats_get. */
#include "rl_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

/* Redis not listening, local fallback off: a bounded wait, then RL_BACKEND_UNAVAILABLE. */
void test_backend_unavailable(void) {
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

/* Redis not listening, fallback on (the default): the first call is refused, retried once after
 * retry_delay, then decided locally (degrade_rtt is raised so only the errors can send it local); every later call is local at once. With instances = 4 the
 * local budget of a limit of 100 is 25. */
void test_local_fallback(void) {
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
void test_stats(void) {
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
        /* Limit 3: three admitted and one denied by Redis; the fifth is that denial replayed
           from the denial cache, without a Redis call. */
        CHECK(s.decisions_normal == 4 && s.denials_cached == 1 && s.decisions_local == 0 && s.decisions_memory == 0,
              "decisions normal %" PRIu64 " cached %" PRIu64 " local %" PRIu64, s.decisions_normal, s.denials_cached,
              s.decisions_local);
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
void test_backend_error(void) {
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
