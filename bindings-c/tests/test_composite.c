/* Composite acquire (rl_acquire_all), policy strings (rl_policies_*) and the HTTP fields rendered
 * from a result (rl_headers_*, rl_problem_body), as a C program sees them. */
#include "rl_test.h"

#define LONG_WINDOW 600000u /* 10 minutes: nothing ages out during a test */

/* Redis Cluster's key slot of an ungrouped key: CRC16 (XMODEM) of the hash tag, which for rl is the
 * user key itself (escaped; the keys here hold no '{', '}' or '%'). Lets the tests find two
 * ungrouped keys that share a slot, which rl_acquire_all accepts without a group. */
static unsigned slot_of(const char *key, size_t n) {
    unsigned crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (unsigned)(unsigned char)key[i] << 8;
        for (int b = 0; b < 8; b++) crc = (crc & 0x8000) ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    return crc % 16384;
}

/* A key `<base>:<i>` in the same slot as `other`; returns its length. */
static size_t same_slot_key(char *buf, size_t cap, const char *base, const char *other, size_t other_len) {
    unsigned want = slot_of(other, other_len);
    for (unsigned i = 0;; i++) {
        size_t n = (size_t)snprintf(buf, cap, "%s:%u", base, i);
        if (slot_of(buf, n) == want) return n;
    }
}

static rl_rule rule(const char *key, size_t n, uint64_t limit, uint64_t window_ms, uint64_t cost) {
    rl_rule r = {(const uint8_t *)key, n, limit, window_ms, cost};
    return r;
}

/* A result struct over the caller's array, its out-fields set to values no call writes. */
static rl_composite composite_over(rl_decision *ds, size_t cap) {
    rl_composite c;
    memset(&c, 0, sizeof c);
    c.struct_size = sizeof c;
    c.decisions = ds;
    c.decisions_cap = cap;
    c.n_decisions = 99;
    c.retry_after_ms = 12345;
    return c;
}

static uint64_t used_now(rl_limiter *l, const char *key, size_t n, uint64_t limit, uint64_t window_ms) {
    rl_decision d;
    rl_error *err = NULL;
    rl_status st = rl_peek(l, (const uint8_t *)key, n, limit, window_ms, &d, &err);
    CHECK(st == RL_OK, "peek: %s", rl_error_message(err));
    rl_error_free(err);
    return st == RL_OK ? d.used : UINT64_MAX;
}

/* One rule denies: nothing is taken from the other, whose window rl_peek shows unchanged. */
void test_composite_all_or_nothing(void) {
    rl_limiter *l = open_or_die();
    char a[128], base[128], b[160];
    size_t na = unique_key(a, sizeof a, "aon_a");
    unique_key(base, sizeof base, "aon_b");
    size_t nb = same_slot_key(b, sizeof b, base, a, na);
    rl_rule rules[2] = {rule(a, na, 5, LONG_WINDOW, 1), rule(b, nb, 1, LONG_WINDOW, 1)};
    rl_decision ds[2];
    rl_composite c = composite_over(ds, 2);
    rl_error *err = NULL;

    rl_status st = rl_acquire_all(l, rules, 2, NULL, 0, &c, &err);
    CHECK(st == RL_OK && err == NULL, "first call: %s", rl_error_message(err));
    CHECK(c.allowed && c.retry_after_ms == 0 && c.n_decisions == 2 && c.mode == expected_mode(),
          "first: allowed %d retry %" PRIu64 " n %zu mode %s", c.allowed, c.retry_after_ms, c.n_decisions,
          rl_mode_name((int)c.mode));
    CHECK(ds[0].allowed && ds[0].used == 1 && ds[0].remaining == 4, "rule 0: used %" PRIu64 " remaining %" PRIu64,
          ds[0].used, ds[0].remaining);
    CHECK(ds[1].allowed && ds[1].used == 1 && ds[1].remaining == 0, "rule 1: used %" PRIu64, ds[1].used);
    CHECK(c.now_ms >= ds[0].now_ms && c.now_ms >= ds[1].now_ms, "now_ms is the latest");

    st = rl_acquire_all(l, rules, 2, NULL, 0, &c, &err);
    CHECK(st == RL_OK, "second call: %s", rl_error_message(err));
    CHECK(!c.allowed && c.retry_after_ms > 0 && c.retry_after_ms <= LONG_WINDOW, "second: allowed %d retry %" PRIu64,
          c.allowed, c.retry_after_ms);
    CHECK(ds[0].allowed && ds[0].used == 1, "rule 0 alone would admit; nothing counted: used %" PRIu64, ds[0].used);
    CHECK(!ds[1].allowed && ds[1].retry_after_ms == c.retry_after_ms, "rule 1 denies; retry %" PRIu64,
          ds[1].retry_after_ms);
    CHECK(used_now(l, a, na, 5, LONG_WINDOW) == 1, "a's window unchanged by the denied call");
    CHECK(used_now(l, b, nb, 1, LONG_WINDOW) == 1, "b's window unchanged by the denied call");
    rl_limiter_free(l);
}

