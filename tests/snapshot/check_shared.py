#!/usr/bin/python3
"""check_shared.py MEMSCOPE TMPDIR: snapshots whose memo references share lists, and many devices.

A pickle may reference one list from many places (the memo): one block list in every segment,
one trace in every device slot. Expanded, a 170 KB file made 9 million blocks (290 MB for the
summary; a 2.5 GB database with -o). memscope refuses a snapshot whose segments, blocks and
trace entries come to more than one per byte of the file (docs/snapshot.md): each of the
three commands (summary, --state-at, -o) exits 1 at once with that reason, writes no
database, and takes at most MAX_RSS_MB of memory. A legitimate file with many devices (300,000 trace slots, 30,000 segments each on
its own device) is summarized in work linear in the devices: every device's lines, exact (it
took over a minute before; the 60 s limit only keeps a regression from hanging the suite).
Pickles are made here with the standard pickle module.
"""
import os
import pickle
import resource
import subprocess
import sys

REASON = 'more than one per byte'
MAX_RSS_MB = 150  # what a refused file may cost memscope (sanitizer builds included)


def run(memscope, args, timeout):
    try:
        return subprocess.run([memscope] + args, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return subprocess.CompletedProcess(args, -1, b'', b'(still running after %d s)' % timeout)


def main():
    memscope, tmp = sys.argv[1], sys.argv[2]
    os.makedirs(tmp, exist_ok=True)
    errs = []
    blocks = [{'address': 0x1000 + j * 512, 'size': 512, 'requested_size': 500,
               'state': 'active_allocated'} for j in range(3000)]
    trace = [{'action': 'alloc', 'addr': 0x1000 + j * 512, 'size': 512, 'stream': 0,
              'time_us': j} for j in range(2000)]
    hostile = {
        # 3000 segments, each the same list of 3000 blocks: 9 million blocks from 170 KB
        'shared_blocks.pickle': {'segments': [
            {'device': 0, 'address': 0x1000, 'total_size': 3000 * 512, 'stream': 0,
             'segment_type': 'large', 'blocks': blocks} for _ in range(3000)],
            'device_traces': []},
        # 5000 devices, each the same trace of 2000 entries: 10 million entries from 68 KB
        'shared_trace.pickle': {'segments': [], 'device_traces': [trace] * 5000},
        # a bare list of segments sharing their block list
        'shared_bare.pickle': [{'device': 0, 'address': 0x1000, 'total_size': 3000 * 512,
                                'blocks': blocks} for _ in range(3000)],
    }
    for name, value in sorted(hostile.items()):
        path = os.path.join(tmp, name)
        with open(path, 'wb') as f:
            pickle.dump(value, f, protocol=4)
        db = os.path.join(tmp, name + '.db')
        for args in ([], ['--json'], ['--state-at', '0'], ['-o', db]):
            r = run(memscope, ['snapshot', path] + args, 20)
            err = r.stderr.decode(errors='replace')
            what = '%s %s' % (name, ' '.join(args))
            if r.returncode != 1 or REASON not in err:
                errs.append('%s: status %d, stderr %r (want 1 and %r)' % (
                    what, r.returncode, err[:300], REASON))
            else:
                print('ok: %s refused: %s' % (what, err.strip()[:160]))
        if os.path.exists(db):
            errs.append('%s: a database was left at %s' % (name, db))
    # memory: refused before the model is allocated (expanded, these took 290 to 400 MB)
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    if rss_mb > MAX_RSS_MB:
        errs.append('the refusals took up to %d MB (want at most %d)' % (rss_mb, MAX_RSS_MB))
    else:
        print('ok: the refusals took at most %d MB (limit %d)' % (rss_mb, MAX_RSS_MB))

    n = 300000
    many = os.path.join(tmp, 'many_devices.pickle')
    with open(many, 'wb') as f:
        pickle.dump({'segments': [{'device': i, 'address': 4096 * i, 'total_size': 4096}
                                  for i in range(0, n, 10)],
                     'device_traces': [[] for _ in range(n)]}, f, protocol=4)
    out = os.path.join(tmp, 'many.txt')
    with open(out, 'wb') as f:
        try:
            r = subprocess.run([memscope, 'snapshot', many], stdout=f, stderr=subprocess.PIPE,
                               timeout=60)
        except subprocess.TimeoutExpired:
            r = subprocess.CompletedProcess([], -1, b'', b'(still running after 60 s)')
    counts = {'device': 0, 'one segment': 0}
    with open(out, encoding='utf-8') as f:
        for line in f:
            if line.startswith('device '):
                counts['device'] += 1
                if line.endswith(': 1 segments, 0 blocks\n'):
                    counts['one segment'] += 1
    os.unlink(out)
    want = {'device': n, 'one segment': n // 10}
    if r.returncode != 0 or counts != want:
        errs.append('many devices: status %d, %r (want 0 and %r): %r' % (
            r.returncode, counts, want, r.stderr.decode(errors='replace')[:300]))
    else:
        print('ok: %d devices, %d with their one segment' % (n, n // 10))
    for e in errs:
        print('FAIL: ' + e, file=sys.stderr)
    sys.exit(1 if errs else 0)


if __name__ == '__main__':
    main()
