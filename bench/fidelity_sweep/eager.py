"""The truth side of the fidelity sweep: run FILE::FN(example call) eagerly on the CPU with real small
tensors under a TorchDispatchMode that records each aten op (phase, line in FILE, output shapes and
dtypes), and print them as one JSON object. The configuration files read SWEEP_DEV (set to cpu here).

Backward ops are placed at the forward line whose node ran them (anomaly mode keeps each node's
forward traceback), optimizer ops by torch.optim's global step hooks, as the trace places them.
Usage: eager.py FILE FN 'FN(*setup())'
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import sys
from typing import Any

os.environ["SWEEP_DEV"] = "cpu"
path, fn, call = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.dirname(path))
sys.argv = [path]

import torch  # noqa: E402
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torch.utils._pytree import tree_flatten  # noqa: E402

spec = importlib.util.spec_from_file_location("sweep_config", path)
assert spec is not None and spec.loader is not None
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
arguments = call[call.index("(") + 1 : call.rindex(")")]
args, kwargs = eval(f"(lambda *a, **k: (a, k))({arguments})", vars(module))

state = {"optimizer": 0}


def _enter(*_: Any) -> None:
    state["optimizer"] += 1


def _leave(*_: Any) -> None:
    state["optimizer"] -= 1


register_optimizer_step_pre_hook(_enter)
register_optimizer_step_post_hook(_leave)
_zero_grad = torch.optim.Optimizer.zero_grad


def _counted_zero_grad(self: Any, *a: Any, **k: Any) -> Any:
    _enter()
    try:
        return _zero_grad(self, *a, **k)
    finally:
        _leave()


torch.optim.Optimizer.zero_grad = _counted_zero_grad  # type: ignore[method-assign]
LINE = re.compile(r'File "([^"]+)", line (\d+)')


def _line_here() -> Any:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == path:
            return frame.f_lineno
        frame = frame.f_back  # type: ignore[assignment]
    return None


events: list[dict] = []


class Recorder(TorchDispatchMode):
    def __torch_dispatch__(self, func: Any, types: Any, a: Any = (), k: Any = None) -> Any:
        out = func(*a, **(k or {}))
        node = torch._C._current_autograd_node()
        phase = "optimizer" if state["optimizer"] else ("backward" if node is not None else "forward")
        line = None
        if node is not None:
            trace = node.metadata.get("traceback_")  # type: ignore[attr-defined]
            if trace:
                text = "".join(trace) if isinstance(trace, list) else str(trace)
                hits = [int(m.group(2)) for m in LINE.finditer(text) if m.group(1) == path]
                line = hits[-1] if hits else None
        if line is None:
            line = _line_here()
        outs = [x for x in tree_flatten(out)[0] if isinstance(x, torch.Tensor)]
        shapes = [{"shape": list(o.shape), "dtype": str(o.dtype).removeprefix("torch.")} for o in outs]
        events.append({"phase": phase, "line": line, "name": str(func), "outputs": shapes})
        return out


printed = io.StringIO()
status, message = "ok", ""
try:
    with contextlib.redirect_stdout(printed), torch.autograd.detect_anomaly(check_nan=False), Recorder():
        getattr(module, fn)(*args, **kwargs)
except BaseException as error:  # the comparison reports it
    status, message = "error", f"{type(error).__name__}: {error}"[:500]
print(json.dumps({"status": status, "message": message, "stdout": printed.getvalue(), "events": events}))
