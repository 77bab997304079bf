#!/usr/bin/env python3
"""Commands for redis-cli's stdin (one per line, binary arguments as "\\xHH"): N calls of one
script in one scenario, after loading it. Used by cost.sh to price lua/sliding_window.lua against
lua/baseline_zset.lua per call (see cost.sh).

usage: gen.py {raw|rl|fcall|design} {admit|deny} N LUA_FILE [LIB_NAME]

RL_COST_CLOCK=fixed: rl's calls (rl, fcall) bring a client clock that moves 1 ms every 4 calls,
so how many calls share a millisecond (what an admission writes) no longer depends on how fast
the machine runs them; Redis TIME is still read (the skew check). raw and design stay on TIME.
rl's calls carry a call id and a record TTL as rl-core sends them (an admission writes its
record, see the script's `Retries`); RL_COST_RECORDS=off prices the calls without them.
"""
import hashlib
import os
import struct
import sys
import time


def q(b: bytes) -> str:
    return '"' + ''.join('\\x%02x' % c for c in b) + '"'


def main():
    kind, scenario, n, lua = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    src = open(lua, 'rb').read()
    sha = hashlib.sha1(src).hexdigest()
    # admit: a limit never reached; deny: the first 10 admitted, the rest denied (the steady
    # state of a hot key over its limit, what most calls of a throughput run are).
    limit, window = (10**12, 1000) if scenario == 'admit' else (10, 600000)
    fixed = os.environ.get('RL_COST_CLOCK') == 'fixed'
    records = os.environ.get('RL_COST_RECORDS') != 'off'
    start = int(time.time() * 1000)
    out = []
    if kind == 'fcall':
        out.append('FUNCTION LOAD REPLACE ' + q(src))
    else:
        out.append('SCRIPT LOAD ' + q(src))
    for i in range(n):
        if kind == 'raw':
            out.append('EVALSHA %s 1 zkey %d %d m%d' % (sha, limit, window, i))
        elif kind == 'design':
            out.append('EVALSHA %s 2 rl:{k} rl:cfg:{k} 1700000000000 %d %d 0 0 gw' % (sha, window, limit))
        else:
            clock = (start + i // 4, 10**9) if fixed else (0, 1000)
            # With records: the instance's 8 bytes and the records' TTL after the clock, and the
            # call's id (ARGV[4], those 8 bytes first).
            tail = b'costtag0' + b'2000' if records else b''
            # 'rl1P': the packed reply rl-core asks for (RL_COST_REPLY=array: 'rl1', six integers).
            tag = 'rl1' if os.environ.get('RL_COST_REPLY') == 'array' else 'rl1P'
            args = tag + ' %s %s' % (q(struct.pack('>dd', *clock) + tail),
                                   q(struct.pack('>dddd', 1, window, limit, 1)))
            if records:
                args += ' %s' % q(b'costtag0' + struct.pack('>Q', i + 1))
            if kind == 'fcall':
                out.append('FCALL %s 1 rl:{k} %s' % (sys.argv[5], args))
            else:
                out.append('EVALSHA %s 1 rl:{k} %s' % (sha, args))
    out.append('INFO commandstats')
    print('\n'.join(out))


main()
