#!/usr/bin/python3
"""gen_fixtures.py OUTDIR: writes the snapshot test fixtures.

Good files, one per format generation (docs/snapshot.md), made by a small caching-allocator
simulator so that the trace and the final segments agree (the --state-at tests replay them):
  gen0_bare_list_p2.pickle   torch 1.13 / memory_snapshot(): a bare list of segments, legacy
                             `history` blocks without `address`, pickle protocol 2
  genA_history_p3.pickle     dict {segments, device_traces}, history blocks, one `snapshot`
  genB_two_devices_p4.pickle block address/frames, pool id, is_expandable, no time_us, two
                             devices, one with an empty trace
  genG_full_p5.pickle        everything: time_us, compile_context, user_metadata,
                             allocator_settings, external_annotations, C++ "??" frames,
                             Windows paths, blocks allocated before the trace, pending frees,
                             segment_free, an oom entry, pickle protocol 5
  genG_full_p4.pickle        the same dict at protocol 4
  genG_full.json             the same dict as JSON (MemoryViz.js accepts this form)
  empty_traces_p4.pickle     device_traces == [[], []]
Hostile files (bad_*): GLOBAL+REDUCE and STACK_GLOBAL+REDUCE calling os.system (must be
refused and run nothing), truncated, deep nesting, huge declared lengths, memo abuse.
Deterministic: the same OUTDIR contents on every run.
"""
import json
import os
import pickle
import random
import struct
import sys

MB = 1 << 20


