"""Zero-code activation owners (issue 18): under `memscope run --analysis=decompose` (or all),
every module's forward labels what it allocates `PTA@activation@model@<module path>`, as
install_hooks() does, with no change to the script. Callers: memscope.torch._arm_activations.

torch's global module hooks (torch.nn.modules.module.register_module_forward_pre_hook and
_hook, torch 1.13 and 2.x) run for every module. A module entered while this thread is inside
no forward is a root: its named_modules() names it and every submodule (the root is "model");
a module with no name (made inside a forward) takes its class name under its caller. A
forward that raises runs no forward hook: nn.Module.__call__ is wrapped (once, on the base class,
while the hooks are on) to pop what the call pushed when it raises.

The hooks cost a few microseconds per module call, which is why they are on only when the run
asks for the decomposition. A hook that fails is said once and never reaches the program."""
import sys
import weakref

import torch

from . import _backend, decompose

_names = weakref.WeakKeyDictionary()   # module -> its path under its root ("" for a root)
_handles = []
_failed = []


def _say(e):
    if not _failed:
        _failed.append(e)
        print("memscope: activation owners are off: %s" % e, file=sys.stderr)


def _label(module):
    qn = _names.get(module)
    if qn is None:
        if not decompose._stack():   # a root: name its whole tree
            for n, m in module.named_modules():
                _names.setdefault(m, n)
            qn = _names.get(module, "")
        else:                        # made inside a forward: under its caller, by class
            top = decompose._stack()[-1][0]
            return top + "@" + type(module).__name__
    return decompose.activation_label("model", qn)


def _pre(module, inputs):
    if _failed:
        return
    try:
        with _backend.QUIET:   # memscope's own work: not the program's allocations
            if _names.get(module) == "":
                decompose.unwind()   # a root again: pop what a forward that raised left
            decompose.enter(_label(module))
    except Exception as e:   # never break the program's forward
        _say(e)


def _post(module, inputs, output):
    if _failed:
        return
    try:
        with _backend.QUIET:
            decompose.leave()
    except Exception as e:
        _say(e)


_orig_call = []   # nn.Module.__call__ before install()


def _wrap_call():
    """nn.Module.__call__ that pops the owners its call pushed when the call raises."""
    orig = torch.nn.Module.__call__

    def __call__(self, *args, **kwargs):
        depth = len(decompose._stack())
        try:
            return orig(self, *args, **kwargs)
        except BaseException:
            try:
                while len(decompose._stack()) > depth:
                    decompose.leave()
            except Exception as e:
                _say(e)
            raise
    __call__._memscope_activations = True
    _orig_call.append(orig)
    torch.nn.Module.__call__ = __call__


def install():
    """Registers the global forward hooks (once)."""
    if _handles:
        return
    mm = torch.nn.modules.module
    _handles.append(mm.register_module_forward_pre_hook(_pre))
    _handles.append(mm.register_module_forward_hook(_post))
    if not getattr(torch.nn.Module.__call__, "_memscope_activations", False):
        _wrap_call()


def remove():
    while _handles:
        _handles.pop().remove()
    if _orig_call and getattr(torch.nn.Module.__call__, "_memscope_activations", False):
        torch.nn.Module.__call__ = _orig_call.pop()
