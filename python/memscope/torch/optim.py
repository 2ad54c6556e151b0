"""memscope.torch.optim: what happens after every optimizer.step(), for any optimizer of the
program, with no change to the program (docs/torch.md, "Owners and steps without code").

Under `memscope run` (sitecustomize arms it for when the program imports torch), after every
step of every optimizer:
  * the optimizer's parameters, their gradients and its state are tagged PTA@weight,
    PTA@gradient and PTA@optimizer_state (msMemScope's optimizer post-hook);
  * a memscope step ends, when this optimizer is the one that ends steps: MEMSCOPE_STEP_ON
    (`memscope run --step-on=`) `auto` (the default: the first optimizer that steps), the
    class name of one (`Adam`), or `none`.
A program that calls memscope.step() itself takes the steps over at its first call; a call
that comes right after an automatic step counts as that step, not a second one.

How, without replacing anyone's optimizer.step (LR schedulers wrap that bound method and
count its calls): torch >= 2.0 has a global step post-hook; torch 1.13 calls
Optimizer._optimizer_step_code() after every step (its profiler's entry point, a no-op), which
is wrapped once on the base class. install_hooks() (memscope.torch.hooks) listens here too: its
log needs the moment before a step as well, taken from torch 2's per-optimizer pre-hook or, on
1.13, a wrapper on the optimizer's class (as torch's own profiler wrapper), never on the
instance.
"""
import functools
import os
import sys
import threading
import weakref

import torch

from . import _backend, decompose
from .. import _env

_lock = threading.Lock()
_installed = False
_listeners = weakref.WeakKeyDictionary()   # optimizer -> [objects with _before/_after_step]
_state = {
    "auto": False,           # memscope run armed it: tag and end steps for every optimizer
    "step_on": "auto",       # MEMSCOPE_STEP_ON
    "ender": None,           # weakref to the optimizer that ends steps (step_on auto)
    "user_steps": False,     # the program called memscope.step() itself
    "auto_just_stepped": False,  # an automatic step was the last step
}


def install(auto=False):
    """Installs the post-step hook once; auto=True also tags and ends steps for every
    optimizer (what `memscope run` arms)."""
    global _installed
    with _lock:
        if auto:
            _state["auto"] = True
            _state["step_on"] = _env.get(_env.STEP_ON, "auto").strip() or "auto"
        if _installed:
            return
        _installed = True
    import torch.optim.optimizer as optimizer_module
    reg = getattr(optimizer_module, "register_optimizer_step_post_hook", None)
    if reg is not None:   # torch >= 2.0
        reg(lambda opt, args, kwargs: _post(opt))
        return
    base = torch.optim.Optimizer
    orig = base._optimizer_step_code

    @functools.wraps(orig)
    def _optimizer_step_code(self):
        orig(self)
        _post(self)
    base._optimizer_step_code = _optimizer_step_code


def listen(optimizer, who):
    """who._before_step() and who._after_step() around every step of this optimizer."""
    install()
    _listeners.setdefault(optimizer, []).append(who)
    pre = getattr(optimizer, "register_step_pre_hook", None)
    if pre is not None:   # torch >= 2.0: per optimizer
        if not getattr(optimizer, "_memscope_pre", False):
            pre(lambda opt, args, kwargs: _pre(opt))
            optimizer._memscope_pre = True
        return
    cls = type(optimizer)
    fn = cls.step
    if getattr(fn, "_memscope_pre", False):
        return

    @functools.wraps(fn)   # keeps torch's `hooked` mark: its profiler does not wrap it again
    def step(self, *args, **kwargs):
        _pre(self)
        return fn(self, *args, **kwargs)
    step._memscope_pre = True
    cls.step = step


def unlisten(optimizer, who):
    lst = _listeners.get(optimizer)
    if lst and who in lst:
        lst.remove(who)


_complained = False


def _complain(e):
    """A hook's failure is said once and never reaches the program's optimizer.step()."""
    global _complained
    if not _complained:
        _complained = True
        print("memscope: the optimizer hook failed (%s: %s); the program goes on"
              % (type(e).__name__, e), file=sys.stderr)


def _pre(opt):
    try:
        for who in list(_listeners.get(opt, ())):
            who._before_step()
    except Exception as e:
        _complain(e)


def _ends_steps(opt):
    on = _state["step_on"]
    if on == "none":
        return False
    if on != "auto":
        return type(opt).__name__ == on
    ender = _state["ender"]() if _state["ender"] is not None else None
    if ender is None:
        _state["ender"] = weakref.ref(opt)
        return True
    return ender is opt


def _post(opt):
    with _backend.QUIET:   # the tags' strings are memscope's, not the program's allocations
        try:
            _post_q(opt)
        except Exception as e:
            _complain(e)


def _post_q(opt):
    lst = list(_listeners.get(opt, ()))
    if _state["auto"] or any(getattr(who, "owners", False) for who in lst):
        decompose.tag_optimizer(opt)
    for who in lst:
        who._after_step()
    if _state["auto"] and not _state["user_steps"] and _ends_steps(opt):
        _backend.step()
        _state["auto_just_stepped"] = True


def user_step():
    """memscope.step() was called by the program: True when that call is the automatic step
    that just ended (it is then not made again). From here on the program makes the steps."""
    dup = _state["auto_just_stepped"] and not _state["user_steps"]
    _state["user_steps"] = True
    _state["auto_just_stepped"] = False
    return dup
