"""memscope.torch.install_hooks(): module hooks for decomposition owners, the per-module
memory log and automatic steps. Callers: user code (through memscope.torch).

Stages and when they are logged (docs/torch.md):
  pre_forward / post_forward   forward pre-hook / forward hook of each module
  pre_backward                 the first gradient hook fired on an output of the module's
                               forward (the gradient of its output exists: its backward starts)
  post_backward                the gradients of all its inputs that require grad and of all its
                               parameters (recursively) exist; a module with neither is not
                               logged in backward
  pre_step / post_step         around optimizer.step() (module "optimizer"), through
                               memscope.torch.optim: optimizer.step itself is not replaced
A module called several times in one forward gets one pre_backward and one post_backward per
call whose backward ran (each call's inputs are its own; the parameters' gradients, summed over
the calls, complete them all). Forwards never followed by a backward (evaluation with grad on)
are forgotten past MAX_PENDING calls of a module, and at every optimizer step.
torch 1.13 has no backward pre-hooks and its full backward hooks fire too early for modules
whose inputs do not require grad, hence the tensor hooks.
"""
import functools
import weakref

import torch

from . import _backend, decompose, dispatch, optim
from .modlog import ModuleLog


def _step_package():
    """memscope.step() of the package when it has one (keeps its counter), else the agent's."""
    try:
        import memscope
        fn = getattr(memscope, "step", None)
        if fn is not None:
            fn()
            return
    except Exception:
        pass
    _backend.step()


_guarded = weakref.WeakSet()   # root modules whose forward pops its owners when it raises


def _guard(model):
    """A forward that raises runs no forward hook: the owners its modules pushed would stay
    on the thread's stack and label whatever is allocated next (PTA@activation@model@boom).
    The model's class gets a __call__ that pops them when the call raises, for the models
    install_hooks() hooked (torch 1.13 has no forward hook that runs on exceptions); the class,
    not the instance, as torch's own profiler wraps optimizer classes."""
    _guarded.add(model)
    cls = type(model)
    call = cls.__call__
    if getattr(call, "_memscope_guard", False):
        return

    @functools.wraps(call)
    def __call__(mod, *args, **kwargs):
        try:
            return call(mod, *args, **kwargs)
        except BaseException:
            if mod in _guarded:
                decompose.unwind()
            raise
    __call__._memscope_guard = True
    cls.__call__ = __call__


MAX_PENDING = 256   # calls of one module awaiting their backward, at most


class _Call:
    """One forward call of a module whose backward the log awaits: the gradients of its
    inputs still missing, the parameters whose gradient is still missing, and whether its
    output's gradient arrived (its pre_backward was logged)."""
    __slots__ = ("qn", "inputs", "params", "fired")

    def __init__(self, qn, params):
        self.qn = qn
        self.inputs = 0
        self.params = set(params)
        self.fired = [False]


