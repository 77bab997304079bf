/* Open a limiter, take a permit, print the decision, free. Build and run:
 *   cc bindings-c/examples/getting_started.c $(pkg-config --cflags --libs rl)   # the SDK (README: Install)
 *   ./a.out                         # in-process memory backend
 *   ./a.out redis://127.0.0.1:6379/ # shared through Redis */
#include <stdio.h>
#include <string.h>
#include "rl.h"

int main(int argc, char **argv) {
    rl_limiter *limiter = NULL;
    rl_error *err = NULL;
    if (rl_limiter_open(argc > 1 ? argv[1] : NULL, NULL, &limiter, &err) != RL_OK) {
        fprintf(stderr, "open: %s\n", rl_error_message(err));
        rl_error_free(err);
        return 1;
    }
    rl_decision d;
    const char *key = "api:order:create";
    for (int i = 0; i < 4; i++) { /* 3 permits per 10 s: the 4th is denied */
        if (rl_acquire(limiter, (const uint8_t *)key, strlen(key), 3, 10000, 1, &d, &err) != RL_OK) {
            fprintf(stderr, "acquire: %s\n", rl_error_message(err));
            rl_error_free(err);
            break;
        }
        printf("%s: allowed=%d remaining=%llu retry_after_ms=%llu mode=%s\n", key, d.allowed,
               (unsigned long long)d.remaining, (unsigned long long)d.retry_after_ms, rl_mode_name(d.mode));
    }
    rl_limiter_free(limiter);
    return 0;
}
