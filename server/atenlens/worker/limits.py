"""The worker's limits, in one place (torch-free: the client reads them too). docs/worker.md."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the language server reads these limits at start-up: no report types then
    from atenlens.report import TraceRequest

DEFAULT_MEMORY_LIMIT_MB = 4096  # data segment (RLIMIT_DATA) of each trace's process; 0: none
# How long past the request's own timeout (which the engine enforces softly, reporting the line
# it stopped at) the worker waits before it kills the trace's process: at least 5 s, a third of
# the budget for longer ones (a trace that ran 30 s has up to 20,000 events to turn into a report
# of ~9 MB, 1-2 s on a quiet machine and several times that on a loaded one), at most 30 s.
HARD_TIMEOUT_GRACE_SECONDS = 5.0
HARD_TIMEOUT_GRACE_SHARE = 1 / 3
HARD_TIMEOUT_GRACE_MAX_SECONDS = 30.0
LONGEST_TIMEOUT_SECONDS = 24 * 3600.0  # what an infinite or absurd request timeout means
# What a trace keeps of its stdout and of its stderr: the first HEAD and the last TAIL bytes.
CAPTURE_HEAD_BYTES = 64 * 1024
CAPTURE_TAIL_BYTES = 16 * 1024


def hard_timeout(request: TraceRequest) -> float:
    """Seconds after which the worker kills a trace's process."""
    seconds = float(request.timeout_seconds)
    if math.isnan(seconds):
        seconds = 0.0
    budget = min(max(seconds, 0.0), LONGEST_TIMEOUT_SECONDS)
    grace = min(max(HARD_TIMEOUT_GRACE_SECONDS, budget * HARD_TIMEOUT_GRACE_SHARE), HARD_TIMEOUT_GRACE_MAX_SECONDS)
    return budget + grace
