"""Which frames belong to the user's code, and the user stack of the current call: the one place
that walks stacks (`user_frames`, `UserStacks`, `traceback_stack`, `library_cause`, `user_callee`,
`first_frame_outside`).

A frame is a user frame when its file is not part of torch, of an installed package
(site-packages / dist-packages), of the standard library, or of atenlens itself. Results are
cached per filename: a trace walks the stack for every op, so this must stay cheap.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from types import FrameType, TracebackType
from typing import Any, Optional

from atenlens.report import Frame

# The file name of the example call's code (`# atenlens: train_step(*setup())`): runner.py compiles
# it under this name, the hazard tracker tells the call's setup from the function by it.
EXAMPLE_CALL_FILENAME = "<atenlens example call>"
_ATENLENS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _library_roots() -> tuple[str, ...]:
    roots = {_ATENLENS_DIR}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.abspath(path) + os.sep)
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}:
        roots.add(os.path.join(os.path.abspath(prefix), "lib") + os.sep)
    return tuple(sorted(roots))


_ROOTS = _library_roots()
_is_user: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    cached = _is_user.get(filename)
    if cached is not None:
        return cached
    if filename.startswith("<") and filename.endswith(">"):
        verdict = False  # <string>, <frozen ...>, <eval>
    else:
        path = os.path.abspath(filename)
        verdict = (
            not path.startswith(_ROOTS)
            and (os.sep + "site-packages" + os.sep) not in path
            and (os.sep + "dist-packages" + os.sep) not in path
        )
    _is_user[filename] = verdict
    return verdict


def user_frames(frame: Optional[FrameType]) -> list[FrameType]:
    """The user's frames from `frame` outwards, innermost first."""
    frames = []
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            frames.append(frame)
        frame = frame.f_back
    return frames


def _frame(frame: FrameType) -> Frame:
    return Frame(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_qualname)


def user_stack(frame: Optional[FrameType] = None) -> tuple[Frame, ...]:
    """User frames from `frame` (default: the caller) outwards, returned outermost first."""
    return tuple(_frame(f) for f in reversed(user_frames(frame if frame is not None else sys._getframe(1))))


class UserStacks:
    """The user stacks of one trace, for every op and call it records: the user frames from a frame
    outwards, outermost first, stopping at `boundary`, the code that started the trace (so a caller
    that is itself a user file, e.g. a test, is not part of the stack).

    Runs for every op and call, so: whether a code object is the user's is cached per code object,
    and equal stacks (the same lines again, as in a loop) share one tuple of Frames."""

    def __init__(self) -> None:
        self.boundary: Any = None
        self._is_user_code: dict[Any, bool] = {}  # code object -> is it in a user file
        self._stacks: dict[tuple, tuple[Frame, ...]] = {}  # (code, line, ...) innermost first -> stack

    def stack(self, frame: Any) -> tuple[Frame, ...]:
        is_user_code = self._is_user_code
        boundary = self.boundary
        key: list[Any] = []
        while frame is not None:
            code = frame.f_code
            if code is boundary:
                break
            user = is_user_code.get(code)
            if user is None:
                user = is_user_code[code] = is_user_file(code.co_filename)
            if user:
                key.append(code)
                key.append(frame.f_lineno)
            frame = frame.f_back
        stack_key = tuple(key)
        stack = self._stacks.get(stack_key)
        if stack is None:
            stack = self._stacks[stack_key] = tuple(
                Frame(code.co_filename, line, code.co_qualname)
                for code, line in reversed(list(zip(key[0::2], key[1::2])))
            )
        return stack


def traceback_stack(tb: Optional[TracebackType]) -> tuple[Frame, ...]:
    """The user frames of a traceback (where an exception passed), outermost first, each at the line
    it was running."""
    frames: list[Frame] = []
    while tb is not None:
        code = tb.tb_frame.f_code
        if is_user_file(code.co_filename):
            frames.append(Frame(code.co_filename, tb.tb_lineno, code.co_qualname))
        tb = tb.tb_next
    return tuple(frames)


# torch's own plumbing between the user's call and an op (dispatch, modes, module calls, autograd):
# never "the library line that did it". Private modules (a path part starting with "_") are too.
# Thin API layers (torch/functional.py's `torch.unique`, nn.functional, module forwards) are the
# call the user wrote, not a library's own decision either.
_TORCH_PLUMBING = ("overrides.py", "functional.py", "nn/functional.py", "nn/modules/", "autograd/", "utils/hooks.py")


def _package_relative(path: str) -> Optional[str]:
    """`transformers/masking_utils.py` for a file of an installed package, else None."""
    for marker in (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep):
        if marker in path:
            return path.rsplit(marker, 1)[1].replace(os.sep, "/")
    return None


def library_cause(frame: Optional[FrameType]) -> Optional[tuple[Frame, str]]:
    """The innermost frame of an installed library (not torch's plumbing, not atenlens) between
    `frame` and the innermost user frame, with its package-relative path; None when the user's
    code calls the op directly."""
    f = frame
    while f is not None:
        filename = f.f_code.co_filename
        if is_user_file(filename):
            return None
        relative = _package_relative(filename) if not filename.startswith(_ATENLENS_DIR) else None
        if relative is not None and not _is_torch_plumbing(relative):
            return Frame(filename, f.f_lineno, getattr(f.f_code, "co_qualname", f.f_code.co_name)), relative
        f = f.f_back
    return None


def user_callee(frame: Optional[FrameType]) -> Optional[str]:
    """The file of the frame the innermost user frame above `frame` called into; None when `frame` is
    itself a user frame or no user frame is on the stack."""
    callee = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_user_file(filename):
            return callee
        callee = filename
        frame = frame.f_back
    return None


def first_frame_outside(frame: Optional[FrameType], prefixes: tuple[str, ...]) -> Optional[FrameType]:
    """The innermost frame from `frame` outwards whose file starts with none of `prefixes`."""
    while frame is not None:
        if not frame.f_code.co_filename.startswith(prefixes):
            return frame
        frame = frame.f_back
    return None


def _is_torch_plumbing(relative: str) -> bool:
    if not relative.startswith("torch/"):
        return False
    inside = relative[len("torch/") :]
    return any(part.startswith("_") for part in inside.split("/")) or inside.startswith(_TORCH_PLUMBING)
