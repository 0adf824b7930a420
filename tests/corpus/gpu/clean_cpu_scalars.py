"""Values that live on the CPU, and metadata: no GPU sync, nothing may be reported."""
import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def case_cpu_values():
    lr = torch.tensor(3e-4)
    scale = lr.item() * 10
    weights = torch.randn(4)
    as_list = weights.tolist()
    if weights.sum() > 0:
        scale = float(weights.max()) + int(torch.tensor(2))
    print(weights, f"{weights.mean():.3f}")
    import numpy as np

    return scale, as_list, weights.numpy(), np.asarray(weights).shape


def case_metadata_of_gpu_tensors():
    x = torch.randn(8, 16, device=DEVICE)
    n = x.shape[0] * x.size(1) + x.numel() + x.dim() + len(x)
    assert x.is_cuda == (DEVICE == "cuda")
    return torch.zeros(n, device=x.device, dtype=x.dtype)


def case_scheduler_and_step_counter():
    model = torch.nn.Linear(8, 8).to(DEVICE)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    for _ in range(2):
        model(torch.randn(4, 8, device=DEVICE)).sum().backward()
        optimizer.step()
        scheduler.step()
    return scheduler.get_last_lr()
