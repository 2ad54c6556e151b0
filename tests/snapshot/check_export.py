#!/usr/bin/python3
"""check_export.py MEMSCOPE [--annotate PROG] FILE...: `memscope export --format=torch-snapshot`
gives back what PyTorch wrote.

For every snapshot FILE: `memscope snapshot FILE -o DB`, then `memscope export DB
--format=torch-snapshot -o OUT`, and OUT, read with Python's own pickle (protocol 2, as
PyTorch's memory_viz reads it), has the same segments (device, address, total size), the same
blocks in each (size, state), the same statistics by torch's own torch.cuda._memory_viz.stats,
and per device the same trace (action, address, size) for the allocator's actions (segment_map /
segment_unmap come back as segment_alloc / segment_free: docs/snapshot.md), written with only
the pickle opcodes PyTorch's browser viewer (MemoryViz.js) implements.

With --annotate PROG (tests/progs/annotate, a known-answer program with a memscope.h pool): a
run under memscope, compact and full databases, gives one exact snapshot, the same bytes from
both kinds of database."""
import io
import os
import pickle
import pickletools
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_snapshot import load  # noqa: E402

from torch.cuda import _memory_viz  # noqa: E402  torch's own reader (python3-torch)

KEEP = {'alloc': 'alloc', 'free_requested': 'free_requested', 'free_completed': 'free_completed',
        'segment_alloc': 'segment_alloc', 'segment_free': 'segment_free',
        'segment_map': 'segment_alloc', 'segment_unmap': 'segment_free'}


MEMORYVIZ_OPCODES = {
    'PROTO', 'FRAME', 'EMPTY_DICT', 'EMPTY_LIST', 'MARK', 'SETITEMS', 'SETITEM', 'APPENDS',
    'APPEND', 'SHORT_BINUNICODE', 'BINUNICODE', 'BININT1', 'BININT2', 'BININT', 'LONG1',
    'BINFLOAT', 'NEWFALSE', 'NEWTRUE', 'NONE', 'EMPTY_TUPLE', 'TUPLE', 'TUPLE1', 'TUPLE2',
    'TUPLE3', 'LIST', 'DICT', 'MEMOIZE', 'BINPUT', 'LONG_BINPUT', 'BINGET', 'LONG_BINGET', 'STOP'}