/* "burst: 3/2s; daily: 4/d" on one key: the burst denies the 4th in a burst, the daily the 5th. */
void test_composite_burst_and_daily(void) {
    rl_limiter *l = open_or_die();
    rl_policies *ps = NULL;
    rl_error *err = NULL;
    CHECK(rl_policies_parse("burst: 3/2s; daily: 4/d", &ps, &err) == RL_OK, "parse: %s", rl_error_message(err));
    if (!ps) {
        rl_limiter_free(l);
        return;
    }
    char key[128];
    size_t n = unique_key(key, sizeof key, "burst_daily");
    rl_rule rules[2];
    for (size_t i = 0; i < 2; i++) {
        rl_policy p;
        CHECK(rl_policies_get(ps, i, &p, NULL) == RL_OK, "get %zu", i);
        rules[i] = rule(key, n, p.limit, p.window_ms, 1);
    }
    CHECK(rules[0].limit == 3 && rules[0].window_ms == 2000 && rules[1].limit == 4 && rules[1].window_ms == 86400000,
          "parsed limits");
    rl_decision ds[2];
    rl_composite c = composite_over(ds, 2);
    for (int i = 0; i < 3; i++) {
        CHECK(rl_acquire_all(l, rules, 2, NULL, 0, &c, NULL) == RL_OK && c.allowed, "call %d allowed", i);
    }
    CHECK(ds[0].used == 3 && ds[1].used == 3 && ds[1].remaining == 1, "after 3: %" PRIu64 "/%" PRIu64, ds[0].used,
          ds[1].used);
    CHECK(rl_acquire_all(l, rules, 2, NULL, 0, &c, NULL) == RL_OK, "4th call");
    CHECK(!c.allowed && !ds[0].allowed && ds[1].allowed && c.retry_after_ms <= 2000,
          "burst denies the 4th: allowed %d/%d retry %" PRIu64, ds[0].allowed, ds[1].allowed, c.retry_after_ms);
    sleep_ms(c.retry_after_ms + 50);
    CHECK(rl_acquire_all(l, rules, 2, NULL, 0, &c, NULL) == RL_OK && c.allowed, "after the burst window: allowed");
    CHECK(ds[1].used == 4 && ds[1].remaining == 0, "daily used %" PRIu64, ds[1].used);
    CHECK(rl_acquire_all(l, rules, 2, NULL, 0, &c, NULL) == RL_OK, "5th call");
    CHECK(!c.allowed && ds[0].allowed && !ds[1].allowed && c.retry_after_ms > 2000,
          "daily denies the 5th: allowed %d/%d retry %" PRIu64, ds[0].allowed, ds[1].allowed, c.retry_after_ms);
    CHECK(used_now(l, key, n, 4, 86400000) == 4, "one window, 4 admitted");
    rl_policies_free(ps);
    rl_limiter_free(l);
}

