"""The Flask app the middleware tests serve under gunicorn (tests/test_http_wsgi.py), configured
like asgi_app.py by environment. Handlers append "<path> <decision now_ms>" to RL_SERVED."""

from __future__ import annotations

import json
import os
from typing import Any, Optional

from flask import Flask, g, jsonify, request

import rl
from rl.flask import RateLimiter

SERVED = os.environ["RL_SERVED"]
HOOKS = os.environ["RL_HOOKS"]

app = Flask(__name__)


def denied(req: Any, decision: rl.CompositeDecision) -> Optional[Any]:
    with open(HOOKS, "a") as f:
        f.write(json.dumps({"path": req.path, "retry_after_ms": decision.retry_after_ms}) + "\n")
    if req.path == "/hooked":
        return jsonify(custom=True), 429
    return None


limits = RateLimiter(
    app,
    url=os.environ["RL_URL"],
    key_prefix=os.environ["RL_PREFIX"],
    request_timeout_ms=int(os.environ.get("RL_TIMEOUT_MS", "1000")),
    **json.loads(os.environ.get("RL_OPTIONS", "{}")),
    policies=os.environ["RL_GLOBAL"],
    exempt=lambda: request.path == "/served",
    on_denied=denied,
    header_style=os.environ.get("RL_STYLE", "ietf"),
    trusted_proxy_header=os.environ.get("RL_PROXY") or None,
)


def record() -> None:
    with open(SERVED, "a") as f:
        f.write(f"{request.path} {g.rl_decision.now_ms}\n")


@app.get("/hello")
def hello() -> Any:
    record()
    return {"ok": True}


@app.get("/hooked")
def hooked() -> Any:
    record()
    return {"ok": True}


@app.get("/route")
@limits.limit("route: 2/s")
def route() -> Any:
    record()
    return {"ok": True}


@app.get("/free")
@limits.exempt
def free() -> Any:
    return {"free": True}


@app.get("/served")
def served() -> Any:
    return {"ok": True}
