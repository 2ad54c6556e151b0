#!/usr/bin/python3
"""gen_big_snapshot.py OUT [--events N] [--protocol P]: writes a large synthetic PyTorch memory
snapshot with the structure of real ones (generation G, torch 2.10+): a few thousand frame
dicts shared through the pickle memo, deep stacks (C++ frames with "??" files, then Python
frames), about two thirds of the trace entries with a frame list of their own (as in the real
files, where py_symbolize dedups tracebacks), alloc / free_requested / free_completed triples,
segment_alloc entries, time_us, compile_context, user_metadata, allocator_settings,
external_annotations, and final segments whose active blocks are the allocations still live.
Default: 2,400,000 trace entries, about 550 MB at protocol 4. Deterministic (seeded)."""
import argparse
import pickle
import random

MB = 1 << 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('out')
    ap.add_argument('--events', type=int, default=2_400_000)
    ap.add_argument('--protocol', type=int, default=4)
    a = ap.parse_args()
    rng = random.Random(42)

    cxx = [{'name': 'c10::cuda::CUDACachingAllocator::Native::fn%d()' % i, 'filename': '??',
            'line': 0} for i in range(300)]
    py = [{'name': 'forward%d' % (i % 97), 'filename': '/opt/project/model/block%d.py' % (i % 211),
           'line': 10 + i % 900} for i in range(4000)]
    # Stacks: 20 C++ frames of a few shapes, then 40-160 Python frames.
    cxx_heads = [[rng.choice(cxx) for _ in range(20)] for _ in range(8)]

    def new_stack():
        return rng.choice(cxx_heads) + [rng.choice(py) for _ in range(rng.randint(40, 160))]

    recent = [new_stack() for _ in range(64)]

    def frames():
        # Two thirds of the entries get a frame list of their own (a new list object of shared
        # frame dicts); the rest reuse a recent one (the same list object: one memo entry).
        if rng.random() < 0.67:
            st = new_stack()
            recent[rng.randrange(len(recent))] = st
            return st
        return rng.choice(recent)

    t = 1_780_000_000_000_000
    addr_next = 0x7f0000000000
    seg_next = 0x7e0000000000
    live = {}  # addr -> (size, frames)
    trace = []

    def ev(action, addr, size, fr):
        nonlocal t
        t += rng.randint(1, 40)
        trace.append({'action': action, 'addr': addr, 'size': size, 'stream': 0,
                      'time_us': t, 'compile_context': 'N/A', 'user_metadata': '',
                      'frames': fr})

    while len(trace) < a.events:
        if live and rng.random() < 0.48:
            addr = rng.choice(list(live)) if len(live) < 64 else next(iter(live))
            size, fr = live.pop(addr)
            ev('free_requested', addr, size, fr)
            ev('free_completed', addr, size, fr)
        else:
            size = rng.choice([512, 4096, 65536, MB, 4 * MB, 20 * MB])
            if rng.random() < 0.01:
                ev('segment_alloc', seg_next, 20 * MB, frames())
                seg_next += 20 * MB
            fr = frames()
            ev('alloc', addr_next, size, fr)
            live[addr_next] = (size, fr)
            addr_next += size + 512

    segments = []
    for addr, (size, fr) in live.items():
        total = max(2 * MB, size)
        blocks = [{'address': addr, 'size': size, 'requested_size': size,
                   'state': 'active_allocated', 'frames': fr}]
        if total > size:
            blocks.append({'address': addr + size, 'size': total - size, 'requested_size': 0,
                           'state': 'inactive', 'frames': []})
        segments.append({'device': 0, 'address': addr, 'total_size': total,
                         'allocated_size': size, 'active_size': size, 'requested_size': size,
                         'stream': 0, 'segment_type': 'large', 'segment_pool_id': (0, 0),
                         'is_expandable': False, 'frames': [], 'blocks': blocks})
    snap = {'segments': segments, 'device_traces': [trace],
            'allocator_settings': {'PYTORCH_CUDA_ALLOC_CONF': '', 'max_split_size': -1,
                                   'garbage_collection_threshold': 0.0,
                                   'expandable_segments': False,
                                   'roundup_power2_divisions': {str(1 << i): 0 for i in range(16)}},
            'external_annotations': [{'name': 'step', 'stage': 'START', 'device': 0,
                                      'time_us': trace[0]['time_us']}]}
    with open(a.out, 'wb') as f:
        pickle.dump(snap, f, protocol=a.protocol)


if __name__ == '__main__':
    main()
