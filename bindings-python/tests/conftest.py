"""Fixtures: real redis-server processes from the project's harness (tests/harness).

Under `rl-harness run -- python -m pytest ...` the shared server comes from RL_TEST_REDIS_URL.
Tests that kill, freeze or restart Redis get a private server from `rl-harness start --json`,
stopped (by pid) after the test. Nothing here assumes a Redis already running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator, List, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent


def harness_binary() -> str:
    found = os.environ.get("RL_HARNESS") or str(ROOT / "target" / "debug" / "rl-harness")
    if not os.path.exists(found):
        pytest.exit(f"rl-harness not found at {found}; run `cargo build -p rl-harness` first", returncode=2)
    return found


def resp(port: int, *args: bytes | str, timeout: float = 5.0) -> object:
    """One command to 127.0.0.1:port over a fresh connection; a minimal RESP2 client."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        out = b"*%d\r\n" % len(args)
        for a in args:
            b = a.encode() if isinstance(a, str) else a
            out += b"$%d\r\n%s\r\n" % (len(b), b)
        s.sendall(out)
        f = s.makefile("rb")
        return _read(f)


def _read(f) -> object:  # type: ignore[no-untyped-def]
    line = f.readline()
    if not line:
        raise ConnectionError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        raise RuntimeError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)[:-2]
        return data
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read(f) for _ in range(n)]
    raise RuntimeError(f"unexpected reply {line!r}")


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


class Server:
    """A private redis-server from `rl-harness start`, which a test may kill, freeze and restart
    on the same port."""

    def __init__(self) -> None:
        out = subprocess.run([harness_binary(), "start", "--json"], check=True, capture_output=True, text=True).stdout
        info = json.loads(out.strip().splitlines()[-1])
        self.url: str = info["url"]
        self.port: int = info["port"]
        self.pid: int = info["pid"]
        self.dir: str = info["dir"]
        # redis-server rewrites its process title, so its argv is rebuilt here, the same flags
        # as the harness gives it (tests/harness/src/server.rs), for a restart on the same port.
        # (argv[0] still leads the title; /proc/PID/exe would name redis-check-rdb, which
        # redis-server is a link to and which behaves by the name it is called with).
        with open(f"/proc/{self.pid}/cmdline", "rb") as f:
            binary = f.read().split(b"\0")[0].split(b" ")[0].decode()
        self._argv: List[str] = [
            binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no",
            "--daemonize", "no", "--protected-mode", "no", "--dir", self.dir, "--logfile", os.path.join(self.dir, "redis.log"),
        ]
        self._child: Optional[subprocess.Popen[bytes]] = None
        self.frozen = False

    def call(self, *args: bytes | str) -> object:
        return resp(self.port, *args)

    def freeze(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)
        self.frozen = True

    def thaw(self) -> None:
        os.kill(self.pid, signal.SIGCONT)
        self.frozen = False

    def kill(self) -> None:
        """A crash: SIGKILL, no shutdown."""
        if self.frozen:
            self.thaw()
        os.kill(self.pid, signal.SIGKILL)
        if self._child is not None:
            self._child.wait(10)
            self._child = None
        deadline = time.monotonic() + 10
        while pid_alive(self.pid):
            assert time.monotonic() < deadline, f"redis-server {self.pid} survived SIGKILL"
            time.sleep(0.01)

    def restart(self) -> None:
        """The same redis-server command line again, so on the same port (data is not kept)."""
        log = open(os.path.join(self.dir, "redis.log"), "ab")
        self._child = subprocess.Popen(self._argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        log.close()
        self.pid = self._child.pid
        deadline = time.monotonic() + 10
        while True:
            try:
                if self.call("PING") == "PONG":
                    return
            except OSError:
                pass
            assert time.monotonic() < deadline, "restarted redis-server did not answer"
            time.sleep(0.02)

    def stop(self) -> None:
        if self.frozen:
            self.thaw()
        if self._child is not None:
            self._child.terminate()
            try:
                self._child.wait(5)
            except subprocess.TimeoutExpired:
                self._child.kill()
                self._child.wait(5)
            self._child = None
        subprocess.run([harness_binary(), "stop", "--pid", str(self.pid), "--dir", self.dir], check=True)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    url = os.environ.get("RL_TEST_REDIS_URL")
    if url:
        yield url
        return
    server = Server()
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def redis_port(redis_url: str) -> int:
    return int(redis_url.rsplit(":", 1)[1].strip("/"))


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    """A key no other test uses (the shared server is shared by the whole session)."""
    return f"pytest:{request.node.nodeid}:{time.time_ns()}"


def run_script(source: str, *args: str, timeout: float = 30.0, env: Optional[dict] = None) -> subprocess.CompletedProcess[str]:
    """Runs `source` in a fresh interpreter in its own session (fork and exit tests must not take
    pytest with them). On timeout the whole session is killed and the test fails: a hang."""
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.Popen([sys.executable, "-c", source, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        pytest.fail(f"script hung for {timeout} s and was killed\nstdout:\n{out}\nstderr:\n{err}")
    # Anything the script forked is in its session; none may outlive it.
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)