/* Keys on different slots need a group; a grouped key is a window apart from the ungrouped one. */
void test_composite_grouped_keys(void) {
    rl_limiter *l = open_or_die();
    char ip[128], user[128];
    size_t ni = unique_key(ip, sizeof ip, "ip:10.0.0.1");
    size_t nu = unique_key(user, sizeof user, "user:42");
    if (slot_of(ip, ni) == slot_of(user, nu)) nu = unique_key(user, sizeof user, "user:43");
    CHECK(slot_of(ip, ni) != slot_of(user, nu), "the two keys share a slot");
    rl_rule rules[2] = {rule(ip, ni, 10, LONG_WINDOW, 1), rule(user, nu, 1, LONG_WINDOW, 1)};
    rl_decision ds[2];
    rl_composite c = composite_over(ds, 2);
    rl_error *err = NULL;

    rl_status st = rl_acquire_all(l, rules, 2, NULL, 0, &c, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err, "no group: %s", rl_status_name((int)st));
    if (err) {
        const char *m = rl_error_message(err);
        CHECK(starts_with(m, "invalid argument `rules`: keys ") && strstr(m, "do not share a slot") &&
                  strstr(m, "pass a group") && strstr(m, "ip:10.0.0.1") && strstr(m, "user:4"),
              "%s", m);
        rl_error_free(err);
    }
    CHECK(c.n_decisions == 99, "nothing written on failure");

    const char *group = "tenant-7";
    st = rl_acquire_all(l, rules, 2, (const uint8_t *)group, strlen(group), &c, &err);
    CHECK(st == RL_OK && c.allowed && ds[0].used == 1 && ds[1].used == 1, "grouped: %s", rl_error_message(err));
    rl_error_free(err);
    CHECK(rl_acquire_all(l, rules, 2, (const uint8_t *)group, strlen(group), &c, NULL) == RL_OK && !c.allowed &&
              !ds[1].allowed && ds[0].used == 1,
          "the group's user window is full");
    /* Another group: other windows. */
    CHECK(rl_acquire_all(l, rules, 2, (const uint8_t *)"tenant-8", 8, &c, NULL) == RL_OK && c.allowed,
          "another group starts empty");
    /* Ungrouped windows of the same keys are untouched. */
    CHECK(used_now(l, ip, ni, 10, LONG_WINDOW) == 0 && used_now(l, user, nu, 1, LONG_WINDOW) == 0,
          "grouped windows are apart from the ungrouped ones");
    rl_limiter_free(l);
}

