/* fork(): a child keeps using a handle, as a new instance, even with threads mid-call. */
#include "rl_test.h"

#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

/* A child process keeps using a handle opened before fork(): the library builds a new runtime and
 * Redis connection in the child. The child's window is the shared one on Redis; the memory
 * backend is per process, so the child starts with empty windows there. */
void test_fork_child_uses_handle(void) {
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
void test_instance_id(void) {
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
void test_fork_child_is_a_new_instance(void) {
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

void test_fork_while_threads_mid_call(void) { fork_while_busy(g_url, expected_mode()); }

/* The same with nothing listening at the URL: every decision is local, on the fallback's record. */
void test_fork_while_threads_mid_call_local(void) {
    char url[64];
    int port = free_port();
    CHECK(port > 0, "no free port");
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/", port);
    fork_while_busy(url, RL_MODE_LOCAL);
}
