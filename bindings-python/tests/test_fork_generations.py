"""Each fork generation is its own instance, and a fork never copies a held lock into the child
(issue 11, defects 1 and 2).

1. A real `gunicorn --preload` app (tests/fork_app.py): the limiter is made at import in the
   master, then 4 sync workers are forked. Each worker must be its own instance: its own id in the
   fleet's heartbeats (so `instances` is discovered as 4 and each local share is limit/4) and its
   own repair tokens (`<instance id>:<flush number>`), so no worker's local permits are dropped
   as another's repair. The app is queried over HTTP until every worker (by pid) has answered.
2. 200 forks while 8 threads (and, for Redis, the limiter's background task) are inside calls:
   no child may hang on a lock a parent thread held at the instant of fork().
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest

import rl
from conftest import HERE, Server, run_script

WORKERS = 4
Reply = Dict[str, Any]


class App:
    """`gunicorn --preload -w 4` serving fork_app on a socket bound here (no port race: gunicorn
    inherits it as fd://N). Stopped by its pid (its whole session) in `stop`."""

    def __init__(self, url: str, prefix: str) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.set_inheritable(True)
        self.base = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        self.log = Path(os.environ.get("TMPDIR", "/tmp")) / f"rl-gunicorn-{os.getpid()}-{time.time_ns()}.log"
        env = dict(os.environ, RL_FORK_APP_URL=url, RL_FORK_APP_PREFIX=prefix)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gunicorn", "--preload", "--workers", str(WORKERS), "--worker-class", "sync",
                 "--bind", f"fd://{self.sock.fileno()}", "--chdir", str(HERE), "--timeout", "60",
                 "--graceful-timeout", "5", "--log-level", "warning", "fork_app:app"],
                pass_fds=[self.sock.fileno()], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
            )

    def get(self, path: str, timeout: float = 30.0, **params: Any) -> Reply:
        query = "&".join(f"{k}={v}" for k, v in params.items())
        with urllib.request.urlopen(f"{self.base}{path}?{query}", timeout=timeout) as r:
            reply: Reply = json.loads(r.read())
            return reply

    def each_worker(self, path: str, until: Callable[[Reply], bool] = lambda r: True, first: bool = False,
                    timeout: float = 30.0, **params: Any) -> Dict[int, Reply]:
        """Sends `path` in rounds of 8 concurrent requests (each worker holds its reply for
        `hold` s, so the others get the rest) until every worker has answered with a reply
        `until` accepts, or `timeout` passes. Returns each worker's last reply (its first with
        `first`), by the worker's own numbering (`seq`), keyed by pid."""
        got: Dict[int, Reply] = {}
        end = time.monotonic() + timeout
        with concurrent.futures.ThreadPoolExecutor(2 * WORKERS) as pool:
            while True:
                # pool.map yields in submission order, not in the order a worker served them.
                for reply in pool.map(lambda _: self.get(path, **params), range(2 * WORKERS)):
                    old = got.get(reply["pid"])
                    if old is None or (reply["seq"] < old["seq"]) == first:
                        got[reply["pid"]] = reply
                if len(got) >= WORKERS and all(until(r) for r in got.values()):
                    return got
                if time.monotonic() > end:
                    return got

    def stop(self) -> str:
        """Stops gunicorn (SIGTERM, then SIGKILL to its session); returns its log."""
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)
        self.sock.close()
        text = self.log.read_text(errors="replace")
        self.log.unlink()
        return text


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    return f"forkgen:{request.node.name}:{time.time_ns()}:"


def start(server: Server, prefix: str) -> App:
    app = App(server.url, prefix)
    try:
        # Each worker's first call starts its heartbeats.
        app.each_worker("/acquire", key="warm-up", limit=10**6, window_ms=60_000, hold=0.3)
    except BaseException:
        print(app.stop())
        raise
    return app


def wait_for_four(app: App) -> Dict[int, Reply]:
    """Until each worker counts 4 live instances (heartbeats are sent every second), at most 20 s."""
    return app.each_worker("/stats", until=lambda r: r["stats"]["instances"] == WORKERS, timeout=20, hold=0.2)


def test_preloaded_gunicorn_workers_are_four_instances(server: Server, prefix: str) -> None:
    app = start(server, prefix)
    try:
        replies = wait_for_four(app)
        master_id = next(iter(replies.values()))["master_id"]
        members = sorted(m.decode() for m in server.call("ZRANGE", f"{prefix}instances", "0", "-1"))  # type: ignore[union-attr]
    finally:
        log = app.stop()
    assert len(replies) == WORKERS, f"only {len(replies)} workers answered; gunicorn log:\n{log}"
    problems: List[str] = []
    seen = {pid: r["stats"]["instances"] for pid, r in replies.items()}
    if any(n != WORKERS for n in seen.values()):
        problems.append(f"instances discovered per worker pid: {seen}, want {WORKERS} each")
    if len(members) != WORKERS or master_id in members:
        problems.append(f"heartbeat members {members}, want {WORKERS} (the master's id is {master_id})")
    ids = {pid: r["instance_id"] for pid, r in replies.items()}
    if len(set(ids.values())) != WORKERS or master_id in ids.values():
        problems.append(f"instance_id per worker pid: {ids}, want {WORKERS} distinct, none the master's {master_id}")
    elif sorted(ids.values()) != members:
        problems.append(f"instance_id per worker {ids} are not the heartbeat members {members}")
    assert not problems, "\n".join(problems)


