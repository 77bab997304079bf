"""Servers for the HTTP middleware tests: a free loopback port, a real server process started in
its own session and stopped by pid, readiness by polling, and the checks on the rate-limit fields
(parsed with http-sfv, an independent Structured Fields parser)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

import httpx
import http_sfv

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class AppServer:
    """uvicorn (kind "asgi", tests/asgi_app.py) or gunicorn (kind "wsgi", tests/wsgi_app.py)."""

    def __init__(self, kind: str, env: Dict[str, str], tmp: Path, workers: int = 1) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.served_file = tmp / f"served-{self.port}.log"
        self.hook_file = tmp / f"hook-{self.port}.log"
        e = dict(os.environ)
        e.update(env)
        e["RL_SERVED"] = str(self.served_file)
        e["RL_HOOKS"] = str(self.hook_file)
        if kind == "asgi":
            argv = [sys.executable, "-m", "uvicorn", "asgi_app:app", "--app-dir", str(HERE), "--host", "127.0.0.1",
                    "--port", str(self.port), "--log-level", "warning", "--no-access-log",
                    # uvicorn would otherwise take the client from X-Forwarded-For itself (its
                    # default trusts 127.0.0.1); the middleware's own option is under test.
                    "--no-proxy-headers"]
        else:
            argv = [sys.executable, "-m", "gunicorn", "--chdir", str(HERE), "-b", f"127.0.0.1:{self.port}", "-w", str(workers),
                    "--threads", "8", "--log-level", "warning", "wsgi_app:app"]
        self.log = open(tmp / f"server-{self.port}.log", "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT, env=e, start_new_session=True)
        deadline = time.monotonic() + 30
        while True:
            assert self.proc.poll() is None, f"{kind} server exited: {self.logs()}"
            try:
                if httpx.get(self.base + "/served", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, f"{kind} server did not start: {self.logs()}"
            time.sleep(0.05)

    def logs(self) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")

    def served(self) -> List[Tuple[str, int]]:
        """(path, decision time in ms) of every request the app's handlers served."""
        if not self.served_file.exists():
            return []
        out = []
        for line in self.served_file.read_text().splitlines():
            path, ms = line.split()
            out.append((path, int(ms)))
        return out

    def hooks(self) -> List[dict]:  # type: ignore[type-arg]
        if not self.hook_file.exists():
            return []
        return [json.loads(line) for line in self.hook_file.read_text().splitlines()]

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        except ProcessLookupError:
            pass
        self.log.close()


def sf_list(value: str) -> List[Tuple[str, Dict[str, int]]]:
    """An SF List of Strings with Integer parameters, parsed by http-sfv (raises if malformed)."""
    parsed = http_sfv.List()
    parsed.parse(value.encode())
    out = []
    for member in parsed:
        assert isinstance(member.value, str), f"{value!r}: a member is not a String"
        params = dict(member.params)
        assert all(isinstance(v, int) and not isinstance(v, bool) for v in params.values()), value
        out.append((member.value, params))
    return out


def ratelimit_fields(response: httpx.Response) -> Tuple[Dict[str, Dict[str, int]], Dict[str, Dict[str, int]]]:
    """RateLimit-Policy and RateLimit by policy name (several field lines are one list)."""
    policy = sf_list(", ".join(response.headers.get_list("RateLimit-Policy")))
    state = sf_list(", ".join(response.headers.get_list("RateLimit")))
    return dict(policy), dict(state)


def max_in_window(times_ms: List[int], window_ms: int) -> int:
    """The most timestamps in any span of window_ms (a sliding window, both ends considered)."""
    ts = sorted(times_ms)
    best, lo = 0, 0
    for hi, t in enumerate(ts):
        while t - ts[lo] >= window_ms:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def servers(*servers: AppServer) -> Iterator[None]:
    try:
        yield None
    finally:
        for s in servers:
            s.stop()


_ = Optional
