"""Interpreter exit with live limiters never hangs or crashes: not with calls in flight on other
threads (which CPython ends by force at shutdown), not with asyncio calls pending, not while a
call waits on a frozen Redis."""

from __future__ import annotations

import time
from typing import Any

from conftest import run_script


def check(r: Any, expect_rc: int = 0) -> None:
    assert r.returncode == expect_rc, f"rc={r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"


def test_exit_with_live_limiters(redis_url: str, key: str) -> None:
    src = r'''
import asyncio, sys, rl
url, key = sys.argv[1], sys.argv[2]
lim, alim, mem = rl.Limiter(url), rl.AsyncLimiter(url), rl.Limiter()
lim.acquire(key, 10, 1000); mem.acquire(key, 10, 1000)
asyncio.run(alim.acquire(key, 10, 1000))
print("bye")
'''
    r = run_script(src, redis_url, key, timeout=20)
    check(r)
    assert r.stdout.strip() == "bye"


def test_exit_while_daemon_threads_are_mid_call(redis_url: str, key: str) -> None:
    src = r'''
import sys, threading, time, rl
url, key = sys.argv[1], sys.argv[2]
lim = rl.Limiter(url)
def hammer():
    while True:
        lim.acquire(key, 10**9, 60_000)
for _ in range(16):
    threading.Thread(target=hammer, daemon=True).start()
time.sleep(0.3)
'''
    for _ in range(3):
        check(run_script(src, redis_url, key, timeout=20))


def test_exit_while_daemon_threads_run_asyncio_loops(redis_url: str, key: str) -> None:
    src = r'''
import asyncio, sys, threading, time, rl
url, key = sys.argv[1], sys.argv[2]
lim = rl.AsyncLimiter(url)
def hammer():
    async def main():
        while True:
            await asyncio.gather(*(lim.acquire(key, 10**9, 60_000) for _ in range(32)))
    asyncio.run(main())
for _ in range(4):
    threading.Thread(target=hammer, daemon=True).start()
time.sleep(0.3)
'''
    for _ in range(3):
        check(run_script(src, redis_url, key, timeout=20))


def test_exit_with_async_calls_pending(redis_url: str, key: str) -> None:
    src = r'''
import asyncio, sys, rl
url, key = sys.argv[1], sys.argv[2]
alim = rl.AsyncLimiter(url)
async def main():
    for _ in range(200):
        asyncio.ensure_future(alim.acquire(key, 10**9, 60_000))
    await asyncio.sleep(0)
loop = asyncio.new_event_loop()
loop.run_until_complete(main())
# the loop is left open with futures unresolved; the interpreter just exits
'''
    check(run_script(src, redis_url, key, timeout=20))


def test_exit_while_a_call_waits_on_a_frozen_redis(server: Any, key: str) -> None:
    src = r'''
import sys, threading, time, rl
url, key = sys.argv[1], sys.argv[2]
lim = rl.Limiter(url, request_timeout_ms=3000)
lim.ping()
print("ready", flush=True)
while not open(sys.argv[3]).read():
    time.sleep(0.01)
threading.Thread(target=lambda: lim.acquire(key, 10, 1000), daemon=True).start()
time.sleep(0.2)
'''
    import os
    import tempfile

    with tempfile.NamedTemporaryFile("w", delete=False) as flag:
        pass
    try:
        # Freeze Redis once the script is connected, then let it start the doomed call and exit.
        import subprocess
        import sys

        p = subprocess.Popen([sys.executable, "-c", src, server.url, key, flag.name], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        server.freeze()
        with open(flag.name, "w") as f:
            f.write("go")
        start = time.monotonic()
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise AssertionError("the interpreter hung at exit")
        out, err = p.communicate()
        assert p.returncode == 0, err
        assert time.monotonic() - start < 2.5, "exit waited for the Redis call"
    finally:
        server.thaw()
        os.unlink(flag.name)
