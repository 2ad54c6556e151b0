"""Owner tags for PyTorch memory, in msMemScope's form (reference §4.5), for
`memscope analyze decompose`.

Owner strings (levels joined with '@'; framework level `PTA`, as msMemScope's PyTorch pool):
  PTA@weight               storage of every parameter of the model
  PTA@gradient             storage of every parameter's .grad
  PTA@optimizer_state      storage of every tensor in optimizer.state (Adam: exp_avg,
                           exp_avg_sq and the `step` tensor)
  PTA@activation@<root>@<child>@...
                           every allocation made while a module's forward runs, labelled by
                           the module path (`<root>` = install_hooks(name=..., default
                           "model"), then one level per submodule attribute name, e.g.
                           PTA@activation@model@layers@0)

Activations are tagged when they are allocated: a forward pre-hook pushes the module's level
with memscope's owner stack (owner_push) and the forward hook pops it.

Weights, gradients and optimizer state already exist when we learn what they are, so they are
tagged by address with a MARK the store turns into an owner (docs/torch.md, "Tag marks"):

    memscope-tag:ptr=0x<hex storage address>;size=<storage bytes>;owner=<owner string>

Rule for the store: the block of the MARK's process live at exactly `ptr` at the MARK's time
(the heap first, then mmap, then pools, as for ACCESS) gets `owner` as its owner, replacing
any owner it had; no such block: the MARK is kept and nothing else happens. The tags are
emitted at install_hooks() (weights) and after every optimizer.step() (all three kinds,
msMemScope's optimizer post-hook), so a block replaced later is tagged again.
"""
import threading

import torch

from . import _backend
from .dispatch import storage_of

FRAMEWORK = "PTA"
WEIGHT = "PTA@weight"
GRADIENT = "PTA@gradient"
OPTIMIZER_STATE = "PTA@optimizer_state"
ACTIVATION = "PTA@activation"
TAG_PREFIX = "memscope-tag:"


def tag_message(ptr, size, owner):
    """The MARK text that tags the block at ptr with owner."""
    return "%sptr=0x%x;size=%d;owner=%s" % (TAG_PREFIX, ptr, size, owner)


def tag(tensor_or_ptr, owner, size=0):
    """Tag the block under a tensor's storage (or at an address) with owner. Returns the
    number of MARKs emitted (0 for a tensor without storage)."""
    if isinstance(tensor_or_ptr, torch.Tensor):
        ptr, size = storage_of(tensor_or_ptr)
    else:
        ptr = int(tensor_or_ptr)
    if not ptr:
        return 0
    _backend.mark(tag_message(ptr, size, owner))
    return 1


def _unique(tensors):
    seen = set()
    for t in tensors:
        if isinstance(t, torch.Tensor):
            ptr, n = storage_of(t)
            if ptr and ptr not in seen:
                seen.add(ptr)
                yield t


def tag_weights(params):
    return sum(tag(p, WEIGHT) for p in _unique(params))


def tag_gradients(params):
    return sum(tag(g, GRADIENT) for g in _unique(p.grad for p in params if p.grad is not None))


def optimizer_state_tensors(optimizer):
    """Every tensor in optimizer.state, once per storage."""
    out = []
    for st in optimizer.state.values():
        if isinstance(st, dict):
            for v in st.values():
                if isinstance(v, torch.Tensor):
                    out.append(v)
    return list(_unique(out))


def optimizer_params(optimizer):
    return [p for g in optimizer.param_groups for p in g["params"]]


def tag_optimizer(optimizer):
    """msMemScope's optimizer post-hook: weights, gradients, optimizer state."""
    params = optimizer_params(optimizer)
    n = tag_weights(params)
    n += tag_gradients(params)
    n += sum(tag(t, OPTIMIZER_STATE) for t in optimizer_state_tensors(optimizer))
    return n


# --- activations ---------------------------------------------------------------------------
_tls = threading.local()


def _stack():
    s = getattr(_tls, "stack", None)
    if s is None:
        s = _tls.stack = []   # [(full owner after the push, pushed?)]
    return s


def activation_label(root, qualname):
    """Owner string of allocations in the forward of module `qualname` (named_modules name)."""
    return "@".join([ACTIVATION, root] + ([qualname.replace(".", "@")] if qualname else []))


def enter(full):
    """Push the owner `full` (nested in what this thread pushed already when that is a prefix)."""
    s = _stack()
    top = s[-1][0] if s else ""
    if top and full.startswith(top + "@"):
        seg = full[len(top) + 1:]
    elif top == full:
        seg = None             # re-entered the same module (recursion): nothing to push
    else:
        seg = full
    pushed = seg is not None and _backend.owner_push(seg) == 0
    s.append((full if seg is not None else top, pushed))


def leave():
    s = _stack()
    if s:
        _, pushed = s.pop()
        if pushed:
            _backend.owner_pop()


def unwind():
    """Pop what a forward that raised left on this thread's owner stack."""
    s = _stack()
    while s:
        leave()