def run(args):
    r = subprocess.run(args, capture_output=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError('%s: status %d: %s' % (' '.join(args), r.returncode,
                                                    r.stderr.decode(errors='replace')))
    return r


def stats(segs):
    return {k: getattr(v, 'value', v) for k, v in _memory_viz.stats(segs).items()}


def compare(path, a, b, errs):
    segs_a = a if isinstance(a, list) else a['segments']
    segs_b = b['segments']
    key = lambda s: (s.get('device', 0), s['address'], s['total_size'])
    checks = [('segments (device, address, total_size)', sorted(map(key, segs_a)),
               sorted(map(key, segs_b))),
              ('blocks (size, state) of each segment',
               {s['address']: [(x['size'], x['state']) for x in s['blocks']] for s in segs_a},
               {s['address']: [(x['size'], x['state']) for x in s['blocks']] for s in segs_b}),
              ('torch.cuda._memory_viz.stats', stats(segs_a), stats(segs_b))]
    traces_a = [] if isinstance(a, list) else (a.get('device_traces') or [])
    traces_b = b['device_traces']
    for d in range(max(len(traces_a), len(traces_b))):
        ta = traces_a[d] if d < len(traces_a) else []
        tb = traces_b[d] if d < len(traces_b) else []
        checks.append(('device %d trace (action, addr, size)' % d,
                       [(KEEP[e['action']], e['addr'], e['size']) for e in ta or []
                        if e['action'] in KEEP],
                       [(e['action'], e['addr'], e['size']) for e in tb]))
    for what, x, y in checks:
        if x != y:
            errs.append('%s: %s differ: %s vs %s' % (path, what, str(x)[:300], str(y)[:300]))


def check_file(memscope, path, tmp, errs):
    db, out = os.path.join(tmp, 'in.db'), os.path.join(tmp, 'out.pickle')
    for f in (db, out):
        if os.path.exists(f):
            os.unlink(f)
    run([memscope, 'snapshot', path, '-o', db])
    run([memscope, 'export', db, '--format=torch-snapshot', '-o', out])
    data = open(out, 'rb').read()
    if data[:2] != b'\x80\x02':
        errs.append('%s: not a protocol-2 pickle' % path)
    # PyTorch's browser viewer (MemoryViz.js) implements only these opcodes
    # (../shared/reference/torch-snapshot.md section 2)
    used = {op.name for op, _, _ in pickletools.genops(data)}
    if not used <= MEMORYVIZ_OPCODES:
        errs.append('%s: opcodes MemoryViz.js does not read: %s' % (path, used - MEMORYVIZ_OPCODES))
    compare(path, load(path), pickle.load(io.BytesIO(data)), errs)


def check_annotate(memscope, prog, tmp, errs):
    outs = []
    compact, full = os.path.join(tmp, 'compact.db'), os.path.join(tmp, 'full.db')
    run([memscope, 'run', '-o', compact, '--', prog])
    run([memscope, 'export', compact, '--format=db', '-o', full])  # the same run, full
    for db in (compact, full):
        out = db + '.pickle'
        run([memscope, 'export', db, '--format=torch-snapshot', '-o', out])
        outs.append(open(out, 'rb').read())
    if outs[0] != outs[1]:
        errs.append('annotate: the compact and the full database give different snapshots')
    s = pickle.loads(outs[0])
    # annotate reserves a 4096-byte arena, allocates 64 bytes at +64, +128, +192 (one per
    # step) and frees +64: the segment ends with two live blocks between free space.
    segs = s['segments']
    got = [(x['size'], x['state'], x['address'] - segs[0]['address']) for x in segs[0]['blocks']] \
        if len(segs) == 1 else segs
    want = [(128, 'inactive', 0), (64, 'active_allocated', 128), (64, 'active_allocated', 192),
            (3840, 'inactive', 256)]
    if got != want:
        errs.append('annotate: segment blocks %r, want %r' % (got, want))
    if len(segs) == 1 and (segs[0]['total_size'], segs[0]['allocated_size']) != (4096, 128):
        errs.append('annotate: segment sizes %r' % (segs[0],))
    trace = [(e['action'], e['size'], e['addr'] - segs[0]['address'] if segs else 0)
             for e in s['device_traces'][0]]
    want = [('segment_alloc', 4096, 0), ('alloc', 64, 64), ('alloc', 64, 128),
            ('alloc', 64, 192), ('free_requested', 64, 64), ('free_completed', 64, 64)]
    if trace != want:
        errs.append('annotate: trace %r, want %r' % (trace, want))
    frames = segs[0]['blocks'][1]['frames'] if len(segs) == 1 else []
    if not any(f['name'] == 'main' and f['filename'].endswith('annotate.c') for f in frames):
        errs.append('annotate: the block\'s frames lack main (annotate.c): %r' % frames[:4])
    st = stats(segs)
    if st != {'segments': 1, 'total_size': 4096, 'inactive': 3968, 'active_allocated': 128}:
        errs.append('annotate: torch\'s stats %r' % st)


def main():
    args = sys.argv[1:]
    memscope = args.pop(0)
    annotate = None
    if args[:1] == ['--annotate']:
        annotate = args[1]
        args = args[2:]
    errs = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in args:
            n = len(errs)
            check_file(memscope, path, tmp, errs)
            print('%s: %s' % ('ok' if len(errs) == n else 'FAIL', path))
        if annotate:
            n = len(errs)
            check_annotate(memscope, annotate, tmp, errs)
            print('%s: annotate run' % ('ok' if len(errs) == n else 'FAIL'))
        # no pool: a clear refusal, nothing written
        db, out = os.path.join(tmp, 'nopool.db'), os.path.join(tmp, 'nopool.pickle')
        if annotate:
            run([memscope, 'run', '-o', db, '--', '/bin/true'])
            r = subprocess.run([memscope, 'export', db, '--format=torch-snapshot', '-o', out],
                               capture_output=True, timeout=60)
            if r.returncode == 0 or b'no pool' not in r.stderr or os.path.exists(out):
                errs.append('a run without a pool: status %d, %r, file left: %s' % (
                    r.returncode, r.stderr[:200], os.path.exists(out)))
    for e in errs:
        print(e, file=sys.stderr)
    sys.exit(1 if errs else 0)


if __name__ == '__main__':
    main()