class Sim:
    """A toy caching allocator: segments tiled by blocks, first fit, split and merge."""

    def __init__(self, rng, device, base, frames_pool, with_time, extra_keys):
        self.rng = rng
        self.device = device
        self.next_addr = base
        self.segs = []  # dicts with 'address', 'total_size', 'stream', 'blocks' [addr,size,state,req,frames]
        self.trace = []
        self.frames_pool = frames_pool
        self.t = 1_700_000_000_000_000 + device * 1000
        self.with_time = with_time
        self.extra_keys = extra_keys

    def ev(self, action, addr, size, frames=None):
        e = {'action': action, 'addr': addr, 'size': size, 'stream': 0}
        if self.with_time:
            self.t += self.rng.randint(1, 50)
            e['time_us'] = self.t
        if 'compile_context' in self.extra_keys:
            e['compile_context'] = 'N/A'
        if 'user_metadata' in self.extra_keys:
            e['user_metadata'] = ''
        if frames is not None:
            e['frames'] = frames
        self.trace.append(e)

    def new_segment(self, size, record):
        total = max(2 * MB, (size + 2 * MB - 1) // (2 * MB) * (2 * MB))
        seg = {'address': self.next_addr, 'total_size': total, 'stream': 0,
               'blocks': [[self.next_addr, total, 'inactive', 0, None]]}
        self.next_addr += total + 64 * MB
        self.segs.append(seg)
        if record:
            self.ev('segment_alloc', seg['address'], total, self.rng.choice(self.frames_pool))
        return seg

    def alloc(self, size, record=True):
        size = (size + 511) // 512 * 512
        frames = self.rng.choice(self.frames_pool)
        for seg in self.segs:
            for i, b in enumerate(seg['blocks']):
                if b[2] == 'inactive' and b[1] >= size:
                    break
            else:
                continue
            break
        else:
            seg = self.new_segment(size, record)
            i = 0
        b = seg['blocks'][i]
        if b[1] > size:
            seg['blocks'].insert(i + 1, [b[0] + size, b[1] - size, 'inactive', 0, None])
        seg['blocks'][i] = [b[0], size, 'active_allocated', size - self.rng.randint(0, 511), frames]
        if record:
            self.ev('alloc', b[0], size, frames)
        return b[0]

    def find(self, addr):
        for seg in self.segs:
            for i, b in enumerate(seg['blocks']):
                if b[0] == addr:
                    return seg, i
        raise KeyError(addr)

    def free(self, addr, complete=True):
        seg, i = self.find(addr)
        b = seg['blocks'][i]
        self.ev('free_requested', addr, b[1], b[4])
        if not complete:
            b[2] = 'active_pending_free'
            return
        self.ev('free_completed', addr, b[1], b[4])
        b[2], b[3], b[4] = 'inactive', 0, None
        bl = seg['blocks']
        if i + 1 < len(bl) and bl[i + 1][2] == 'inactive':
            bl[i][1] += bl[i + 1][1]
            del bl[i + 1]
        if i > 0 and bl[i - 1][2] == 'inactive':
            bl[i - 1][1] += bl[i][1]
            del bl[i]

    def release_free_segments(self):
        for seg in list(self.segs):
            if len(seg['blocks']) == 1 and seg['blocks'][0][2] == 'inactive':
                self.ev('segment_free', seg['address'], seg['total_size'])
                self.segs.remove(seg)

    def segments(self, modern, pool):
        out = []
        for seg in self.segs:
            blocks = []
            for a, size, state, req, frames in seg['blocks']:
                if modern:
                    blk = {'address': a, 'size': size, 'requested_size': req, 'state': state,
                           'frames': frames or []}
                else:
                    blk = {'size': size, 'requested_size': req, 'state': state}
                    if state != 'inactive':
                        blk['history'] = [{'addr': a, 'real_size': req, 'frames': frames or []}]
                blocks.append(blk)
            act = [b for b in seg['blocks'] if b[2] != 'inactive']
            d = {'device': self.device, 'address': seg['address'],
                 'total_size': seg['total_size'],
                 'allocated_size': sum(b[1] for b in act if b[2] == 'active_allocated'),
                 'active_size': sum(b[1] for b in act),
                 'requested_size': sum(b[3] for b in act if b[2] == 'active_allocated'),
                 'stream': seg['stream'], 'segment_type': 'large' if seg['total_size'] > MB else 'small'}
            if pool:
                d['segment_pool_id'] = (0, 0)
                d['is_expandable'] = False
                d['frames'] = []
            d['blocks'] = blocks
            out.append(d)
        return out


def frame_pool(rng, windows=False, cpp=False):
    py = []
    for i in range(40):
        if windows:
            fn = 'C:\\work\\model\\layer%d.py' % (i % 7)
        else:
            fn = '/work/model/layer%d.py' % (i % 7)
        py.append({'filename': fn, 'line': 10 + i, 'name': 'forward%d' % (i % 5)})
    cxx = [{'filename': '??', 'line': 0, 'name': 'torch::unwind::unwind()'},
           {'filename': '??', 'line': 0, 'name': 'c10::cuda::CUDACachingAllocator::malloc'}]
    stacks = []
    for _ in range(12):
        depth = rng.randint(1, 8)
        st = [rng.choice(py) for _ in range(depth)]   # the same dict objects: shared in the memo
        if cpp:
            st = cxx + st
        stacks.append(st)
    return stacks


def run_sim(rng, device, with_time, extra, windows=False, cpp=False, n=400, ghosts=5):
    sim = Sim(rng, device, 0x7f0000000000 + device * (1 << 36), frame_pool(rng, windows, cpp),
              with_time, extra)
    # Blocks allocated before recording started: they are live at the end with no alloc event.
    pre = [sim.alloc(rng.randint(1, 4) * MB, record=False) for _ in range(ghosts)]
    live = []
    for step in range(n):
        if live and rng.random() < 0.45:
            sim.free(live.pop(rng.randrange(len(live))))
        else:
            live.append(sim.alloc(rng.choice([512, 4096, 1 << 16, MB, 3 * MB + 100])))
        if step % 97 == 96:
            sim.release_free_segments()
    if pre:
        sim.free(pre[0])           # a free of a block allocated before recording
    if live:
        sim.free(live.pop(), complete=False)  # still pending at the end
    return sim


def settings():
    return {'PYTORCH_CUDA_ALLOC_CONF': 'expandable_segments:False', 'max_split_size': -1,
            'garbage_collection_threshold': 0.0, 'expandable_segments': False,
            'roundup_power2_divisions': {str(1 << i): 0 for i in range(16)}}


def gen_full(rng):
    extra = {'compile_context', 'user_metadata'}
    s0 = run_sim(rng, 0, True, extra, windows=False, cpp=True, n=600)
    s1 = run_sim(rng, 1, True, extra, windows=True, cpp=False, n=200, ghosts=2)
    s1.ev('oom', 0, 20 * (1 << 30))
    s1.trace[-1]['device_free'] = s1.trace[-1].pop('addr')
    s0.trace.insert(0, {'action': 'snapshot', 'addr': 0, 'size': 0, 'stream': 0,
                        'time_us': s0.trace[0]['time_us'] - 1, 'compile_context': 'N/A',
                        'user_metadata': ''})
    return {'segments': s0.segments(True, True) + s1.segments(True, True),
            'device_traces': [s0.trace, s1.trace],
            'allocator_settings': settings(),
            'external_annotations': [
                {'name': 'Optimizer.step#AdamW.step', 'stage': 'START', 'device': 0,
                 'time_us': s0.trace[1]['time_us']},
                {'name': 'Optimizer.step#AdamW.step', 'stage': 'END', 'device': 0,
                 'time_us': s0.trace[-1]['time_us']}]}


def hostile(out):
    marker = os.path.join(out, 'PWNED')

    class Evil:
        def __reduce__(self):
            return (os.system, ('touch ' + marker,))

    # Protocol 2: GLOBAL 'posix system' then REDUCE. Protocol 4: STACK_GLOBAL then REDUCE.
    with open(os.path.join(out, 'bad_global_reduce_p2.pickle'), 'wb') as f:
        f.write(pickle.dumps({'segments': [Evil()]}, protocol=2))
    with open(os.path.join(out, 'bad_stack_global_p4.pickle'), 'wb') as f:
        f.write(pickle.dumps([Evil()], protocol=4))
    # BUILD/INST-style: a class instance (NEWOBJ + BUILD after STACK_GLOBAL).
    good = open(os.path.join(out, 'genG_full_p4.pickle'), 'rb').read()
    with open(os.path.join(out, 'bad_truncated_half.pickle'), 'wb') as f:
        f.write(good[:len(good) // 2])
    with open(os.path.join(out, 'bad_truncated_last_byte.pickle'), 'wb') as f:
        f.write(good[:-1])
    # 200,000 nested MARKs, and 200,000 lists nested by APPEND (deep value, shallow marks).
    with open(os.path.join(out, 'bad_deep_marks.pickle'), 'wb') as f:
        f.write(b'\x80\x04' + b'(' * 200000 + b'.')
    with open(os.path.join(out, 'bad_deep_lists.pickle'), 'wb') as f:
        f.write(b'\x80\x04' + b']' * 200000 + b'a' * 199999 + b'.')
    with open(os.path.join(out, 'bad_deep.json'), 'wb') as f:
        f.write(b'[' * 200000 + b']' * 200000)
    # Huge declared lengths: BINUNICODE8 of 2^62 bytes, LONG4 of 2^31-1 bytes, FRAME of 2^60.
    with open(os.path.join(out, 'bad_huge_str.pickle'), 'wb') as f:
        f.write(b'\x80\x04\x8d' + struct.pack('<Q', 1 << 62) + b'abc.')
    with open(os.path.join(out, 'bad_huge_long4.pickle'), 'wb') as f:
        f.write(b'\x80\x04\x8b' + struct.pack('<i', 0x7fffffff) + b'\x01.')
    with open(os.path.join(out, 'bad_huge_frame.pickle'), 'wb') as f:
        f.write(b'\x80\x04\x95' + struct.pack('<Q', 1 << 60) + b'N.')
    with open(os.path.join(out, 'bad_huge_memo.pickle'), 'wb') as f:
        f.write(b'\x80\x04N' + b'r' + struct.pack('<I', 0xfffffff0) + b'.')
    with open(os.path.join(out, 'bad_memo_get_missing.pickle'), 'wb') as f:
        f.write(b'\x80\x04j' + struct.pack('<I', 123456) + b'.')
    with open(os.path.join(out, 'bad_protocol_9.pickle'), 'wb') as f:
        f.write(b'\x80\x09N.')
    with open(os.path.join(out, 'bad_not_snapshot.pickle'), 'wb') as f:
        f.write(pickle.dumps({'hello': 1}, protocol=4))


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    marker = os.path.join(out, 'PWNED')
    if os.path.exists(marker):
        os.remove(marker)
    rng = random.Random(5)

    s = run_sim(rng, 0, False, set(), n=150)
    with open(os.path.join(out, 'gen0_bare_list_p2.pickle'), 'wb') as f:
        pickle.dump(s.segments(False, False), f, protocol=2)

    s = run_sim(rng, 0, False, set(), n=100)
    d = {'segments': s.segments(False, False),
         'device_traces': [[{'action': 'snapshot', 'addr': 0, 'size': 123, 'stream': 0}]]}
    with open(os.path.join(out, 'genA_history_p3.pickle'), 'wb') as f:
        pickle.dump(d, f, protocol=3)

    s0 = run_sim(rng, 0, False, set(), n=300)
    s2 = run_sim(rng, 2, False, set(), n=0, ghosts=3)
    d = {'segments': s0.segments(True, True) + s2.segments(True, True),
         'device_traces': [s0.trace, [], []]}
    with open(os.path.join(out, 'genB_two_devices_p4.pickle'), 'wb') as f:
        pickle.dump(d, f, protocol=4)

    d = gen_full(rng)
    for proto in (4, 5):
        with open(os.path.join(out, 'genG_full_p%d.pickle' % proto), 'wb') as f:
            pickle.dump(d, f, protocol=proto)
    with open(os.path.join(out, 'genG_full.json'), 'w') as f:
        json.dump(d, f)

    with open(os.path.join(out, 'empty_traces_p4.pickle'), 'wb') as f:
        pickle.dump({'segments': [], 'device_traces': [[], []]}, f, protocol=4)

    hostile(out)


if __name__ == '__main__':
    main()
