"""Runs a train step under torch's MemTracker, inside an atenlens trace (bench/memory_vs_memtracker.py):
both tools then see the very same ops (the attention kernel the trace chooses, AdamW's foreach path).
Prints MemTracker's peak snapshot of the cuda device as one JSON line."""

import json

from torch.distributed._tools.mem_tracker import MemTracker


def tracked_step(step, *args):
    tracker = MemTracker()
    tracker.track_external(*args)
    with tracker:
        step(*args)
    snapshot = tracker.get_tracker_snapshot("peak")
    cuda = next((s for d, s in snapshot.items() if str(d).startswith("cuda")), {})
    print("MEMTRACKER " + json.dumps({getattr(k, "value", k): v for k, v in cuda.items()}))
