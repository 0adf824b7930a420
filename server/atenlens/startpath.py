"""The start directory is not on `sys.path`: `python -m atenlens ...` (and the worker's
`python -m atenlens.worker`) must not import a workspace's `logging.py` or `copy.py`.

`-m` puts the current directory first on `sys.path`, and editors start language servers in the
repository they open. The worker is started with `-P` (no such entry at all); `python -m atenlens`
removes the entry as its first act, before it imports anything else. What `runpy` itself imported
before that (`importlib`, `contextlib`, `warnings`, ...) came from the current directory too if a
file there shadows it; then this process has already run workspace code, and it says so and stops
rather than go on as if nothing happened. `python -P -m atenlens` and the `atenlens` command have no
such gap. Torch-free, imports only the standard library that is loaded at start-up anyway.
"""

from __future__ import annotations

import os
import sys
from typing import Optional


def leave_start_directory() -> Optional[str]:
    """Removes the current directory that `-m` put first on sys.path. Returns, for the user, what
    was already imported from it (None when nothing was)."""
    if sys.flags.safe_path or not sys.path:
        return None
    start = os.path.realpath(sys.path[0] or os.curdir)
    if start != os.path.realpath(os.getcwd()):
        return None  # run as a script (its own folder) or from a zip: not the cwd
    del sys.path[0]
    shadowed = sorted(
        name
        for name, module in list(sys.modules.items())
        if name.partition(".")[0] != "atenlens" and _inside(getattr(module, "__file__", None), start)
    )
    if not shadowed:
        return None
    return (
        f"atenlens: {', '.join(shadowed)} came from {start} (the current directory, which `python -m` "
        f"puts first on sys.path) before atenlens could remove it, so that code has already run; "
        f"not starting. Start atenlens as `atenlens ...` or `python -P -m atenlens ...`."
    )


def _inside(path: Optional[str], folder: str) -> bool:
    if not isinstance(path, str):
        return False
    return os.path.dirname(os.path.realpath(path)) == folder
