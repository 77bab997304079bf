#!/usr/bin/env python3
"""Writes the committed seeds under fuzz/corpus/<target>/ from the conformance table
(tests/conformance/invalid.json) and the README's examples. Run from anywhere; rerun after the
table changes. libFuzzer adds what it finds to the same directories during `make fuzz`; only the
seeds written here (and findings' inputs, named finding-*) are committed."""
import hashlib
import json
import math
import os
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OPTIONS = ["key_prefix", "connect_timeout_ms", "request_timeout_ms", "client_clock",
           "max_clock_skew_ms", "retry_delay_ms", "local_fallback", "degrade_rtt_ms",
           "degrade_after_ms", "recover_rtt_ms", "recover_after_ms", "instances",
           "local_max_keys", "key_shards", "leases", "lease_ms", "lease_hot_rate",
           "denial_cache", "busy_poll_us"]  # the order of rl_core::OPTIONS (options_value picks names by index)


def value(v):
    """A conformance-table value as Python: bytes, str, int, float, bool, None or a marker."""
    if isinstance(v, dict):
        if "bytes_hex" in v:
            return bytes.fromhex(v["bytes_hex"])
        if "repeat" in v:
            part, n = v["repeat"]
            part = value(part)
            return part * n
        if "int" in v:
            return int(v["int"])
        if "float" in v:
            return float(v["float"])
        return "__compound__"
    if isinstance(v, list):
        return "__compound__"
    return v


def as_text(v):
    if isinstance(v, bytes):
        return v
    if isinstance(v, bool):
        return b"true" if v else b"false"
    if v is None:
        return b""
    if isinstance(v, float) and math.isfinite(v) and v == int(v):
        return str(int(v)).encode()
    return str(v).encode()


def encode_value(name, v):
    """One (name, Value) in the byte format of rl_fuzz::options_value."""
    sel = bytes([OPTIONS.index(name) * 4]) if name in OPTIONS else b"\x03" + bytes([len(name)]) + name.encode()
    if v is None:
        return sel + b"\x00"
    if isinstance(v, bool):
        return sel + b"\x01" + bytes([int(v)])
    if isinstance(v, int):
        return sel + b"\x02" + (v % (1 << 128)).to_bytes(16, "little")
    if isinstance(v, float):
        return sel + b"\x04" + struct.pack("<d", v)
    t = v if isinstance(v, bytes) else str(v).encode()
    t = t[:255]
    return sel + b"\x05" + bytes([len(t)]) + t


