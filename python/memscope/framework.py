"""msMemScope's preset framework hooks, init_framework_hooks() / cleanup_framework_hooks(), for
the presets memscope has: plain PyTorch modules and FSDP (whose wrapped units are modules too),
hook type "decompose": every module's forward labels what it allocates as an activation owner
(memscope.torch.activations, what `memscope run --analysis=decompose` arms by itself).
Callers: user code, through the memscope package. Imports torch only when a preset is asked."""
import re
import sys

# (framework, components) memscope has presets for; hook types: decompose
_PRESETS = {"pytorch": ("module", "fsdp1", "fsdp2", "*")}
_HOOK_TYPES = ("decompose",)


def _minor(v):
    """(major, minor) of a version text ("2.6", "1.13.0a0+git"), or None."""
    m = re.match(r"\s*(\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else None


def version_matches(key, version):
    """Whether the torch version text matches msMemScope's version key: "*", an exact
    major.minor ("2.6"), "X+" (X or later) or "A-B" (A to B, both included)."""
    key = key.strip()
    v = _minor(version)
    if key == "*":
        return True
    if v is None:
        return False
    if key.endswith("+"):
        lo = _minor(key[:-1])
        return lo is not None and v >= lo
    if "-" in key:
        lo, hi = (_minor(p) for p in key.split("-", 1))
        return lo is not None and hi is not None and lo <= v <= hi
    k = _minor(key)
    return k is not None and k == v


def init_framework_hooks(framework, version="*", component="*", hook_type="decompose"):
    """Registers msMemScope's preset hooks for framework/component/hook_type when the running
    framework's version matches `version`. Returns True when the hooks are on, False (with a
    warning on stderr) when the version does not match. Raises ValueError for a preset memscope
    does not have (vllm_ascend, mindspeed_llm and verl are Ascend stacks; "snapshot" hooks are
    not there yet)."""
    fw, comp, kind = str(framework).lower(), str(component).lower(), str(hook_type).lower()
    if fw not in _PRESETS or comp not in _PRESETS[fw]:
        raise ValueError("init_framework_hooks(): memscope has presets for pytorch "
                         "(components %s), not %s/%s" % (", ".join(_PRESETS["pytorch"]),
                                                         framework, component))
    if kind not in _HOOK_TYPES:
        raise ValueError("init_framework_hooks(): memscope has hook type decompose, not %s"
                         % hook_type)
    import torch
    if not version_matches(str(version), torch.__version__):
        print("memscope: init_framework_hooks(): torch %s does not match version %s: no hooks"
              % (torch.__version__, version), file=sys.stderr)
        return False
    from .torch import activations
    activations.install()
    return True


def cleanup_framework_hooks():
    """Removes what init_framework_hooks() registered (nothing when it registered nothing)."""
    mod = sys.modules.get("memscope.torch.activations")
    if mod is not None:
        mod.remove()
