"""Side streams ordered with the default stream: nothing to report."""
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def part(x):
    return torch.relu(x @ x)


def case_wait_stream_before_and_after():
    x = torch.randn(64, 64, device=DEVICE)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = part(x)
    torch.cuda.current_stream().wait_stream(side)
    x.record_stream(side)
    y.record_stream(torch.cuda.current_stream())
    return y + 1


def case_events_order_the_streams_in_a_loop():
    side = torch.cuda.Stream()
    x = torch.randn(32, 32, device=DEVICE)
    ready = torch.cuda.Event()
    ready.record()
    x.record_stream(side)
    out = []
    for _ in range(3):
        done = torch.cuda.Event()
        side.wait_event(ready)
        with torch.cuda.stream(side):
            h = x * 2
            done.record()
        torch.cuda.current_stream().wait_event(done)
        h.record_stream(torch.cuda.current_stream())
        out.append(h.sum())
        ready.record()
    return out


def case_set_stream_and_back():
    x = torch.randn(16, device=DEVICE)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    torch.cuda.set_stream(side)
    y = x.exp()
    torch.cuda.set_stream(torch.cuda.default_stream())
    done = side.record_event()
    done.wait()
    x.record_stream(side)
    y.record_stream(torch.cuda.current_stream())
    return y * 2


def make_step():
    model = torch.nn.Linear(16, 16).to(DEVICE)
    return model, torch.optim.SGD(model.parameters(), lr=0.1), torch.randn(4, 16, device=DEVICE)


# atenlens: case_backward_on_a_side_stream_then_wait(*make_step())
def case_backward_on_a_side_stream_then_wait(model, opt, x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        loss = model(x).square().mean()
        loss.backward()
    torch.cuda.current_stream().wait_stream(side)
    opt.step()
    opt.zero_grad()


def case_overwrite_after_waiting_for_the_reader():
    x = torch.randn(64, 64, device=DEVICE)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y = x @ x
    torch.cuda.current_stream().wait_stream(side)
    x.zero_()
    return y
