"""CUDA graph capture as torch's documentation writes it: warm-up on a side stream, capture once,
copy each batch into the static input, replay, read the static output. Nothing to report but the
capture's own summary (AL513) and torch.cuda.graph's synchronize before the capture."""
import torch
import torch.nn as nn


def setup():
    model = nn.Sequential(nn.Linear(64, 64), nn.GELU(), nn.Linear(64, 64)).cuda()
    batches = [torch.randn(8, 64, device="cuda") for _ in range(3)]
    return model, batches


# atenlens: case_capture_then_replay_per_batch(*setup())
def case_capture_then_replay_per_batch(model, batches):
    static_x = torch.zeros(8, 64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
    outs = []
    for batch in batches:
        static_x.copy_(batch)
        g.replay()
        outs.append(static_y.clone())
    return outs
