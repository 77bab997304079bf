#!/usr/bin/env python3
"""Turns tests/conformance/invalid.json into a C header for test_conformance.c:
    gen_conformance.py invalid.json rl.h > conformance_rows.h
Generated at build time (bindings-c/test.sh) rather than parsed in C: the table's tagged values
(huge ints, repeats, bytes) are a few lines of Python and would be a few hundred of C, and the C
compiler then checks every option name against rl_options' fields. This is part of the C suite:
it decides which rows C can express (NEEDS below) and fails on any field, call, tag or value it
does not know. An option rl_options lacks becomes a row that fails at run time, not a skip."""
import json
import re
import sys

# Every tag of the table: None if C expresses it, else why not.
NEEDS = {
    "dynamic_types": "statically typed: a value of another type does not compile",
    "compound_values": "statically typed: a list or map does not compile",
    "null_key": None,
    "distinct_float": "statically typed: a double for a uint64_t does not compile",
    "float_numbers": "statically typed: a double for a uint64_t does not compile",
    "negative": "uint64_t holds no negative number",
    "beyond_i64": None,
    "beyond_u64": "uint64_t holds nothing above 2^64 - 1",
    "inexact_double": None,
    "unknown_option": "options are rl_options fields: an unknown name does not compile",
    "byte_strings": None,
    "lone_surrogate": "C strings are bytes: no UTF-16 surrogates",
    "zero_option": "rl_options reads 0 as 'the default'",
}
FIELDS = {"id", "call", "args", "error", "argument", "needs", "shows", "message_lacks"}


def die(msg):
    sys.exit(f"gen_conformance.py: {msg}")


def value(v):
    """('null',) | ('int', n) | ('bytes', unit_bytes, times)"""
    if v is None:
        return ("null",)
    if isinstance(v, bool):
        die(f"bool {v} in a C row")
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, str):
        return ("bytes", v.encode(), 1)
    if isinstance(v, dict) and len(v) == 1:
        ((tag, x),) = v.items()
        if tag == "int":
            return ("int", int(x))
        if tag == "bytes_hex":
            return ("bytes", bytes.fromhex(x), 1)
        if tag == "repeat":
            inner = value(x[0])
            if inner[0] != "bytes" or inner[2] != 1:
                die(f"repeat of {x[0]}")
            return ("bytes", inner[1], x[1])
    die(f"no C value for {v!r}")


def c_bytes(b):
    return '"' + "".join(f"\\x{c:02x}" for c in b) + '"'


def c_str(s):
    return "NULL" if s is None else json.dumps(s)