def test_preloaded_gunicorn_workers_local_budget_and_repair_tokens(server: Server, prefix: str) -> None:
    """Redis frozen: each worker admits limit/4 locally (remaining = limit/4 - used). Redis back:
    each worker's permits are written back under a token of its own (one `l:<token>` field per
    worker in the key's repair marker), so Redis then holds every permit the workers admitted."""
    limit, key = 40, "budget"
    share = limit // WORKERS
    problems: List[str] = []
    app = start(server, prefix)
    try:
        before = wait_for_four(app)
        server.freeze()
        try:
            drains = app.each_worker("/drain", first=True, key=key, limit=limit, window_ms=60_000, hold=0.5)
        finally:
            server.thaw()
        # Back to normal, each having written its local permits back.
        after = app.each_worker("/stats", until=lambda r: r["stats"]["mode"] == "normal" and r["stats"]["repairs"] >= 1,
                                timeout=30, hold=0.2)
        members = sorted(m.decode() for m in server.call("ZRANGE", f"{prefix}instances", "0", "-1"))  # type: ignore[union-attr]
    finally:
        log = app.stop()
    assert len(drains) == WORKERS, f"only {len(drains)} workers answered; gunicorn log:\n{log}"
    print("instances before the freeze:", {pid: r["stats"]["instances"] for pid, r in before.items()})
    admitted = 0
    for pid, r in sorted(drains.items()):
        ds = r["decisions"]
        allowed = [d for d in ds if d["allowed"]]
        admitted += len(allowed)
        if any(d["mode"] != "local" for d in ds):
            problems.append(f"worker {pid}: not all decisions local: {ds[:3]}...")
        if len(allowed) != share or ds[0]["remaining"] != share - 1:
            problems.append(f"worker {pid}: admitted {len(allowed)} locally (first remaining {ds[0]['remaining']}), "
                            f"want the local budget {limit}/{WORKERS} = {share} (first remaining {share - 1})")
    not_back = {pid: r["stats"]["mode"] for pid, r in after.items() if r["stats"]["mode"] != "normal" or r["stats"]["repairs"] < 1}
    if len(after) != WORKERS or not_back:
        problems.append(f"workers not back to normal with a repair after 30 s: {not_back} ({len(after)} answered)")
    probe = rl.Limiter(server.url, key_prefix=prefix, local_fallback=False)
    marker = server.call("HGETALL", probe.redis_key(key) + b":repair")
    assert isinstance(marker, list)
    tokens = sorted(f.decode()[2:] for f in marker[0::2] if f.startswith(b"l:"))
    # Tokens are `<instance id>:<flush number>`: one per worker, with the ids the workers
    # heartbeat with.
    token_ids = sorted(t.rsplit(":", 1)[0] for t in tokens)
    if len(tokens) != WORKERS or len(set(token_ids)) != WORKERS or token_ids != members:
        problems.append(f"repair tokens in the marker: {tokens}; want one per worker, of the heartbeat members {members}")
    in_redis = probe.peek(key, limit, 60_000).used
    probe.close()
    # No local permit may be dropped. Each worker's first call was already written to Redis when
    # it froze; Redis decides it on thawing although the caller was answered locally: at most one
    # extra permit per worker.
    if not admitted <= in_redis <= admitted + WORKERS:
        problems.append(f"Redis holds {in_redis} permits after the repairs; the workers admitted {admitted} locally "
                        f"(want {admitted}..{admitted + WORKERS}: plus at most each worker's call in flight at the freeze)")
    assert not problems, "\n".join(problems)


CHILD_AFTER_LOCAL = r"""
import json, os, signal, sys, time
import rl

url, redis_pid, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
opts = dict(request_timeout_ms=2000, degrade_rtt_ms=200, degrade_after_ms=200, recover_rtt_ms=100,
            recover_after_ms=300, instances=1)
lim = rl.Limiter(url, **opts)
assert lim.acquire(key, 100, 60_000).mode == "normal"  # and the background task runs
parent_id = lim.instance_id

def wait_normal(deadline):
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        s = lim.stats()
        if s.mode == "normal":
            return s
        time.sleep(0.02)
    return lim.stats()

os.kill(redis_pid, signal.SIGSTOP)
local = [lim.acquire(key, 100, 60_000) for _ in range(5)]
assert all(d.allowed and d.mode == "local" for d in local), local
pid = os.fork()
if pid == 0:
    # The child uses the limiter (a peek admits nothing) and waits until it is back to normal:
    # any repair it would send is done by then.
    lim.peek(key + ":child", 100, 60_000)
    os._exit(0 if wait_normal(30).mode == "normal" else 1)
os.kill(redis_pid, signal.SIGCONT)
end, status = time.monotonic() + 40, None
while time.monotonic() < end and status is None:
    p, st = os.waitpid(pid, os.WNOHANG)
    if p == pid:
        status = os.waitstatus_to_exitcode(st)
    time.sleep(0.01)
if status is None:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
    status = "hung"
s = wait_normal(30)
probe = rl.Limiter(url, local_fallback=False)
print(json.dumps({"child": status, "parent_mode": s.mode, "parent_repairs": s.repairs, "parent_id": parent_id,
                  "used": probe.peek(key, 100, 60_000).used, "marker_key": probe.redis_key(key).decode() + ":repair"}))
"""