def write(target, data):
    d = os.path.join(ROOT, "fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    name = "seed-" + hashlib.sha1(data).hexdigest()[:16]
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def main():
    table = json.load(open(os.path.join(ROOT, "tests", "conformance", "invalid.json")))
    for row in table["rows"]:
        args = row.get("args", {})
        if row["call"] == "open" and "url" in args:
            u = value(args["url"])
            if u != "__compound__":
                write("url", as_text(u))
        if row["call"] == "open" and "options" in args:
            pairs = [(k, value(v)) for k, v in args["options"].items()]
            if all(v != "__compound__" for _, v in pairs):
                text = b"\n".join(k.encode() + b"=" + as_text(v)[:1100] for k, v in pairs)
                write("options_text", text)
                write("options_value", b"".join(encode_value(k, v) for k, v in pairs))
        if row["call"] == "parse_policies":
            t = value(args.get("text"))
            if isinstance(t, (str, bytes)):
                write("policy", as_text(t))
    # The README's examples, and the shapes the parsers accept.
    for u in ["redis://127.0.0.1:6379/", "rediss://app:s3cret@cache.internal:6380/2",
              "redis+sentinel://app:p%40ss@127.0.0.1:26379,[::1]:26380,host/mymaster/3",
              "rediss+cluster://:pw@a:7000,b", "unix:///tmp/redis.sock",
              "rediss://h:1/?tls_ca=/etc/ca.pem&protocol=resp3&tls_cert=/c.pem&tls_key=/k.pem",
              "redis+cluster://h?protocol=resp3", "memory://"]:
        write("url", u.encode())
    for t in ["key_prefix=app:\nrequest_timeout_ms=250ms\nlocal_fallback=false",
              "degrade_rtt_ms=20\nrecover_rtt_ms=30", "leases=auto\nlease_ms=2s\ninstances=default",
              "client_clock=true\nmax_clock_skew_ms=1h", "key_shards=64\ndenial_cache = false"]:
        write("options_text", t.encode())
    write("options_value", encode_value("leases", "auto") + encode_value("lease_ms", 250.0)
          + encode_value("instances", None) + b"\x0a\x01\x01")
    for t in ["100/s; 5000/h", "burst: 100/s; daily: 5000/day", "10 per 90 seconds",
              "5/250ms | 7 PER 2 Minutes", "a: 1/s, b: 1/s", "1/month"]:
        write("policy", t.encode())
    serve_config_seeds()


# rl serve's policies files: envoyproxy/ratelimit's vendored examples, then the shapes serve's own
# tests load or refuse (serve/tests/config.rs, http.rs).
SERVE_CONFIGS = [
    "domain: rl\ndescriptors:\n  - key: category\n    value: account\n    rate_limit:\n"
    "      replaces:\n        - name: bkthomps\n      unit: MINUTE\n      requests_per_unit: 4\n"
    "  - key: foo\n    detailed_metric: true\n    value_to_metric: true\n    metadata: {anything: [1, 2]}\n"
    "    rate_limit: {unit: minute, requests_per_unit: 2}\n    descriptors:\n      - key: bar\n"
    "        value: banned\n        rate_limit: {name: banned_limit, unit: minute, requests_per_unit: 0}\n"
    "      - key: baz\n        value: shady\n        shadow_mode: true\n        quota_mode: false\n"
    "        rate_limit: {unit: minute, requests_per_unit: 3}\n      - key: files*\n"
    "        share_threshold: true\n        rate_limit: {unlimited: true}\n  - key: port\n"
    "    value: 8080\n    rate_limit: {window_ms: 250, requests_per_unit: 5}\n---\ndomain: other\ndescriptors:\n",
    "domain: web\nhttp:\n  trusted_proxies: [\"127.0.0.1\", \"10.0.0.0/8\", \"::1\"]\n  rate_limits:\n"
    "    - actions:\n        - remote_address: {}\n    - actions:\n"
    "        - request_headers: {header_name: \":path\", descriptor_key: path}\n"
    "descriptors:\n  - key: remote_address\n    rate_limit: {unit: minute, requests_per_unit: 3, name: per-ip}\n"
    "  - key: path\n    value: /admin*\n    rate_limit: {unit: minute, requests_per_unit: 0, name: no-admin}\n",
    "domain: r\nhttp:\n  rate_limits:\n    - actions:\n"
    "        - request_headers: {header_name: x-user, descriptor_key: user}\n"
    "descriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 5, name: per-user}\n",
    "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: second\n      requests_per_unit: 1\n      burst: 5\n",
    "domain: d\ndescriptor:\n  - key: a\n",
    "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 1\n",
    "domain: d\ndescriptors:\n  - key: a\n    rate_limit:\n      unlimited: true\n      unit: second\n",
    "domain: d\ndescriptors:\n  - key: a\n  - key: a\n",
    "domain: d\ndescriptors:\n  - key: a\n    value: v\n    rate_limit:\n      requests_per_unit: 3\n",
    "domain: d\ndescriptors:\n  - key: a\n    share_threshold: true\n",
    "domain: d\n---\ndomain: d\n",
    "domain: d\ndescriptors:\n  - key: [1]\n",
    "domain: d\ndescriptors: [\n",
    "domain: a\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, requests_per_unit: 1}\n",
    "domain: w\ndescriptors:\n  - key: k\n    value: a*b*c\n    rate_limit: {unit: hour, requests_per_unit: 9}\n"
    "    descriptors:\n      - key: n\n        value: \"*\"\n        rate_limit: {unit: day, requests_per_unit: 1}\n",
]


def serve_config_seeds():
    d = os.path.join(ROOT, "serve", "tests", "envoy-ratelimit")
    for name in sorted(os.listdir(d)):
        if name.endswith(".yaml"):
            with open(os.path.join(d, name), "rb") as f:
                write("serve_config", f.read())
    for t in SERVE_CONFIGS:
        write("serve_config", t.encode())


if __name__ == "__main__":
    main()
