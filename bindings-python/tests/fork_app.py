"""The WSGI app test_fork_generations.py serves with `gunicorn --preload`: the limiter is made at
import, in gunicorn's master, before the workers are forked (issue 11, defect 1). Not a test
module (pytest collects test_*.py only).

Configured by the environment: RL_FORK_APP_URL (Redis), RL_FORK_APP_PREFIX (a key prefix of the
test's own, so the fleet's heartbeat set holds only these workers). Every reply is JSON and names
the worker (pid), the limiter's instance id and stats, and numbers the worker's replies (seq). `hold` (seconds) keeps the worker busy
after its work, so concurrent requests reach the other workers.

  GET /stats?hold=S                          the worker's limiter: instance id and stats()
  GET /acquire?key=K&limit=L&window_ms=W     one acquire
  GET /drain?key=K&limit=L&window_ms=W       acquire until denied (at most L + 1 calls)
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Callable, Dict, Iterable, List
from urllib.parse import parse_qs

import rl

# Local mode is entered quickly on a frozen Redis (200 ms above 200 ms) and left after 300 ms of
# probes under 100 ms, loose enough for a loaded 2-core machine.
LIMITER = rl.Limiter(
    os.environ["RL_FORK_APP_URL"],
    key_prefix=os.environ["RL_FORK_APP_PREFIX"],
    request_timeout_ms=2000,
    degrade_rtt_ms=200,
    degrade_after_ms=200,
    recover_rtt_ms=100,
    recover_after_ms=300,
)
MASTER_PID = os.getpid()
MASTER_ID = LIMITER.instance_id
# Requests this worker has served, numbered in the order it served them: replies to concurrent
# requests reach the test in any order, and "a worker's first drain" is the worker's order.
_served = 0


def _decision(d: rl.Decision) -> Dict[str, Any]:
    return {"allowed": d.allowed, "remaining": d.remaining, "used": d.used, "mode": d.mode}


def app(environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    q = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
    path = environ.get("PATH_INFO", "")
    body: Dict[str, Any] = {}
    if path in ("/acquire", "/drain"):
        key, limit, window_ms = q["key"], int(q["limit"]), int(q["window_ms"])
        decisions: List[Dict[str, Any]] = []
        while len(decisions) <= limit:
            d = LIMITER.acquire(key, limit, window_ms)
            decisions.append(_decision(d))
            if path == "/acquire" or not d.allowed:
                break
        body["decisions"] = decisions
    elif path != "/stats":
        start_response("404 Not Found", [("Content-Type", "text/plain")])
        return [b"not found\n"]
    global _served
    _served += 1
    body.update(
        seq=_served,
        pid=os.getpid(),
        master_pid=MASTER_PID,
        master_id=MASTER_ID,
        instance_id=LIMITER.instance_id,
        stats=LIMITER.stats().as_dict(),
    )
    time.sleep(float(q.get("hold", "0")))
    out = json.dumps(body).encode()
    start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(out)))])
    return [out]
