"""Explicit synchronization and blocking copies to the host."""
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case_synchronize_calls():
    x = torch.randn(256, 256, device=DEVICE)
    y = x @ x
    torch.cuda.synchronize()  # expect: AL101:warning
    done = torch.cuda.Event()
    done.record()
    done.synchronize()  # expect: AL101:warning
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        z = y @ y
    y.record_stream(side)
    side.synchronize()  # expect: AL101:warning
    torch.cuda.current_stream().synchronize()  # expect: AL101:warning
    return z


def case_timing_loop():
    x = torch.randn(128, 128, device=DEVICE)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        start.record()
        x = x @ x
        end.record()
        end.synchronize()  # expect: AL101:warning
        elapsed = start.elapsed_time(end)
    return x, elapsed


def case_blocking_copies_to_host():
    x = torch.randn(16, device=DEVICE)
    a = x.cpu()  # expect: AL100:warning
    b = x.to("cpu")  # expect: AL100:warning
    host = torch.empty(16)
    host.copy_(x)  # expect: AL100:warning
    pageable = torch.empty(16)
    pageable.copy_(x, non_blocking=True)  # expect: AL100:warning
    return a, b, host, pageable


def case_copies_to_host_in_loop():
    outputs = []
    for _ in range(4):
        y = torch.randn(16, device=DEVICE) * 2
        outputs.append(y.to("cpu"))  # expect: AL100:warning
    return outputs
