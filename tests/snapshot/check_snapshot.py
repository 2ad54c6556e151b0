#!/usr/bin/python3
"""check_snapshot.py MEMSCOPE FILE...: conformance of `memscope snapshot` against an
independent reading of each file.

For every FILE, a restricted unpickler (find_class raises, so nothing can be imported or
called) or json.load reads the snapshot, this script computes the per-device counts and byte
totals that docs/snapshot.md defines, and compares them with `MEMSCOPE snapshot FILE --json`.
Then it checks --state-at: at the last event of each device with a trace the state must equal
the final `segments` (active blocks, segments), and the state before the first event, replayed
forward over the whole trace, must also give the final `segments`.
Exit status 0 when everything agrees; the differences are printed otherwise.
"""
import collections
import io
import json
import pickle
import subprocess
import sys

ACTIONS = ['alloc', 'free_requested', 'free_completed', 'segment_alloc', 'segment_free',
           'segment_map', 'segment_unmap', 'snapshot', 'oom', 'annotate', 'other']
STATES = ['active_allocated', 'active_pending_free', 'inactive', 'other']


class Restricted(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError('refused global %s.%s' % (module, name))


def load(path):
    data = open(path, 'rb').read()
    if data.lstrip()[:1] in (b'{', b'['):
        return json.loads(data)
    return Restricted(io.BytesIO(data)).load()


def block_addrs(seg):
    """Block addresses; legacy blocks without `address` tile the segment."""
    cur = seg['address']
    out = []
    for b in seg.get('blocks', []):
        a = b['address'] if isinstance(b.get('address'), int) else cur
        out.append(a)
        cur = a + b['size']
    return out


def expected(snap):
    if isinstance(snap, list):
        segs, traces = snap, []
    else:
        segs, traces = snap['segments'], snap.get('device_traces') or []
    devices = sorted(set(s.get('device', 0) for s in segs) | set(range(len(traces))))
    out = {'segments': len(segs), 'blocks': sum(len(s.get('blocks', [])) for s in segs),
           'trace_entries': sum(len(t or []) for t in traces), 'devices': {}}
    for dev in devices:
        d = {'segments': 0, 'blocks': 0, 'reserved_bytes': 0, 'allocated_bytes': 0,
             'active_bytes': 0, 'requested_bytes': 0,
             'blocks_by_state': {s: {'count': 0, 'bytes': 0} for s in STATES},
             'actions': {a: 0 for a in ACTIONS}, 'trace_entries': 0}
        trace = traces[dev] if dev < len(traces) and traces[dev] else []
        d['trace_entries'] = len(trace)
        live = set()
        times = []
        for e in trace:
            a = e.get('action')
            d['actions'][a if a in ACTIONS else 'other'] += 1
            if 'time_us' in e:
                times.append(e['time_us'])
            if a == 'alloc':
                live.add(e['addr'])
            elif a == 'free_completed':
                live.discard(e['addr'])
        d['time_us'] = {'first': min(times), 'last': max(times),
                        'span': max(times) - min(times)} if times else None
        ghosts = [0, 0]
        free = largest = 0
        for s in segs:
            if s.get('device', 0) != dev:
                continue
            d['segments'] += 1
            d['reserved_bytes'] += s['total_size']
            bl = s.get('blocks', [])
            d['allocated_bytes'] += s.get('allocated_size', sum(
                b['size'] for b in bl if b['state'] == 'active_allocated'))
            d['active_bytes'] += s.get('active_size', sum(
                b['size'] for b in bl if b['state'].startswith('active')))
            d['requested_bytes'] += s['requested_size'] if 'requested_size' in s else sum(
                b.get('requested_size', b['size']) for b in bl if b['state'] == 'active_allocated')
            for b, a in zip(bl, block_addrs(s)):
                d['blocks'] += 1
                st = b['state'] if b['state'] in STATES else 'other'
                d['blocks_by_state'][st]['count'] += 1
                d['blocks_by_state'][st]['bytes'] += b['size']
                if st == 'inactive':
                    free += b['size']
                    largest = max(largest, b['size'])
                if st in ('active_allocated', 'active_pending_free') and a not in live:
                    ghosts[0] += 1
                    ghosts[1] += b['size']
        d['blocks_without_alloc_event'] = {'count': ghosts[0], 'bytes': ghosts[1]}
        d['fragmentation'] = {'inactive_bytes': free, 'largest_free_block': largest}
        out['devices'][dev] = d
    return out


def compare(path, exp, got):
    errs = []

    def eq(what, a, b):
        if a != b:
            errs.append('%s: %s: expected %r, memscope says %r' % (path, what, a, b))

    for k in ('segments', 'blocks', 'trace_entries'):
        eq(k, exp[k], got[k])
    gdev = {d['device']: d for d in got['devices']}
    eq('devices', sorted(exp['devices']), sorted(gdev))
    for dev, e in exp['devices'].items():
        g = gdev.get(dev)
        if g is None:
            continue
        for k, v in e.items():
            if k == 'fragmentation':
                for kk, vv in v.items():
                    eq('device %d fragmentation.%s' % (dev, kk), vv, g[k][kk])
            else:
                eq('device %d %s' % (dev, k), v, g[k])
    return errs


def final_active(snap, dev):
    segs = snap if isinstance(snap, list) else snap['segments']
    blocks, segments = set(), set()
    for s in segs:
        if s.get('device', 0) != dev:
            continue
        segments.add((s['address'], s['total_size']))
        for b, a in zip(s.get('blocks', []), block_addrs(s)):
            if b['state'] in ('active_allocated', 'active_pending_free'):
                blocks.add((a, b['size'], b['state']))
    return segments, blocks


def state_sets(st):
    segments = {(s['address'], s['total_size']) for s in st['segments']}
    blocks = {(b['address'], b['size'], b['state'])
              for s in st['segments'] for b in s['blocks'] if b['state'] != 'inactive'}
    blocks |= {(b['address'], b['size'], b['state']) for b in st['orphan_blocks']}
    return segments, blocks


def replay(st, trace):
    segments, blocks = state_sets(st)
    bmap = {a: (a, sz, s) for a, sz, s in blocks}
    segs = {a: (a, sz) for a, sz in segments}
    for e in trace:
        a = e.get('action')
        if a == 'alloc':
            bmap[e['addr']] = (e['addr'], e['size'], 'active_allocated')
        elif a == 'free_requested':
            bmap[e['addr']] = (e['addr'], e['size'], 'active_pending_free')
        elif a == 'free_completed':
            bmap.pop(e['addr'], None)
        elif a == 'segment_alloc':
            segs[e['addr']] = (e['addr'], e['size'])
        elif a == 'segment_free':
            segs.pop(e['addr'], None)
    return set(segs.values()), set(bmap.values())


def check_state(memscope, path, snap):
    errs = []
    traces = [] if isinstance(snap, list) else (snap.get('device_traces') or [])
    for dev, trace in enumerate(traces):
        if not trace:
            continue
        fin = final_active(snap, dev)
        for n in (len(trace) - 1, -1):
            r = subprocess.run([memscope, 'snapshot', path, '--state-at', str(n), '--device',
                                str(dev)], capture_output=True, timeout=120)
            if r.returncode != 0:
                errs.append('%s: --state-at %d failed: %s' % (path, n, r.stderr.decode()))
                continue
            st = json.loads(r.stdout)
            got = state_sets(st) if n >= 0 else replay(st, trace)
            want = fin
            if n < 0:
                # Trace sizes are what the caller asked for, block sizes are rounded: a replay
                # can only be compared on addresses and states.
                got = (got[0], {(a, s) for a, _, s in got[1]})
                want = (fin[0], {(a, s) for a, _, s in fin[1]})
            what = 'at the last event' if n >= 0 else 'before the first event, replayed'
            if got != want:
                errs.append('%s device %d: state %s differs from the final segments: '
                            'segments -%r +%r blocks -%r +%r' % (
                                path, dev, what, sorted(want[0] - got[0])[:3],
                                sorted(got[0] - want[0])[:3], sorted(want[1] - got[1])[:3],
                                sorted(got[1] - want[1])[:3]))
            if n >= 0 and st['orphan_blocks']:
                errs.append('%s: orphan blocks at the last event' % path)
    return errs


def main():
    memscope, files = sys.argv[1], sys.argv[2:]
    errs = []
    for path in files:
        snap = load(path)
        r = subprocess.run([memscope, 'snapshot', path, '--json'], capture_output=True,
                           timeout=300)
        if r.returncode != 0:
            errs.append('%s: memscope failed (%d): %s' % (path, r.returncode, r.stderr.decode()))
            continue
        got = json.loads(r.stdout)
        e = compare(path, expected(snap), got)
        e += check_state(memscope, path, snap)
        print('%s: %s (%d segments, %d blocks, %d trace entries)' % (
            'ok' if not e else 'FAIL', path, got['segments'], got['blocks'], got['trace_entries']))
        errs += e
    for e in errs:
        print(e, file=sys.stderr)
    sys.exit(1 if errs else 0)


if __name__ == '__main__':
    main()
