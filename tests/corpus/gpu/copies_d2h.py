"""Device-to-host copies with non_blocking=True: the host tensor is not ready until a sync."""
import numpy as np
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case_read_too_early():
    loss = torch.randn(8, device=DEVICE).mean()
    host = loss.to("cpu", non_blocking=True)
    return host.item()  # expect: AL201:warning


def case_read_by_numpy_and_print():
    x = torch.randn(4, device=DEVICE)
    a = x.to("cpu", non_blocking=True)
    arr = a.numpy()  # expect: AL201:warning
    b = (x * 2).to("cpu", non_blocking=True)
    print(b)  # expect: AL201:warning
    c = x.to("cpu", non_blocking=True)
    as_array = np.asarray(c, dtype=np.float64)  # expect: AL201:warning
    return arr, as_array.dtype


def case_read_by_an_op():
    x = torch.randn(4, device=DEVICE)
    a = x.to("cpu", non_blocking=True)
    return a + 1  # expect: AL201:warning


def case_pinned_buffer_in_loop():
    buffer = torch.empty((), pin_memory=True)
    values = []
    for _ in range(3):
        loss = torch.randn(8, device=DEVICE).mean()
        buffer.copy_(loss, non_blocking=True)
        values.append(float(buffer))  # expect: AL201:warning
    return values


def case_event_synchronized_read():
    loss = torch.randn(8, device=DEVICE).mean()
    host = loss.to("cpu", non_blocking=True)
    ready = torch.cuda.Event()
    ready.record()
    ready.synchronize()  # expect: AL101:warning
    return host.item()


def case_device_synchronized_read():
    x = torch.randn(4, device=DEVICE)
    host = x.to("cpu", non_blocking=True)
    torch.cuda.synchronize()  # expect: AL101:warning
    return np.asarray(host.numpy()), host.tolist()


def case_read_one_step_later():
    """The pattern the fix recommends: copy now, read after next step's event sync."""
    buffer = torch.empty((), pin_memory=True)
    ready = torch.cuda.Event()
    previous = None
    for _ in range(3):
        loss = torch.randn(8, device=DEVICE).mean()
        if previous is not None:
            ready.synchronize()  # expect: AL101:warning
            previous = buffer.item()
        buffer.copy_(loss, non_blocking=True)
        ready.record()
        previous = 0.0
    return previous


def case_read_after_another_sync():
    x = torch.randn(4, device=DEVICE)
    host = x.to("cpu", non_blocking=True)
    total = x.sum().item()  # expect: AL100:warning
    return host + total


def case_event_recorded_before_the_copy():
    x = torch.randn(4, device=DEVICE)
    early = torch.cuda.Event()
    early.record()
    host = x.to("cpu", non_blocking=True)
    early.synchronize()  # expect: AL101:warning
    return host.sum()  # expect: AL201:warning
