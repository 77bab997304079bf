"""HTTP benchmark: wrk against the same tiny app without a limiter, with rl's middleware and with
the ecosystem's peer, one key, load above the limit. Reports req/s, P50/P99 (wrk), the most
requests the app served in any window (from its own timestamps) and Redis commands per request
(INFO commandstats before and after; it counts the commands a script runs too, so one
EVALSHA of a script that reads and writes a window counts as several). Then a moderate load:
vegeta's open loop at a fixed rate below the limit (everything admitted) and far below the apps'
capacity, the apps taken in turns for --rounds rounds: the P50/P99 of all of an app's rounds'
requests together (a P99 of one short round is its 3rd to 10th worst request, which one scheduler
hiccup moves; each round's P99 and their median are shown beside it), and what each limiter adds
to its framework's P99 without one. Each app first gets --warmup-seconds of the same load, not
measured; vegeta runs with GOGC=off (its own collector's pauses would land in every app's tail);
and each framework's app without a limiter runs twice per round (`<framework>-none-again`, an A/A
control): the gap between the two is the noise floor an "added" figure is to be read against.
Run by run.sh, under rl-harness (RL_TEST_REDIS_URL)."""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
VARIANTS = ["fastapi-none", "fastapi-rl", "fastapi-rl-leases", "fastapi-slowapi", "flask-none", "flask-rl", "flask-rl-leases", "flask-limiter"]
# Also accepted by --only: the middleware on the memory backend (its own cost, no Redis).
EXTRA_VARIANTS = ["fastapi-rl-memory", "flask-rl-memory", "flask-rl-stub", "flask-spin50", "flask-spin100", "flask-spin200"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def redis_calls(port: int) -> int:
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
        data = b""
        while True:
            data += s.recv(65536)
            m = re.match(rb"\$(\d+)\r\n", data)
            if m and len(data) >= m.end() + int(m.group(1)):
                break
    return sum(int(c) for c in re.findall(rb"calls=(\d+)", data))


def max_in_window(ts: list[int], window_ms: int) -> int:
    ts.sort()
    best = lo = 0
    for hi, t in enumerate(ts):
        while t - ts[lo] >= window_ms:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def ms(text: str) -> float:
    m = re.match(r"([\d.]+)(us|ms|s|m)$", text)
    if m is None:
        raise ValueError(f"wrk printed a latency of {text!r}")
    v, unit = m.groups()
    return float(v) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


def start(variant: str, args: argparse.Namespace, redis_url: str, tmp: Path, served: Path) -> "tuple[subprocess.Popen[bytes], str, object]":
    """Starts `variant` on a free port; its process, URL and log file, once it answers."""
    port = free_port()
    env = dict(os.environ, BENCH_VARIANT=variant, BENCH_REDIS=redis_url, BENCH_SERVED=str(served), BENCH_POLICY=args.policy,
               BENCH_TIME="1" if args.time else "0")
    if variant.startswith("fastapi"):
        argv = [sys.executable, "-m", "uvicorn", "apps:app", "--app-dir", str(HERE), "--port", str(port), "--host", "127.0.0.1",
                "--log-level", "warning", "--no-access-log", "--workers", str(args.workers)]
    else:
        argv = [sys.executable, "-m", "gunicorn", "--chdir", str(HERE), "-b", f"127.0.0.1:{port}", "-w", str(args.workers),
                "--threads", str(args.threads), "--log-level", "warning", "apps:app"]
    log = open(tmp / f"{variant}.log", "wb")
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            break
        except urllib.error.HTTPError:
            break  # a 429 is an answer too
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                stop(proc, log)
                raise RuntimeError(f"{variant} did not start: {(tmp / f'{variant}.log').read_text()}")
            time.sleep(0.1)
    return proc, url, log


def stop(proc: "subprocess.Popen[bytes]", log: object) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    log.close()  # type: ignore[attr-defined]


def latencies(vegeta: str, files: list[Path]) -> dict:  # type: ignore[type-arg]
    """vegeta's latency percentiles over every request of `files` (results of `vegeta attack`)."""
    out = subprocess.run([vegeta, "report", "-type=json", *map(str, files)], capture_output=True, check=True).stdout
    return json.loads(out)["latencies"]  # type: ignore[no-any-return]


def moderate(variant: str, args: argparse.Namespace, redis_url: str, tmp: Path, round_: int) -> dict:  # type: ignore[type-arg]
    """One round of the moderate load on `variant`: vegeta at --rate for --moderate-seconds."""
    served = tmp / f"{variant}.{round_}.moderate"
    proc, url, log = start(variant, args, redis_url, tmp, served)
    try:
        time.sleep(1.1)  # the warm-up request's window passes

        def attack(seconds: int) -> bytes:
            return subprocess.run([args.vegeta, "attack", f"-rate={args.rate}/s", f"-duration={seconds}s", "-keepalive=true"],
                                  input=f"GET {url}\n".encode(), capture_output=True, check=True,
                                  env=dict(os.environ, GOGC="off")).stdout

        if args.warmup_seconds > 0:
            attack(args.warmup_seconds)
        results_bytes = attack(args.moderate_seconds)
    finally:
        stop(proc, log)
    results = tmp / f"{variant}.{round_}.vegeta"
    results.write_bytes(results_bytes)
    report = json.loads(subprocess.run([args.vegeta, "report", "-type=json", str(results)], capture_output=True, check=True).stdout)
    codes = report.get("status_codes") or {}
    # How rl decided what the app served (warm-up included): a mode other than `lease` was a
    # Redis round trip in the request's path.
    modes: dict[str, int] = {}
    # With --time, per served request (apps.timed_wsgi): the request's, the limiter's wall and CPU
    # and the collector's ns in it per generation, then the process's collector runs and ns so far.
    times: list[list[int]] = []
    for line in served.read_text().splitlines():
        fields = line.split()
        m = fields[1]
        if m != "-":
            modes[m] = modes.get(m, 0) + 1
        if len(fields) == 14:
            times.append([int(x) for x in fields[2:]])
    # The measured run's requests only (the warm-up's come first).
    times = times[-report["requests"]:] if times else times
    # The collector's runs and time in the process over the measured run, in requests or not.
    gc_all = [b - a for a, b in zip(times[0][6:], times[-1][6:])] if times else []
    return {"requests": report["requests"], "ok": codes.get("200", 0), "p50": report["latencies"]["50th"] / 1e6,
            "p99": report["latencies"]["99th"] / 1e6, "results": results, "modes": modes, "times": times,
            "gc_all": gc_all}


def run(variant: str, args: argparse.Namespace, redis_url: str, tmp: Path) -> dict:  # type: ignore[type-arg]
    served = tmp / f"{variant}.served"
    proc, url, log = start(variant, args, redis_url, tmp, served)
    try:
        time.sleep(1.1)  # the warm-up request's window passes
        served.write_text("")
        rport = int(redis_url.rsplit(":", 1)[1].strip("/"))
        before = redis_calls(rport)
        out = subprocess.run(["wrk", "-t", str(args.wrk_threads), "-c", str(args.connections), "-d", f"{args.duration}s", "--latency", url],
                             capture_output=True, text=True, check=True).stdout
        after = redis_calls(rport) - 1  # the INFO call itself
    finally:
        stop(proc, log)
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    p50 = ms(re.search(r"^\s+50%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    p99 = ms(re.search(r"^\s+99%\s+(\S+)", out, re.M).group(1))  # type: ignore[union-attr]
    lines = [line.split() for line in served.read_text().splitlines()]
    # A line is `<ms> <mode>`, with --time followed by the app's own timings (not used here).
    times = [int(f[0]) for f in lines]
    modes: dict[str, int] = {}
    for m in (f[1] for f in lines):
        modes[m] = modes.get(m, 0) + 1
    return {"variant": variant, "rps": rps, "p50": p50, "p99": p99, "served": len(times),
            "max_window": max_in_window(times, args.window_ms), "cmds": (after - before) / max(total, 1),
            "modes": " ".join(f"{k}={v}" for k, v in sorted(modes.items()) if k != "-") or "-"}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--duration", type=int, default=10)
    p.add_argument("--connections", type=int, default=32)
    p.add_argument("--wrk-threads", type=int, default=2)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=8, help="gunicorn threads per worker")
    p.add_argument("--policy", default="100/second")
    p.add_argument("--window-ms", type=int, default=1000)
    p.add_argument("--only", nargs="*", default=VARIANTS, choices=VARIANTS + EXTRA_VARIANTS)
    p.add_argument("--phases", default="over,moderate", help="over (wrk above the limit), moderate (vegeta below it)")
    p.add_argument("--rate", type=int, default=50, help="moderate load, requests per second (default: half the default limit)")
    p.add_argument("--moderate-seconds", type=int, default=10)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--warmup-seconds", type=int, default=2, help="moderate load: seconds of the same load before each measured run")
    p.add_argument("--time", action="store_true", help="moderate load, Flask: time each request and its limiter call inside the app")
    p.add_argument("--vegeta", default=os.environ.get("VEGETA", "vegeta"))
    args = p.parse_args()
    phases = args.phases.split(",")
    redis_url = os.environ["RL_TEST_REDIS_URL"]
    rows = []
    with tempfile.TemporaryDirectory() as d:
        if "moderate" in phases:
            moderate_phase(args, redis_url, Path(d))
        for v in (args.only if "over" in phases else []):
            rows.append(run(v, args, redis_url, Path(d)))
            r = rows[-1]
            print(f"  {v}: {r['rps']:.0f} req/s", file=sys.stderr, flush=True)
    if not rows:
        return
    limit = int(args.policy.split("/")[0])
    print(f"\nwrk -t{args.wrk_threads} -c{args.connections} -d{args.duration}s, one key, limit {args.policy} "
          f"(most admitted in any {args.window_ms} ms window must be <= {limit}); load avg {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print("| app | req/s | P50 ms | P99 ms | served | most in any window | Redis cmds/req | rl modes of served |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['rps']:.0f} | {r['p50']:.2f} | {r['p99']:.2f} | {r['served']} | {r['max_window']} | {r['cmds']:.2f} | {r['modes']} |")


def moderate_phase(args: argparse.Namespace, redis_url: str, tmp: Path) -> None:
    # Each framework's app without a limiter again, right after the first: the A/A control.
    variants = [w for v in args.only for w in ([v, f"{v}-again"] if v.endswith("-none") else [v])]
    samples: dict[str, list[dict]] = {v: [] for v in variants}  # type: ignore[type-arg]
    for round_ in range(args.rounds):
        for v in variants:
            samples[v].append(moderate(v, args, redis_url, tmp, round_))
            print(f"  moderate {v}: P99 {samples[v][-1]['p99']:.2f} ms", file=sys.stderr, flush=True)

    def median(xs: list[float]) -> float:
        return sorted(xs)[len(xs) // 2]

    def modes(rounds: list[dict]) -> str:  # type: ignore[type-arg]
        total: dict[str, int] = {}
        for r in rounds:
            for m, n in r["modes"].items():
                total[m] = total.get(m, 0) + n
        return " ".join(f"{m}={n}" for m, n in sorted(total.items())) or "-"

    pooled = {v: latencies(args.vegeta, [r["results"] for r in s]) for v, s in samples.items()}
    p99 = {v: lat["99th"] / 1e6 for v, lat in pooled.items()}
    print(f"\nModerate load: one key, vegeta at a fixed {args.rate} req/s (open loop; below the limit {args.policy}, so all admitted), "
          f"{args.rounds} rounds of {args.moderate_seconds}s per app taken in turns, after {args.warmup_seconds}s of the same load not measured; P50/P99 of all rounds' requests together; "
          f"load avg {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    print("| app | requests | 200 | P50 ms | P99 ms | added to the app's P99 | P99 per round (median) | rl modes of served |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for v, s in samples.items():
        base = f"{v.split('-')[0]}-none"
        added = f"{100 * (p99[v] - p99[base]) / p99[base]:+.0f}%" if base in p99 and v != base else ""
        print(f"| {v} | {sum(r['requests'] for r in s)} | {sum(r['ok'] for r in s)} | {pooled[v]['50th'] / 1e6:.2f} | "
              f"{p99[v]:.2f} | {added} | {' / '.join(format(r['p99'], '.2f') for r in s)} ({median([r['p99'] for r in s]):.2f}) | "
              f"{modes(s)} |")
    timed = {v: [t for r in s for t in r["times"]] for v, s in samples.items()}
    if any(timed.values()):
        print("\nInside the app (--time): the WSGI call's wall time, the limiter call's wall and CPU time, µs; "
              "the garbage collector's runs during the calls (generations 0 / 1 / 2) and its time in them")
        print("| app | requests | request P50 / P99 / P99.9 | limiter P50 / P99 / P99.9 | limiter CPU P50 / P99 / P99.9 | GC runs 0 / 1 / 2 | GC ms "
              "| in the whole process: GC runs 0 / 1 / 2 | GC ms 0 / 1 / 2 |")
        print("|---|---:|---|---|---|---|---:|---|---|")
        for v, ts in timed.items():
            if not ts:
                continue

            def pct(col: int) -> str:
                xs = sorted(t[col] for t in ts)
                return " / ".join(f"{xs[min(len(xs) - 1, int(q * len(xs)))] / 1000:.0f}" for q in (0.5, 0.99, 0.999))

            runs = " / ".join(str(sum(1 for t in ts if t[3 + g] > 0)) for g in range(3))
            whole = [sum(r["gc_all"][i] for r in samples[v] if r["gc_all"]) for i in range(6)]
            print(f"| {v} | {len(ts)} | {pct(0)} | {pct(1)} | {pct(2)} | {runs} | {sum(sum(t[3:6]) for t in ts) / 1e6:.1f} | "
                  f"{' / '.join(str(x) for x in whole[:3])} | {' / '.join(f'{x / 1e6:.1f}' for x in whole[3:])} |")


if __name__ == "__main__":
    main()