def main():
    table = json.load(open(sys.argv[1]))
    header = open(sys.argv[2]).read()
    m = re.search(r"typedef struct rl_options \{(.*?)\} rl_options;", header, re.S)
    fields = set(re.findall(r"^\s*(?:const\s+)?\w+\s*\*?\s*(\w+);", re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S), re.M))
    for tag in table["needs"]:
        if tag not in NEEDS:
            die(f"unknown need {tag}")
    rows, setters, skipped, rule_arrays = [], [], {}, []
    for row in table["rows"]:
        if set(row) - FIELDS:
            die(f"{row['id']}: unknown fields {set(row) - FIELDS}")
        if row["call"] not in table["calls"] or row["error"] not in ("invalid_argument", "invalid_type"):
            die(f"{row['id']}: call {row['call']}, error {row['error']}")
        why = next((f"{t}: {NEEDS[t]}" for t in row.get("needs", []) if NEEDS.get(t, "?") is not None), None)
        for t in row.get("needs", []):
            if t not in NEEDS:
                die(f"{row['id']}: unknown need {t}")
        if why:
            skipped[why] = skipped.get(why, 0) + 1
            continue
        a = dict(table["calls"][row["call"]]["defaults"])
        a.update(row["args"])
        idx = len(rows)
        url = value(a["url"]) if "url" in a else ("null",)
        # parse_policies carries its text where the others carry the key.
        key = value(a["text"] if row["call"] == "parse_policies" else a.get("key", "k"))
        nums = {}
        for p in ("limit", "window_ms", "cost"):
            v = value(a[p]) if p in a else ("int", 1)
            if v[0] != "int" or not 0 <= v[1] < 2**64:
                die(f"{row['id']}: {p} {a.get(p)}")
            nums[p] = v[1]
        missing = []
        body = []
        for name, v in a.get("options", {}).items():
            v = value(v)
            if name not in fields:
                missing.append(name)
            elif v[0] == "int":
                body.append(f"o->{name} = {v[1]}ull;")
            elif v[0] == "bytes":
                body.append(f"o->{name} = conf_text(bufs, {c_bytes(v[1])}, {len(v[1])}, {v[2]});")
            else:
                die(f"{row['id']}: option {name} {v}")
        setters.append(f"    case {idx}: {' '.join(body)} break;")
        def blob(v):
            if v[0] == "null":
                return "{NULL, 0, 0, 1}"
            return f"{{{c_bytes(v[1])}, {len(v[1])}, {v[2]}, 0}}"
        # acquire_all: the rules (absent fields: acquire's defaults) as a static array, the group.
        rules_ref, n_rules, group = "NULL", 0, ("null",)
        if row["call"] == "acquire_all":
            crules = []
            for r in a.get("rules", [{}]):
                f = dict(table["calls"]["acquire"]["defaults"])
                f.update(r)
                if set(f) - {"key", "limit", "window_ms", "cost"}:
                    die(f"{row['id']}: rule fields {set(f)}")
                n = {p: value(f[p]) if p in f else ("int", 1) for p in ("limit", "window_ms", "cost")}
                if any(v[0] != "int" or not 0 <= v[1] < 2**64 for v in n.values()):
                    die(f"{row['id']}: rule {r}")
                crules.append(f"{{{blob(value(f['key']))}, {n['limit'][1]}ull, {n['window_ms'][1]}ull, {n['cost'][1]}ull}}")
            # C has no empty array: an empty rule list still holds one (unused) entry.
            body_rules = ", ".join(crules) or "{{NULL, 0, 0, 1}, 0, 0, 0}"
            rule_arrays.append(f"static const struct conf_rule CONF_RULES_{idx}[] = {{{body_rules}}};")
            rules_ref, n_rules = f"CONF_RULES_{idx}", len(crules)
            group = value(a["group"]) if "group" in a else ("null",)
        rows.append(
            "    {" + ", ".join([
                c_str(row["id"]), c_str(row["call"]), str(int("url" in a)), blob(url), blob(key),
                f"{nums['limit']}ull", f"{nums['window_ms']}ull", f"{nums['cost']}ull", str(int("cost" in a)),
                str(int(row["error"] == "invalid_type")), c_str(row["argument"]), c_str(row.get("shows")),
                c_str(row.get("message_lacks")), c_str(", ".join(missing) or None),
                rules_ref, str(n_rules), blob(group), str(int(row["call"] == "acquire_all" and "options" in a)),
            ]) + "},")
    out = ["/* Generated from tests/conformance/invalid.json by bindings-c/tests/gen_conformance.py: do not edit. */",
           f"#define CONF_TABLE_ROWS {len(table['rows'])}",
           *rule_arrays,
           "static const struct conf_row CONF_ROWS[] = {", *rows, "};",
           "static const struct conf_skip CONF_SKIPPED[] = {",
           *[f"    {{{c_str(w)}, {n}}}," for w, n in sorted(skipped.items())], "    {NULL, 0},", "};",
           "/* Sets row i's options on *o; text values are allocated into bufs (freed by the caller). */",
           "static void conf_set_options(size_t i, rl_options *o, char **bufs) {",
           "    (void)o; (void)bufs;", "    switch (i) {", *setters, "    default: break;", "    }", "}"]
    print("\n".join(out))


main()
