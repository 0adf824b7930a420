"""CUDA graph capture: what a real capture rejects (AL510) or silently gets wrong (AL511, AL512, AL514-AL517)."""
import torch
import torch.nn as nn


def make_model():
    return nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32)).cuda()


def warm_up(model, static_x):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream().wait_stream(side)


def case_item_inside_the_capture():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
        scale = static_y.abs().max().item()  # expect: AL510:error
    g.replay()
    return static_y * scale


def case_syncs_in_a_captured_loop():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        h = static_x
        for _ in range(2):
            h = model(h)
            if h.isnan().any():  # expect: AL510:error
                h = torch.zeros_like(h)
            w = torch.ones(32) * 2  # expect: AL511:warning
    g.replay()
    return h


def case_capture_without_warm_up():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    host = torch.randn(8, 32)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # expect: AL512:warning
        static_x.copy_(host)  # expect: AL511:warning
        static_y = model(static_x)
    for _ in range(3):
        g.replay()
    return static_y


def case_capture_on_the_default_stream():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    g = torch.cuda.CUDAGraph()
    g.capture_begin()  # expect: AL510:error
    static_y = model(static_x)
    g.capture_end()
    g.replay()
    return static_y


def case_warm_up_and_captures_in_a_loop():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    outs = []
    for _ in range(2):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):  # expect: AL512:warning
            static_y = model(static_x)
        g.replay()
        outs.append(static_y.clone())
    return outs


def case_a_generator_the_graph_does_not_know():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        noise = torch.randn(8, 32, device="cuda", generator=gen)  # expect: AL514:error
        static_y = model(static_x + noise)
    g.replay()
    return static_y


def case_per_layer_noise_from_an_unregistered_generator():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    gen = torch.Generator(device="cuda")
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        h = static_x
        for layer in model:
            h = layer(h)
            h = h + torch.rand(h.shape, device="cuda", generator=gen)  # expect: AL514:error
    g.replay()
    return h


def case_output_read_before_the_first_replay():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
    first = static_y.sum()  # expect: AL515:warning
    g.replay()
    return first, static_y


def case_outputs_kept_from_each_capture_before_its_replay():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    kept = []
    for _ in range(2):
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            static_y = model(static_x)
        kept.append(static_y.clone())  # expect: AL515:warning
        g.replay()
    return kept


def case_a_side_stream_that_does_not_branch_from_the_capture():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    side = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
        with torch.cuda.stream(side):
            static_z = static_x * 2  # expect: AL510:error
        torch.cuda.current_stream().wait_stream(side)
    g.replay()
    return static_y, static_z


def case_a_side_stream_not_rejoined_before_the_capture_ends():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    side = torch.cuda.Stream()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):  # expect: AL510:error
        side.wait_stream(torch.cuda.current_stream())
        static_y = model(static_x)
        with torch.cuda.stream(side):
            static_z = static_x * 2
    g.replay()
    return static_y, static_z


def whole_step_capture(opt):
    model = make_model()
    optimizer = opt(model.parameters())
    static_x = torch.zeros(8, 32, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            model(static_x).sum().backward()
            optimizer.step()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    with torch.cuda.graph(g):
        static_loss = model(static_x).sum()
        static_loss.backward()
        optimizer.step()  # expect: AL510:error
    g.replay()
    return static_loss


def case_a_whole_step_capture_with_an_optimizer_that_is_not_capturable():
    return whole_step_capture(lambda params: torch.optim.AdamW(params, lr=1e-3))


def captured(model, static_x):
    """A warmed-up capture of `model(static_x)`: the graph and its static output."""
    warm_up(model, static_x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
    return g, static_y


def case_the_static_input_name_bound_to_a_new_tensor():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
    static_x = torch.randn(8, 32, device="cuda")
    g.replay()  # expect: AL516:warning
    return static_y.clone()


def case_each_batch_bound_to_the_static_input_name():
    model = make_model()
    batches = [torch.randn(8, 32, device="cuda") for _ in range(3)]
    static_x = torch.zeros(8, 32, device="cuda")
    warm_up(model, static_x)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = model(static_x)
    outs = []
    for batch in batches:
        static_x = batch * 1.0
        g.replay()  # expect: AL516:warning
        outs.append(static_y.clone())
    return outs


class GraphedModel:
    """A capture kept on an object, replayed by its __call__."""

    def __init__(self, model):
        self.static_x = torch.zeros(8, 32, device="cuda")
        warm_up(model, self.static_x)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_y = model(self.static_x)

    def __call__(self, x):
        self.static_x = x
        self.graph.replay()  # expect: AL516:warning
        return self.static_y.clone()


def case_a_wrapper_that_rebinds_its_static_input():
    runner = GraphedModel(make_model())
    return [runner(torch.randn(8, 32, device="cuda")) for _ in range(2)]


def case_a_static_output_kept_across_a_replay():
    model = make_model()
    static_x = torch.zeros(8, 32, device="cuda")
    g, static_y = captured(model, static_x)
    static_x.fill_(1.0)
    g.replay()
    previous = static_y
    static_x.fill_(2.0)
    g.replay()  # expect: AL517:warning
    return static_y - previous


def case_static_outputs_appended_in_a_replay_loop():
    model = make_model()
    batches = [torch.randn(8, 32, device="cuda") for _ in range(3)]
    static_x = torch.zeros(8, 32, device="cuda")
    g, static_y = captured(model, static_x)
    outs = []
    for batch in batches:
        static_x.copy_(batch)
        g.replay()  # expect: AL517:warning
        outs.append(static_y)
    return torch.stack(outs)
