#!/usr/bin/python3
"""check_refusal.py MEMSCOPE FIXTURE_DIR: hostile snapshot files are refused cleanly.

Each bad_* file made by gen_fixtures.py must make `memscope snapshot` exit with status 1 (not
a signal, not a hang: 20 s limit) and an error naming the problem; the os.system pickles must
be refused at their GLOBAL/STACK_GLOBAL opcode, and the file they would create must not exist.
"""
import os
import subprocess
import sys

EXPECT = {
    'bad_global_reduce_p2.pickle': 'refused opcode GLOBAL',
    'bad_stack_global_p4.pickle': 'refused opcode STACK_GLOBAL',
    'bad_truncated_half.pickle': 'runs past the end',
    'bad_truncated_last_byte.pickle': 'runs past the end',
    'bad_deep_marks.pickle': 'nesting deeper than',
    'bad_deep_lists.pickle': 'is not a dict',
    'bad_deep.json': 'nesting deeper than',
    'bad_huge_str.pickle': 'over the cap',
    'bad_huge_long4.pickle': 'over the cap',
    'bad_huge_frame.pickle': 'runs past the end',
    'bad_huge_memo.pickle': 'memo slot',
    'bad_memo_get_missing.pickle': 'is empty',
    'bad_protocol_9.pickle': 'unsupported pickle protocol 9',
    'bad_not_snapshot.pickle': 'not a memory snapshot',
}


def main():
    memscope, fixtures = sys.argv[1], sys.argv[2]
    marker = os.path.join(fixtures, 'PWNED')
    errs = []
    for name, want in sorted(EXPECT.items()):
        path = os.path.join(fixtures, name)
        for extra in ([], ['--json'], ['--state-at', '0']):
            r = subprocess.run([memscope, 'snapshot', path] + extra, capture_output=True,
                               timeout=20)
            err = r.stderr.decode(errors='replace')
            if r.returncode != 1 or want not in err or 'byte offset' not in err and \
                    'not a' not in err and 'is not' not in err:
                errs.append('%s %s: status %d, stderr %r (want status 1 and %r)' % (
                    name, ' '.join(extra), r.returncode, err[:300], want))
        if not errs or not errs[-1].startswith(name):
            print('ok: %s refused: %s' % (name, err.strip()[:150]))
    if os.path.exists(marker):
        errs.append('%s exists: a pickle ran code' % marker)
    for e in errs:
        print(e, file=sys.stderr)
    sys.exit(1 if errs else 0)


if __name__ == '__main__':
    main()