class Hooks:
    """What install_hooks() set up; remove() takes it all down."""

    def __init__(self, model, optimizer=None, name="model", log_path=None, rank=None,
                 auto_step=False, decompose_owners=True, log=True, to_db=True, tracer=None):
        with _backend.QUIET:   # memscope's own bookkeeping: not the program's allocations
            self._init(model, optimizer, name, log_path, rank, auto_step, decompose_owners, log,
                       to_db, tracer)

    def _init(self, model, optimizer, name, log_path, rank, auto_step, decompose_owners, log,
              to_db, tracer):
        if model is not None and not isinstance(model, torch.nn.Module):
            raise TypeError("install_hooks(): model must be a torch.nn.Module, not %s"
                            % type(model).__name__)
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError("install_hooks(): optimizer must be a torch.optim.Optimizer, not %s"
                            % type(optimizer).__name__)
        if not isinstance(name, str) or not name or "@" in name:
            raise ValueError("install_hooks(): name must be a non-empty str without '@'")
        if model is None and optimizer is None:
            raise ValueError("install_hooks(): give a model, an optimizer or both")
        self.model = model
        self.optimizer = optimizer
        self.name = name
        self.auto_step = auto_step
        self.owners = decompose_owners
        if tracer is not None:   # the caller's log (MemTracer): it owns it
            if not isinstance(tracer, ModuleLog):
                raise TypeError("install_hooks(): tracer must be a memscope.torch.MemTracer, "
                                "not %s" % type(tracer).__name__)
            if not log or log_path is not None or rank is not None:
                raise ValueError("install_hooks(): tracer= already says where and how to log "
                                 "(no log=, log_path= or rank= with it)")
            self.log, self.own_log = tracer, False
        else:
            self.log, self.own_log = (ModuleLog(log_path, rank, to_db) if log else None), True
        self.handles = []
        self.pending = {}      # module name -> its _Calls awaiting their backward, in call order
        self.open = {}         # module name -> its _Calls whose forward has not returned yet
        self.features = ("live",) if self.log else ()
        if self.features:
            dispatch.enable(*self.features)
        mods = list(model.named_modules()) if model is not None else []
        self.param_owners = {}  # id(param) -> [module names that contain it]
        self.mod_params = {}
        for qn, m in mods:
            ids = set()
            for p in m.parameters():
                if p.requires_grad:
                    ids.add(id(p))
                    self.param_owners.setdefault(id(p), []).append(qn)
            self.mod_params[qn] = ids
        if model is not None:
            params = list(model.parameters())
            for p in params:
                dispatch.live.track(p)
            if self.owners:
                decompose.tag_weights(params)
            if self.owners:
                _guard(model)
            for qn, m in mods:
                self.handles.append(m.register_forward_pre_hook(functools.partial(self._pre, qn)))
                self.handles.append(m.register_forward_hook(functools.partial(self._post, qn)))
            seen = set()
            for p in params:
                if p.requires_grad and id(p) not in seen:
                    seen.add(id(p))
                    self.handles.append(p.register_hook(functools.partial(self._pgrad, id(p))))
        if optimizer is not None:   # around its steps, without replacing optimizer.step
            optim.listen(optimizer, self)

    # --- names
    def _label(self, qn):
        return qn if qn else self.name

    def _type(self, qn):
        return type(self.model.get_submodule(qn)).__name__ if self.model is not None else ""

    def _log(self, stage, qn):
        if self.log is not None:
            self.log.log(stage, self._label(qn), self._type(qn))

    # --- forward
    def _pre(self, qn, module, inputs):
        with _backend.QUIET:   # memscope's own work: not the program's allocations
            return self._pre_q(qn, module, inputs)

    def _pre_q(self, qn, module, inputs):
        if not qn:
            decompose.unwind()   # a forward that raised left owners pushed
        self._log("pre_forward", qn)
        if self.owners:
            decompose.enter(decompose.activation_label(self.name, qn))
        if torch.is_grad_enabled() and self.log is not None:
            call = _Call(qn, self.mod_params.get(qn, ()))
            for t in inputs:
                if isinstance(t, torch.Tensor) and t.requires_grad:
                    t.register_hook(functools.partial(self._igrad, call))
                    call.inputs += 1
            if call.inputs or call.params:
                calls = self.pending.setdefault(qn, [])
                calls.append(call)
                if len(calls) > MAX_PENDING:   # forwards without a backward: the oldest go
                    del calls[0]
            self.open.setdefault(qn, []).append(call)

    def _post(self, qn, module, inputs, output):
        with _backend.QUIET:   # memscope's own work: not the program's allocations
            return self._post_q(qn, module, inputs, output)

    def _post_q(self, qn, module, inputs, output):
        if self.owners:
            decompose.leave()
        self._log("post_forward", qn)
        opened = self.open.get(qn)
        call = opened.pop() if opened else None   # this forward's call (calls nest)
        if torch.is_grad_enabled() and self.log is not None:
            fired = call.fired if call is not None else [False]
            for t in dispatch.tensors_of(output):
                if t.requires_grad:
                    # One hook per tensor: a module returning its child's output (Sequential)
                    # shares it; the outer module (whose hook runs last) logs first.
                    waiting = getattr(t, "_memscope_pre_backward", None)
                    if waiting is None:
                        waiting = []
                        t._memscope_pre_backward = waiting
                        t.register_hook(functools.partial(self._ograd, waiting))
                    waiting.append((qn, fired))

    # --- backward
    def _ograd(self, waiting, grad):
        with _backend.QUIET:   # memscope's own work: not the program's allocations
            return self._ograd_q(waiting, grad)

    def _ograd_q(self, waiting, grad):
        for qn, fired in reversed(waiting):
            if not fired[0]:
                fired[0] = True
                self._log("pre_backward", qn)

    def _done(self, call):
        """Logs the call's post_backward once its inputs' and parameters' gradients exist,
        when its backward began (a call whose output got no gradient has no backward)."""
        if call.inputs > 0 or call.params:
            return
        calls = self.pending.get(call.qn)
        if calls is None or call not in calls:
            return
        calls.remove(call)
        if not calls:
            del self.pending[call.qn]
        if call.fired[0]:
            self._log("post_backward", call.qn)

    def _igrad(self, call, grad):
        with _backend.QUIET:   # memscope's own work: not the program's allocations
            return self._igrad_q(call, grad)

    def _igrad_q(self, call, grad):
        call.inputs -= 1
        self._done(call)

    def _pgrad(self, pid, grad):
        with _backend.QUIET:   # memscope's own work: not the program's allocations
            return self._pgrad_q(pid, grad)

    def _pgrad_q(self, pid, grad):
        for qn in reversed(self.param_owners.get(pid, ())):   # innermost module first
            for call in list(self.pending.get(qn, ())):
                call.params.discard(pid)
                self._done(call)

    # --- optimizer (memscope.torch.optim calls these around every step; the owner tags after
    # it are made there, once, when self.owners)
    def _before_step(self):
        with _backend.QUIET:   # memscope's own work: not the program's allocations
            return self._before_step_q()

    def _before_step_q(self):
        if self.log is not None:
            self.log.log("pre_step", "optimizer", type(self.optimizer).__name__)
        self.pending.clear()
        self.open.clear()

    def _after_step(self):
        with _backend.QUIET:   # memscope's own work: not the program's allocations
            return self._after_step_q()

    def _after_step_q(self):
        if self.log is not None:
            self.log.log("post_step", "optimizer", type(self.optimizer).__name__)
            self.log.step += 1
        if self.auto_step:
            _step_package()

    def remove(self):
        for h in self.handles:
            h.remove()
        self.handles = []
        if self.optimizer is not None:
            optim.unlisten(self.optimizer, self)
        if self.features:
            dispatch.disable(*self.features)
            self.features = ()
        if self.log is not None and self.own_log:
            self.log.close()
        self.log = None
        decompose.unwind()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False
