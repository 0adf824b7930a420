"""CUDA event timing read after the host waited for the end event: nothing to report but the waits
themselves are AL101 by design, so this file only polls and reads timings of completed events."""
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case_polled_until_done():
    x = torch.randn(128, 128, device=DEVICE)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    y = x @ x
    end.record()
    while not end.query():
        pass
    return y, start.elapsed_time(end)


def case_previous_step_timed_after_this_one_is_queued():
    x = torch.randn(128, 128, device=DEVICE)
    events = []
    times = []
    for step in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x = x @ x
        end.record()
        events.append((start, end))
        if step > 0 and events[-2][1].query():
            times.append(events[-2][0].elapsed_time(events[-2][1]))
    return x, times
