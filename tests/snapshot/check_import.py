#!/usr/bin/python3
"""check_import.py MEMSCOPE FILE...: `memscope snapshot FILE -o DB` writes a database whose
PTA layer agrees with the file read independently (restricted unpickler): one MALLOC per alloc
plus one synthesized `pre_trace` MALLOC per block allocated before recording, one FREE per
free_completed, and the blocks live at the end (free_ns NULL) are exactly the file's active
blocks at the end, address and size: every block's size is the allocator's (rounded) size, as
the segments report it, with the requested size beside it (the MALLOC row's Attr
requested)."""
import os
import sqlite3
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_snapshot import load, block_addrs  # noqa: E402


def main():
    memscope, files = sys.argv[1], sys.argv[2:]
    errs = []
    with tempfile.TemporaryDirectory() as tmp:
        for path in files:
            snap = load(path)
            segs = snap if isinstance(snap, list) else snap['segments']
            traces = [] if isinstance(snap, list) else (snap.get('device_traces') or [])
            db = os.path.join(tmp, 'out.db')
            r = subprocess.run([memscope, 'snapshot', path, '-o', db], capture_output=True,
                               timeout=300)
            if r.returncode != 0:
                errs.append('%s: import failed: %s' % (path, r.stderr.decode()))
                continue
            c = sqlite3.connect(db)
            q = lambda sql: c.execute(sql).fetchall()
            allocs = sum(1 for t in traces for e in t or [] if e['action'] == 'alloc')
            frees = sum(1 for t in traces for e in t or [] if e['action'] == 'free_completed')
            live = {(a, b['size']) for s in segs for b, a in zip(s['blocks'], block_addrs(s))
                    if b['state'] in ('active_allocated', 'active_pending_free')}
            got_allocs = q("SELECT count(*) FROM events WHERE layer=3 AND kind=1 "
                           "AND func='alloc'")[0][0]
            got_frees = q("SELECT count(*) FROM events WHERE layer=3 AND kind=2")[0][0]
            got_live = set(q("SELECT addr, size FROM blocks WHERE layer=3 AND free_ns IS NULL"))
            requested = {a: b.get('requested_size') for s in segs
                         for b, a in zip(s['blocks'], block_addrs(s))
                         if b['state'] in ('active_allocated', 'active_pending_free')
                         and b.get('requested_size')}
            got_requested = dict(q("SELECT b.addr, CAST(json_extract(e.attr, '$.requested') "
                                   "AS INTEGER) FROM blocks b JOIN events e ON e.id = "
                                   "b.alloc_event_id WHERE b.layer=3 AND b.free_ns IS NULL"))
            got_requested = {a: got_requested.get(a) for a in requested}
            active = sum(b['size'] for s in segs for b in s['blocks']
                         if b['state'] in ('active_allocated', 'active_pending_free'))
            got_active = q("SELECT COALESCE(sum(size), 0) FROM blocks WHERE layer=3 "
                           "AND free_ns IS NULL")[0][0]
            live_addrs = {a for a, _ in live}
            got_live_addrs = {a for a, _ in got_live}
            stats = q("SELECT live_blocks FROM process_stats WHERE layer=3")[0][0]
            for what, a, b in (('allocs', allocs, got_allocs), ('frees', frees, got_frees),
                               ('live block addresses', live_addrs, got_live_addrs),
                               ('live blocks (address, size)', live, got_live),
                               ('live bytes = the segments\' active blocks', active, got_active),
                               ('requested sizes of the live blocks', requested, got_requested),
                               ('live_blocks', len(live), stats),
                               ('layers', {3, 4} <= {x[0] for x in q("SELECT id FROM layers")}, True)):
                if a != b:
                    errs.append('%s: %s: expected %r, database has %r' % (path, what,
                                                                          str(a)[:200], str(b)[:200]))
            print('%s: %s' % ('ok' if not errs else 'FAIL', path))
            c.close()
    for e in errs:
        print(e, file=sys.stderr)
    sys.exit(1 if errs else 0)


if __name__ == '__main__':
    main()