/* Each bad input: the right status, a message naming the value, nothing written (out, windows). */
void test_composite_invalid_input(void) {
    rl_limiter *l = open_or_die();
    char k[128], k2[160], base[128];
    size_t nk = unique_key(k, sizeof k, "bad_in");
    unique_key(base, sizeof base, "bad_in_2");
    size_t nk2 = same_slot_key(k2, sizeof k2, base, k, nk);
    rl_decision ds[RL_MAX_RULES + 1];
    rl_composite c = composite_over(ds, RL_MAX_RULES + 1);
    rl_rule many[RL_MAX_RULES + 1];
    for (size_t i = 0; i < RL_MAX_RULES + 1; i++) many[i] = rule(k, nk, 100, LONG_WINDOW, 1);
    rl_rule two_costs[2] = {rule(k, nk, 100, LONG_WINDOW, 1), rule(k, nk, 100, 1000, 2)};
    rl_rule null_key[2] = {rule(k, nk, 100, LONG_WINDOW, 1), rule(NULL, 3, 100, LONG_WINDOW, 1)};
    rl_rule bad_limit[2] = {rule(k, nk, 100, LONG_WINDOW, 1), rule(k2, nk2, 0, LONG_WINDOW, 1)};
    rl_rule one[1] = {rule(k, nk, 100, LONG_WINDOW, 1)};
    static uint8_t big_group[RL_MAX_GROUP_BYTES + 1];
    memset(big_group, 'g', sizeof big_group);
    rl_error *err = NULL;
    rl_status st;

    st = rl_acquire_all(l, NULL, 0, NULL, 0, &c, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `rules`: is empty; give at least one rule");
    st = rl_acquire_all(l, many, RL_MAX_RULES + 1, NULL, 0, &c, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `rules`: holds 17 rules; at most 16 are allowed");
    st = rl_acquire_all(l, NULL, 2, NULL, 0, &c, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `rules`: must not be NULL");
    st = rl_acquire_all(l, one, 1, (const uint8_t *)"g", 0, &c, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `group`: is 0 bytes; must be 1 to 1024 (or no group)");
    st = rl_acquire_all(l, one, 1, big_group, sizeof big_group, &c, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `group`: is 1025 bytes; must be 1 to 1024 (or no group)");
    st = rl_acquire_all(l, one, 1, NULL, 3, &c, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `group`: is NULL with group_len 3; pass NULL and 0 for no group");
    st = rl_acquire_all(l, two_costs, 2, NULL, 0, &c, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err &&
              starts_with(rl_error_message(err),
                          "invalid argument `cost`: rules 0 and 1 are on the same key \"ctest:") &&
              strstr(rl_error_message(err), "with different costs (1 and 2)"),
          "two costs: %s", rl_error_message(err));
    rl_error_free(err);
    st = rl_acquire_all(l, null_key, 2, NULL, 0, &c, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `key`: must not be NULL (rule 1)");
    st = rl_acquire_all(l, bad_limit, 2, NULL, 0, &c, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err && starts_with(rl_error_message(err), "invalid argument `limit`: ") &&
              strstr(rl_error_message(err), "(rule 1, key \"ctest:"),
          "bad limit: %s", rl_error_message(err));
    rl_error_free(err);
    st = rl_acquire_all(NULL, one, 1, NULL, 0, &c, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `limiter`: must not be NULL");
    st = rl_acquire_all(l, one, 1, NULL, 0, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");

    rl_composite bad = c;
    bad.struct_size = 0;
    st = rl_acquire_all(l, one, 1, NULL, 0, &bad, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `out`: struct_size is 0; set struct_size = sizeof(rl_composite)");
    bad = c;
    bad.decisions = NULL;
    st = rl_acquire_all(l, one, 1, NULL, 0, &bad, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `out`: decisions must not be NULL; point it at an array of at least n_rules "
                 "rl_decision");
    bad = c;
    bad.decisions_cap = 1;
    st = rl_acquire_all(l, two_costs, 2, NULL, 0, &bad, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `out`: decisions_cap is 1; the call has 2 rules and needs one rl_decision each");

    /* Nothing written: not the result, not a window. (The errors alone, without `err`, too.) */
    CHECK(rl_acquire_all(l, NULL, 0, NULL, 0, &c, NULL) == RL_INVALID_ARGUMENT, "status without err");
    CHECK(c.n_decisions == 99 && c.retry_after_ms == 12345 && bad.n_decisions == 99, "a failed call wrote the result");
    CHECK(used_now(l, k, nk, 100, LONG_WINDOW) == 0 && used_now(l, k2, nk2, 100, LONG_WINDOW) == 0,
          "a refused call took permits");
    /* And a good call with the same buffers works. */
    CHECK(rl_acquire_all(l, one, 1, NULL, 0, &c, NULL) == RL_OK && c.allowed && c.n_decisions == 1, "good call");
    rl_limiter_free(l);
}

/* rl_policies_parse: the good strings' policies, and the core's message for each bad one. */
void test_policies_parse(void) {
    rl_policies *ps = NULL;
    rl_error *err = NULL;
    CHECK(rl_policies_parse("burst: 100/s; daily: 5000/day, 10 per 2 minutes", &ps, &err) == RL_OK, "parse: %s",
          rl_error_message(err));
    CHECK(rl_policies_len(ps) == 3, "len %zu", rl_policies_len(ps));
    struct {
        const char *name;
        uint64_t limit, window_ms;
    } want[3] = {{"burst", 100, 1000}, {"daily", 5000, 86400000}, {"10/2m", 10, 120000}};
    for (size_t i = 0; i < 3; i++) {
        rl_policy p;
        memset(&p, 0, sizeof p);
        CHECK(rl_policies_get(ps, i, &p, &err) == RL_OK, "get %zu: %s", i, rl_error_message(err));
        CHECK(p.name && strcmp(p.name, want[i].name) == 0 && p.limit == want[i].limit &&
                  p.window_ms == want[i].window_ms,
              "policy %zu: %s %" PRIu64 " %" PRIu64, i, p.name ? p.name : "(null)", p.limit, p.window_ms);
    }
    rl_policy p;
    rl_status st = rl_policies_get(ps, 3, &p, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `index`: is 3; the list holds 3 policies");
    st = rl_policies_get(ps, 0, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
    st = rl_policies_get(NULL, 0, &p, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `policies`: must not be NULL");
    CHECK(rl_policies_len(NULL) == 0, "len of NULL");
    rl_policies_free(ps);
    rl_policies_free(NULL);

    struct {
        const char *text, *message;
    } bad[] = {
        {"", "invalid argument `policy`: \"\" is empty; write a policy like 100/s or 5000 per hour"},
        {"100", "invalid argument `policy`: \"100\" has no \"/\" or \"per\""},
        {"100/fortnight", "invalid argument `policy`: \"100/fortnight\" has the unit \"fortnight\""},
        {"0/s", "invalid argument `policy`: \"0/s\" has the count 0"},
        {"100/s;", "invalid argument `policy`: \"100/s;\" has an empty policy between separators"},
        {"a: 1/s; a: 2/m", "invalid argument `policy`: \"a: 1/s; a: 2/m\" names the policy \"a\" twice"},
        {"1/year", "invalid argument `policy`: \"1/year\" has a window longer than the longest kept"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ps = (rl_policies *)&p; /* must be reset to NULL on failure */
        st = rl_policies_parse(bad[i].text, &ps, &err);
        CHECK(st == RL_INVALID_ARGUMENT && ps == NULL && err && starts_with(rl_error_message(err), bad[i].message),
              "%s: %s: %s", bad[i].text, rl_status_name((int)st), rl_error_message(err));
        rl_error_free(err);
    }
    st = rl_policies_parse(NULL, &ps, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `text`: must not be NULL");
    st = rl_policies_parse("1/s", NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
}

/* Field `name` of `h`, or NULL. */
static const char *field(const rl_headers *h, const char *name) {
    for (size_t i = 0; i < rl_headers_len(h); i++) {
        const char *n = NULL, *v = NULL;
        if (rl_headers_get(h, i, &n, &v, NULL) == RL_OK && strcmp(n, name) == 0) return v;
    }
    return NULL;
}

static int field_is(const rl_headers *h, const char *name, const char *want) {
    const char *v = field(h, name);
    if (v && strcmp(v, want) == 0) return 1;
    fprintf(stderr, "    %s: got %s, want %s\n", name, v ? v : "(absent)", want);
    return 0;
}

static rl_headers *render(const rl_policies *ps, const rl_composite *c, int style) {
    rl_headers *h = NULL;
    rl_error *err = NULL;
    CHECK(rl_headers_render(ps, c, style, &h, &err) == RL_OK && h, "render: %s", rl_error_message(err));
    rl_error_free(err);
    return h;
}

/* A known state (a result filled in by hand) renders to exact fields and an exact problem body. */
void test_headers_known_state(void) {
    rl_policies *ps = NULL;
    CHECK(rl_policies_parse("burst: 10/s; daily: 1000/d", &ps, NULL) == RL_OK, "parse");
    rl_decision ds[2];
    memset(ds, 0, sizeof ds);
    rl_composite c = composite_over(ds, 2);
    c.n_decisions = 2;
    c.mode = RL_MODE_NORMAL;
    /* Allowed: burst 4 left, empty again in 0.9 s; daily 900 left, empty in 86399.5 s. */
    c.allowed = true;
    c.retry_after_ms = 0;
    ds[0] = (rl_decision){true, 4, 6, 0, 900, RL_MODE_NORMAL, 0};
    ds[1] = (rl_decision){true, 900, 100, 0, 86399500, RL_MODE_NORMAL, 0};
    rl_headers *h = render(ps, &c, RL_HEADER_STYLE_IETF);
    CHECK(rl_headers_len(h) == 2, "allowed, ietf: %zu fields", rl_headers_len(h));
    const char *n = NULL, *v = NULL;
    CHECK(rl_headers_get(h, 0, &n, &v, NULL) == RL_OK && strcmp(n, "RateLimit-Policy") == 0 &&
              strcmp(v, "\"burst\";q=10;w=1, \"daily\";q=1000;w=86400") == 0,
          "field 0: %s: %s", n, v);
    CHECK(rl_headers_get(h, 1, &n, &v, NULL) == RL_OK && strcmp(n, "RateLimit") == 0 &&
              strcmp(v, "\"burst\";r=4;t=1, \"daily\";r=900;t=86400") == 0,
          "field 1: %s: %s", n, v);
    CHECK(field(h, "Retry-After") == NULL, "no Retry-After when allowed");
    rl_error *err = NULL;
    rl_status st = rl_headers_get(h, 2, &n, &v, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `index`: is 2; the list holds 2 fields");
    rl_headers_free(h);

    /* Denied by the burst (room again in 1.5 s); the daily alone would admit (3 left). */
    c.allowed = false;
    c.retry_after_ms = 1500;
    ds[0] = (rl_decision){false, 0, 10, 1500, 1900, RL_MODE_NORMAL, 0};
    ds[1] = (rl_decision){true, 3, 997, 0, 50000, RL_MODE_NORMAL, 0};
    h = render(ps, &c, RL_HEADER_STYLE_BOTH);
    CHECK(rl_headers_len(h) == 6, "denied, both: %zu fields", rl_headers_len(h));
    CHECK(field_is(h, "RateLimit-Policy", "\"burst\";q=10;w=1, \"daily\";q=1000;w=86400") &&
              field_is(h, "RateLimit", "\"burst\";r=0;t=2, \"daily\";r=3;t=50") &&
              field_is(h, "X-RateLimit-Limit", "10") && field_is(h, "X-RateLimit-Remaining", "0") &&
              field_is(h, "X-RateLimit-Reset", "2") && field_is(h, "Retry-After", "2"),
          "denied fields");
    rl_headers_free(h);
    h = render(ps, &c, RL_HEADER_STYLE_NONE);
    CHECK(rl_headers_len(h) == 1 && field_is(h, "Retry-After", "2"), "none: only Retry-After on a denial");
    rl_headers_free(h);

    char *body = NULL;
    CHECK(rl_problem_body(ps, &c, &body, &err) == RL_OK && body, "body: %s", rl_error_message(err));
    const char *want_body =
        "{\"detail\":\"over the limit of burst; retry in 2 s\",\"status\":429,\"title\":\"Request cannot be "
        "satisfied as assigned quota has been exceeded\",\"type\":\"https://iana.org/assignments/"
        "http-problem-types#quota-exceeded\",\"violated-policies\":[\"burst\"]}";
    CHECK(body && strcmp(body, want_body) == 0, "body\n      got:  %s\n      want: %s", body ? body : "(null)",
          want_body);
    rl_string_free(body);
    rl_string_free(NULL);

    /* Bad input: a count mismatch names "policies"; an unknown style, a bad struct, NULLs. */
    rl_policies *one = NULL;
    CHECK(rl_policies_parse("10/s", &one, NULL) == RL_OK, "parse one");
    h = (rl_headers *)&c; /* must be reset to NULL on failure */
    st = rl_headers_render(one, &c, RL_HEADER_STYLE_IETF, &h, &err);
    CHECK(h == NULL, "out reset on failure");
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `policies`: holds 1 policies but the result has 2 decisions; give one policy per "
                 "rule, in the rules' order");
    body = (char *)&c;
    st = rl_problem_body(one, &c, &body, &err);
    CHECK(body == NULL, "out reset on failure");
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `policies`: holds 1 policies but the result has 2 decisions; give one policy per "
                 "rule, in the rules' order");
    st = rl_headers_render(ps, &c, 7, &h, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT,
                 "invalid argument `style`: is 7; use an rl_header_style (RL_HEADER_STYLE_IETF ..)");
    st = rl_headers_render(ps, &c, -1, &h, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, NULL);
    rl_composite bad = c;
    bad.struct_size = 8;
    st = rl_headers_render(ps, &bad, RL_HEADER_STYLE_IETF, &h, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err &&
              starts_with(rl_error_message(err), "invalid argument `composite`: struct_size is 8"),
          "%s", rl_error_message(err));
    rl_error_free(err);
    st = rl_headers_render(NULL, &c, RL_HEADER_STYLE_IETF, &h, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `policies`: must not be NULL");
    st = rl_headers_render(ps, NULL, RL_HEADER_STYLE_IETF, &h, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `composite`: must not be NULL");
    st = rl_headers_render(ps, &c, RL_HEADER_STYLE_IETF, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
    st = rl_problem_body(ps, &c, NULL, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `out`: must not be NULL");
    CHECK(rl_headers_len(NULL) == 0, "len of NULL");
    rl_headers_free(NULL);
    rl_policies_free(one);
    rl_policies_free(ps);
}

/* Headers for a real allowed call and a real denied one, on the suite's backend. */
void test_headers_for_calls(void) {
    rl_limiter *l = open_or_die();
    rl_policies *ps = NULL;
    CHECK(rl_policies_parse("burst: 2/10m; daily: 10/d", &ps, NULL) == RL_OK, "parse");
    if (!ps) {
        rl_limiter_free(l);
        return;
    }
    char key[128];
    size_t n = unique_key(key, sizeof key, "headers");
    rl_rule rules[2];
    for (size_t i = 0; i < 2; i++) {
        rl_policy p;
        CHECK(rl_policies_get(ps, i, &p, NULL) == RL_OK, "get");
        rules[i] = rule(key, n, p.limit, p.window_ms, 1);
    }
    rl_decision ds[2];
    rl_composite c = composite_over(ds, 2);
    CHECK(rl_acquire_all(l, rules, 2, NULL, 0, &c, NULL) == RL_OK && c.allowed, "first call allowed");
    rl_headers *h = render(ps, &c, RL_HEADER_STYLE_IETF);
    /* A fresh window admitted now is empty again after exactly its length. */
    CHECK(field_is(h, "RateLimit-Policy", "\"burst\";q=2;w=600, \"daily\";q=10;w=86400") &&
              field_is(h, "RateLimit", "\"burst\";r=1;t=600, \"daily\";r=9;t=86400"),
          "allowed fields");
    CHECK(field(h, "Retry-After") == NULL && rl_headers_len(h) == 2, "no Retry-After on an allowed call");
    char *body = NULL;
    CHECK(rl_problem_body(ps, &c, &body, NULL) == RL_OK && body && strstr(body, "\"violated-policies\":[]"),
          "an allowed result violates nothing: %s", body ? body : "(null)");
    rl_string_free(body);
    rl_headers_free(h);

    CHECK(rl_acquire_all(l, rules, 2, NULL, 0, &c, NULL) == RL_OK && c.allowed, "second call allowed");
    CHECK(rl_acquire_all(l, rules, 2, NULL, 0, &c, NULL) == RL_OK && !c.allowed, "third call denied");
    h = render(ps, &c, RL_HEADER_STYLE_IETF);
    /* Denied by the burst: room again within its 600 s; the daily would admit with 8 left. */
    uint64_t t = (c.retry_after_ms + 999) / 1000;
    char want_state[160], want_retry[32];
    snprintf(want_state, sizeof want_state, "\"burst\";r=0;t=%" PRIu64 ", \"daily\";r=8;t=86400", t);
    snprintf(want_retry, sizeof want_retry, "%" PRIu64, t);
    CHECK(t >= 599 && t <= 600, "retry after %" PRIu64 " ms", c.retry_after_ms);
    CHECK(field_is(h, "RateLimit", want_state) && field_is(h, "Retry-After", want_retry) && rl_headers_len(h) == 3,
          "denied fields");
    CHECK(rl_problem_body(ps, &c, &body, NULL) == RL_OK && body && strstr(body, "\"violated-policies\":[\"burst\"]"),
          "body: %s", body ? body : "(null)");
    rl_string_free(body);
    rl_headers_free(h);
    rl_policies_free(ps);
    rl_limiter_free(l);
}

/* Whether one more permit fits key's window inside group (limit 1): an rl_acquire_all that takes it
 * when it does. The only view C has of a grouped window. */
static int grouped_fits(rl_limiter *l, const char *key, size_t n, const char *group) {
    rl_rule one[1] = {rule(key, n, 1, LONG_WINDOW, 1)};
    rl_decision ds[1];
    rl_composite c = composite_over(ds, 1);
    rl_error *err = NULL;
    rl_status st = rl_acquire_all(l, one, 1, (const uint8_t *)group, strlen(group), &c, &err);
    CHECK(st == RL_OK, "acquire_all in %s: %s", group, rl_error_message(err));
    rl_error_free(err);
    return st == RL_OK && c.allowed;
}

/* rl_reset_in_group clears the key's window in that group only: the ungrouped window and the one
 * in another group keep what they admitted. */
void test_composite_reset_in_group(void) {
    rl_limiter *l = open_or_die();
    char k[128];
    size_t nk = unique_key(k, sizeof k, "reset_grp");
    rl_decision d;
    rl_error *err = NULL;
    CHECK(grouped_fits(l, k, nk, "tenant-7") && !grouped_fits(l, k, nk, "tenant-7"), "tenant-7's window is full");
    CHECK(grouped_fits(l, k, nk, "tenant-8") && !grouped_fits(l, k, nk, "tenant-8"), "tenant-8's window is full");
    CHECK(rl_acquire(l, (const uint8_t *)k, nk, 1, LONG_WINDOW, 1, &d, NULL) == RL_OK && d.allowed, "ungrouped admits");

    rl_status st = rl_reset_in_group(l, (const uint8_t *)k, nk, (const uint8_t *)"tenant-7", 8, &err);
    CHECK(st == RL_OK && err == NULL, "reset_in_group: %s", rl_error_message(err));
    rl_error_free(err);
    err = NULL;
    CHECK(grouped_fits(l, k, nk, "tenant-7"), "tenant-7's window was cleared");
    CHECK(!grouped_fits(l, k, nk, "tenant-8"), "tenant-8's window is untouched");
    CHECK(used_now(l, k, nk, 1, LONG_WINDOW) == 1, "the ungrouped window is untouched");

    /* Without a group it is rl_reset: the ungrouped window only. */
    CHECK(rl_reset_in_group(l, (const uint8_t *)k, nk, NULL, 0, NULL) == RL_OK, "reset_in_group without a group");
    CHECK(used_now(l, k, nk, 1, LONG_WINDOW) == 0, "the ungrouped window was cleared");
    CHECK(!grouped_fits(l, k, nk, "tenant-7"), "tenant-7's window is untouched by the ungrouped reset");

    st = rl_reset_in_group(l, (const uint8_t *)k, nk, (const uint8_t *)"g", 0, &err);
    EXPECT_ERROR(st, err, RL_INVALID_ARGUMENT, "invalid argument `group`: is 0 bytes; must be 1 to 1024 (or no group)");
    st = rl_reset_in_group(l, NULL, 0, (const uint8_t *)"g", 1, &err);
    CHECK(st == RL_INVALID_ARGUMENT && err && starts_with(rl_error_message(err), "invalid argument `key`"), "NULL key: %s",
          rl_error_message(err));
    rl_error_free(err);
    err = NULL;
    st = rl_reset_in_group(NULL, (const uint8_t *)k, nk, NULL, 0, &err);
    CHECK(st == RL_INVALID_ARGUMENT, "NULL limiter: %s", rl_status_name((int)st));
    rl_error_free(err);
    rl_limiter_free(l);
}