def test_child_does_not_repair_the_parents_local_permits(server: Server, key: str) -> None:
    """The parent admits 5 permits locally (Redis frozen), then forks. The permits are the
    parent's to write back: a child, whatever its own id and flush numbers, must not send them
    again (that would count them twice in Redis). One `l:` token in the marker, the parent's."""
    try:
        r = run_script(CHILD_AFTER_LOCAL, server.url, str(server.pid), key, timeout=120)
    finally:
        os.kill(server.pid, signal.SIGCONT)  # whatever the script did
    assert r.returncode == 0 and r.stdout.strip(), f"rc={r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["child"] == 0 and out["parent_mode"] == "normal" and out["parent_repairs"] >= 1, out
    marker = server.call("HGETALL", out["marker_key"])
    assert isinstance(marker, list)
    tokens = [f.decode()[2:] for f in marker[0::2] if f.startswith(b"l:")]
    assert len(tokens) == 1 and tokens[0].rsplit(":", 1)[0] == out["parent_id"], f"repair tokens {tokens}; parent {out['parent_id']}"
    # 1 before the freeze + 5 local; + 1 if the first call at the freeze reached Redis anyway.
    assert 6 <= out["used"] <= 7, f"Redis holds {out['used']} permits; the parent admitted 1 + 5 (+1 in flight at the freeze)"


# ---- fork() while 8 threads are mid-call ----------------------------------------------------

FORK_WHILE_BUSY = r'''
import json, os, sys, threading, time
import rl

kind, url, key = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "memory":
    lim = rl.Limiter()
else:
    # "redis": Redis decides (round trips recorded, permits logged for the fallback);
    # "redis-down": nothing listens, so every decision is local (on the ledger, under its locks).
    lim = rl.Limiter(url, request_timeout_ms=5000, retry_delay_ms=1)
LIMIT = 10**9
first = lim.acquire(key, LIMIT, 60_000)  # starts the background task (heartbeats or probes)
stop = threading.Event()
calls, errors = [0] * 8, []

def hammer(i):
    while not stop.is_set():
        try:
            lim.acquire(key, LIMIT, 60_000)
            calls[i] += 1
        except Exception as e:
            errors.append(repr(e))

threads = [threading.Thread(target=hammer, args=(i,), daemon=True) for i in range(8)]
for t in threads:
    t.start()
time.sleep(0.1)
hung, failed, forks = [], [], 0
for i in range(200):
    pid = os.fork()
    if pid == 0:
        try:
            ok = lim.acquire(key, LIMIT, 60_000).allowed
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    forks += 1
    end, status = time.monotonic() + 10, None
    while time.monotonic() < end:
        p, st = os.waitpid(pid, os.WNOHANG)
        if p == pid:
            status = os.waitstatus_to_exitcode(st)
            break
        time.sleep(0.002)
    if status is None:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        hung.append(i)
        if len(hung) >= 3:
            break  # enough to show it; 10 s per hung child
    elif status != 0:
        failed.append((i, status))
stop.set()
for t in threads:
    t.join(15)
print(json.dumps({"mode": first.mode, "forks": forks, "hung": hung, "failed": failed, "calls": sum(calls),
                  "errors": errors[:3], "alive": sum(t.is_alive() for t in threads)}))
'''


@pytest.mark.parametrize("kind", ["redis", "redis-down", "memory"])
def test_fork_200_times_while_8_threads_are_mid_call(kind: str, redis_url: str, key: str) -> None:
    """For "memory", the binding holds the GIL through each call, so no other thread can be inside
    the memory backend at a fork; this guards that (a change that released the GIL there would
    expose its shard locks)."""
    url = redis_url
    if kind == "redis-down":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        url = "redis://127.0.0.1:%d" % s.getsockname()[1]
        s.close()
    r = run_script(FORK_WHILE_BUSY, kind, url, key, timeout=240)
    assert r.returncode == 0 and r.stdout.strip(), f"rc={r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    out = json.loads(r.stdout.strip().splitlines()[-1])
    print(kind, out)
    want_mode = {"redis": "normal", "redis-down": "local", "memory": "memory"}[kind]
    assert out["mode"] == want_mode, out
    assert out["hung"] == [] and out["failed"] == [], (
        f"{len(out['hung'])} of {out['forks']} children hung (killed after 10 s) and {len(out['failed'])} failed "
        f"while 8 threads made {out['calls']} calls: {out}"
    )
    assert out["forks"] == 200 and out["errors"] == [] and out["alive"] == 0, out
    assert out["calls"] > 0, out
