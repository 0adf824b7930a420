"""CUDA event timing read before the end event has completed (AL501)."""
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case_elapsed_time_without_a_sync():
    x = torch.randn(128, 128, device=DEVICE)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    y = x @ x
    end.record()
    return y, start.elapsed_time(end)  # expect: AL501:error


def case_elapsed_time_of_each_step_in_a_loop():
    x = torch.randn(128, 128, device=DEVICE)
    times = []
    for _ in range(3):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        x = x @ x
        end.record()
        times.append(start.elapsed_time(end))  # expect: AL501:error
    return x, times


def case_synchronized_before_the_last_record():
    x = torch.randn(128, 128, device=DEVICE)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    y = x @ x
    torch.cuda.synchronize()  # expect: AL101:warning
    end.record()
    return y, start.elapsed_time(end)  # expect: AL501:error
