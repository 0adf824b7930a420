"""Work on a side stream that is not ordered with the default stream (AL500)."""
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case_side_stream_does_not_wait_for_its_input():
    x = torch.randn(64, 64, device=DEVICE)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = torch.relu(x @ x)  # expect: AL500:warning
    torch.cuda.current_stream().wait_stream(side)   # x is freed after this wait: no record_stream needed
    return y + 1  # expect: AL502:warning


def case_default_stream_does_not_wait_for_the_side_stream():
    x = torch.randn(64, 64, device=DEVICE)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = torch.relu(x @ x)  # expect: AL502:warning
    return y + 1  # expect: AL500:warning, AL502:warning


def case_event_recorded_but_not_waited_in_a_loop():
    side = torch.cuda.Stream()
    x = torch.randn(32, 32, device=DEVICE)
    out = []
    for _ in range(3):
        done = torch.cuda.Event()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            h = x * 2  # expect: AL502:warning
            done.record()
        out.append(h.sum())  # expect: AL500:warning, AL502:warning
    return out


def case_waiting_on_the_side_stream_itself():
    x = torch.randn(64, 64, device=DEVICE)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        side.wait_stream(torch.cuda.current_stream())   # current_stream() is `side` here: orders nothing
        y = x * 2  # expect: AL500:warning
    torch.cuda.current_stream().wait_stream(side)
    return y


def make_step():
    model = torch.nn.Linear(16, 16).to(DEVICE)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(4, 16, device=DEVICE)


# atenlens: case_backward_on_a_side_stream_then_step_on_the_default(*make_step())
def case_backward_on_a_side_stream_then_step_on_the_default(model, opt, x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        loss = model(x).square().mean()
        loss.backward()
    opt.step()  # expect: AL500:warning
    opt.zero_grad()


def case_overwritten_while_the_side_stream_reads_it():
    x = torch.randn(64, 64, device=DEVICE)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = x @ x
    x.zero_()  # expect: AL503:warning
    torch.cuda.current_stream().wait_stream(side)
    return y


def case_buffer_refilled_each_step_while_the_side_stream_copies_it():
    staging = torch.empty(1024, device=DEVICE)
    side = torch.cuda.Stream()
    kept = []
    for step in range(3):
        staging.fill_(step)  # expect: AL503:warning
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            kept.append(staging * 2)
    torch.cuda.current_stream().wait_stream(side)
    return kept
