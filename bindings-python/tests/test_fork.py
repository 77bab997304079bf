"""fork() (gunicorn --preload, Celery prefork, multiprocessing): a limiter made and used before
the fork works in the child, the parent is unaffected, and nothing hangs or crashes, even when
other threads are mid-call at the moment of the fork. Each scenario runs in a fresh interpreter
with a deadline per child; a hung child is killed and fails the test."""

from __future__ import annotations

from conftest import run_script

PRELUDE = r'''
import asyncio, os, sys, threading, time
import rl

url, key = sys.argv[1], sys.argv[2]

def wait(pid, deadline=15.0):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        p, status = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    return "hung"
'''


def check(result: object) -> None:
    r = result  # subprocess.CompletedProcess
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), f"rc={r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"  # type: ignore[attr-defined]


def test_limiters_made_before_fork_work_in_the_child(redis_url: str, key: str) -> None:
    src = PRELUDE + r'''
lim, alim, mem = rl.Limiter(url), rl.AsyncLimiter(url), rl.Limiter()
assert lim.acquire(key, 100, 60_000).used == 1
assert asyncio.run(alim.acquire(key, 100, 60_000)).used == 2
assert mem.acquire("m", 100, 60_000).used == 1

pid = os.fork()
if pid == 0:
    code = 1
    try:
        d = lim.acquire(key, 100, 60_000)
        a = asyncio.run(alim.acquire(key, 100, 60_000))
        m = mem.acquire("m", 100, 60_000)
        # The memory backend is per process: the child starts with empty windows.
        if (d.used, a.used, m.used) == (3, 4, 1):
            code = 0
        else:
            print("child saw", d, a, m, flush=True)
    except BaseException as e:
        print("child failed:", repr(e), flush=True)
    os._exit(code)
rc = wait(pid)
assert rc == 0, f"child: {rc}"
# The parent's connection still works and sees the child's permits; its memory backend was not
# shared with the child.
assert lim.acquire(key, 100, 60_000).used == 5
assert asyncio.run(alim.acquire(key, 100, 60_000)).used == 6
assert mem.acquire("m", 100, 60_000).used == 2
print("ok")
'''
    check(run_script(src, redis_url, key, timeout=60))


def test_parent_and_child_never_share_a_socket(redis_url: str, key: str) -> None:
    """A sync call alone on its key goes on a socket of the limiter's own (the core's in-place
    path): after fork the child must make its own, or parent and child would read each other's
    replies. Both call at once, each on its own key, and each reply must be its own key's count."""
    src = PRELUDE + r'''
lim = rl.Limiter(url)
assert lim.acquire(key + ":parent", 10**6, 60_000).used == 1   # the parent's socket exists

def run(k, start):
    for i in range(start, start + 400):
        d = lim.acquire(k, 10**6, 60_000)
        if d.used != i:
            return f"{k}: call {i} answered used={d.used}"
    return None

pid = os.fork()
if pid == 0:
    err = run(key + ":child", 1)
    if err:
        print("child:", err, flush=True)
    os._exit(1 if err else 0)
err = run(key + ":parent", 2)
rc = wait(pid, 60)
assert err is None, err
assert rc == 0, f"child: {rc}"
print("ok")
'''
    check(run_script(src, redis_url, key, timeout=90))


def test_fork_while_other_threads_are_mid_call(redis_url: str, key: str) -> None:
    """Threads hammer the limiter (sync and async) while the main thread forks children; some
    children use the inherited limiters, some only close them, some exit through the normal
    interpreter shutdown with them still alive. None may hang or crash."""
    src = PRELUDE + r'''
lim, alim = rl.Limiter(url), rl.AsyncLimiter(url)
stop = threading.Event()

def sync_hammer():
    while not stop.is_set():
        lim.acquire(key, 10**9, 60_000)

def async_hammer():
    async def main():
        while not stop.is_set():
            await asyncio.gather(*(alim.acquire(key, 10**9, 60_000) for _ in range(16)))
    asyncio.run(main())

threads = [threading.Thread(target=sync_hammer) for _ in range(3)] + [threading.Thread(target=async_hammer)]
for t in threads:
    t.start()
time.sleep(0.2)
results = []
for i in range(9):
    pid = os.fork()
    if pid == 0:
        kind = i % 3
        if kind == 0:    # use both, leave with _exit (what multiprocessing does)
            ok = lim.acquire(key, 10**9, 60_000).allowed and asyncio.run(alim.acquire(key, 10**9, 60_000)).allowed
            os._exit(0 if ok else 1)
        elif kind == 1:  # never use them; close them; normal interpreter exit
            lim.close(); alim.close()
            sys.exit(0)
        else:            # use the sync one, then a normal exit with both still open
            lim.acquire(key, 10**9, 60_000)
            sys.exit(0)
    results.append(wait(pid))
    time.sleep(0.02)
stop.set()
for t in threads:
    t.join(15)
assert results == [0] * 9, results
assert lim.acquire(key, 10**9, 60_000).allowed
print("ok")
'''
    check(run_script(src, redis_url, key, timeout=120))


def test_multiprocessing_fork_pool(redis_url: str, key: str) -> None:
    """The Celery-prefork shape: a module-level limiter, a pool of forked workers."""
    src = PRELUDE + r'''
import multiprocessing as mp

LIM = rl.Limiter(url)
LIM.acquire(key, 1000, 60_000)

def work(_):
    return LIM.acquire(key, 1000, 60_000).allowed

if __name__ == "__main__":
    with mp.get_context("fork").Pool(2) as pool:
        got = pool.map_async(work, range(40)).get(timeout=30)
    assert all(got) and len(got) == 40, got
    assert LIM.peek(key, 1000, 60_000).used == 41
    print("ok")
'''
    check(run_script(src, redis_url, key, timeout=60))
