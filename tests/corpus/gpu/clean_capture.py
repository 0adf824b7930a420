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


def warm_up(model, static_x):
    """The warm-up the documented pattern above spells out: a few runs on a side stream, joined back."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)


# atenlens: case_registered_generator_for_dropout_noise(*setup())
def case_registered_generator_for_dropout_noise(model, batches):
    static_x = torch.zeros(8, 64, device="cuda")
    warm_up(model, static_x)
    gen = torch.Generator(device="cuda")
    g = torch.cuda.CUDAGraph()
    g.register_generator_state(gen)
    with torch.cuda.graph(g):
        static_y = model(static_x) * torch.rand(8, 64, device="cuda", generator=gen)
        static_z = torch.nn.functional.dropout(static_y, 0.1)
    outs = []
    for batch in batches:
        static_x.copy_(batch)
        g.replay()
        outs.append(static_z.clone())
    return outs


# atenlens: case_graphed_callable(*setup())
def case_graphed_callable(model, batches):
    sample = torch.zeros(8, 64, device="cuda", requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(model, (sample,))
    outs = []
    for batch in batches:
        outs.append(graphed(batch.requires_grad_()).sum())
    return outs


# atenlens: case_branch_and_rejoin_inside_the_capture(*setup())
def case_branch_and_rejoin_inside_the_capture(model, batches):
    static_x = torch.zeros(8, 64, device="cuda")
    warm_up(model, static_x)
    branch = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        branch.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(branch):
            static_z = static_x * 2
        done = torch.cuda.Event()
        done.record(branch)
        static_y = model(static_x)
        torch.cuda.current_stream().wait_event(done)
    outs = []
    for batch in batches:
        static_x.copy_(batch)
        g.replay()
        outs.append(static_y + static_z)
    return outs


def whole_step_captured(model, opt, batches):
    """torch's whole-network capture: warm-up steps on a side stream, one captured step, replays."""
    static_x = torch.zeros(8, 64, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            model(static_x).sum().backward()
            opt.step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = model(static_x).sum()
        static_loss.backward()
        opt.step()
    losses = []
    for batch in batches:
        static_x.copy_(batch)
        g.replay()
        losses.append(static_loss.clone())
    return losses


# atenlens: case_a_whole_step_capture_with_a_capturable_optimizer(*setup())
def case_a_whole_step_capture_with_a_capturable_optimizer(model, batches):
    return whole_step_captured(model, torch.optim.AdamW(model.parameters(), lr=1e-3, capturable=True), batches)


# atenlens: case_a_whole_step_capture_with_sgd(*setup())
def case_a_whole_step_capture_with_sgd(model, batches):
    return whole_step_captured(model, torch.optim.SGD(model.parameters(), lr=0.1), batches)


# atenlens: case_each_output_read_before_the_next_replay(*setup())
def case_each_output_read_before_the_next_replay(model, batches):
    static_x = torch.zeros(8, 64, device="cuda")
    warm_up(model, static_x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
    outputs = {"y": static_y}  # made before the first replay: the static output itself, by design
    losses = []
    for batch in batches:
        static_x.copy_(batch)
        g.replay()
        out = outputs["y"]
        losses.append(out.sum())
    return losses


class Graphed:
    """A capture kept on an object whose __call__ copies into its static input."""

    def __init__(self, model):
        self.static_x = torch.zeros(8, 64, device="cuda")
        warm_up(model, self.static_x)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_y = model(self.static_x)

    def __call__(self, x):
        self.static_x.copy_(x)
        self.graph.replay()
        return self.static_y.clone()


# atenlens: case_a_wrapper_that_copies_into_its_static_input(*setup())
def case_a_wrapper_that_copies_into_its_static_input(model, batches):
    runner = Graphed(model)
    return [runner(batch) for batch in batches]


# atenlens: case_two_graphs_sharing_a_memory_pool(*setup())
def case_two_graphs_sharing_a_memory_pool(model, batches):
    """torch's documented pool sharing: the second capture uses the first's pool, replays in capture order."""
    static_x = torch.zeros(8, 64, device="cuda")
    warm_up(model, static_x)
    first, second = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(first):
        static_h = model(static_x)
    with torch.cuda.graph(second, pool=first.pool()):
        static_y = model(static_h)
    outs = []
    for batch in batches:
        static_x.copy_(batch)
        first.replay()
        second.replay()
        outs.append(static_y.clone())
    return outs
