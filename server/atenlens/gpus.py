"""The GPUs a trace can be priced on: memory, peak dense FLOPS per dtype, HBM and interconnect bandwidth.

Pure data, no torch: the engine (memory forecast, roofline times), the CLI (`--gpu`) and the language
server (the `trace.gpu` setting) all read this one table. Every figure is the vendor's datasheet
figure; docs/cost.md names the datasheet of each row. Conventions:

- FLOPS are *dense* (no 2:4 structured sparsity): NVIDIA's datasheets print tensor-core figures with
  sparsity and mark them with an asterisk; the dense figure is half of it.
- `fp32` is the plain (CUDA core) FP32 rate; `tf32` the tensor-core rate used by fp32 matmuls when
  `torch.backends.cuda.matmul.allow_tf32` / `set_float32_matmul_precision("high")` allows it.
- Memory is binary: an "80 GB" H100 has 80 GiB of HBM (nvidia-smi shows 81,559 MiB of it usable).
- Bandwidths are decimal bytes per second (3.35 TB/s = 3.35e12 B/s), per direction where a link is
  bidirectional (NVLink's 900 GB/s is the total of both directions: 450 GB/s each way).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

GiB = 2**30
TERA = 10**12
GIGA = 10**9


@dataclass(frozen=True)
class GPU:
    key: str  # the table's name: "h100-sxm"
    name: str  # for people: "H100 SXM 80GB"
    memory_bytes: int
    fp32_flops: float  # FLOP/s, dense
    tf32_flops: float
    fp16_flops: float
    bf16_flops: float
    fp8_flops: Optional[float]  # None where the GPU has no fp8 tensor cores
    hbm_bandwidth: float  # bytes/s
    host_link_bandwidth: float  # bytes/s one way (PCIe)
    gpu_link_bandwidth: Optional[float]  # bytes/s one way to a peer GPU (NVLink / Infinity Fabric); None: PCIe only
    network_bandwidth: Optional[
        float
    ]  # bytes/s per GPU between nodes in the vendor's reference system; None: not specified
    source: str  # the datasheet the figures come from (docs/cost.md)

    @property
    def short_name(self) -> str:
        """ "H100 SXM", "RTX 4090": the name without its memory size and brand prefix."""
        return " ".join(t for t in self.name.split() if not t.endswith("GB") and t not in ("GeForce", "Instinct"))

    def peak_flops(self, dtype: str, matmul_fp32_as_tf32: bool = False) -> float:
        """Peak dense FLOP/s for an op computing in `dtype` (torch's name: "bfloat16")."""
        if dtype in ("bfloat16",):
            return self.bf16_flops
        if dtype in ("float16",):
            return self.fp16_flops
        if dtype.startswith("float8"):
            return self.fp8_flops or self.fp16_flops
        if dtype == "float32" and matmul_fp32_as_tf32:
            return self.tf32_flops
        return self.fp32_flops


_PCIE4 = 32 * GIGA  # PCIe Gen4 x16: 64 GB/s both directions
_PCIE5 = 64 * GIGA  # PCIe Gen5 x16: 128 GB/s both directions

GPUS: tuple[GPU, ...] = (
    GPU(
        "h100-sxm",
        "H100 SXM 80GB",
        80 * GiB,
        67 * TERA,
        494.5 * TERA,
        989.5 * TERA,
        989.5 * TERA,
        1979 * TERA,
        3.35e12,
        _PCIE5,
        450 * GIGA,
        50 * GIGA,
        "NVIDIA H100 Tensor Core GPU datasheet; DGX H100 (ConnectX-7 400 Gb/s per GPU)",
    ),
    GPU(
        "h100-pcie",
        "H100 PCIe 80GB",
        80 * GiB,
        51 * TERA,
        378 * TERA,
        756.5 * TERA,
        756.5 * TERA,
        1513 * TERA,
        2.0e12,
        _PCIE5,
        300 * GIGA,
        None,
        "NVIDIA H100 Tensor Core GPU datasheet (PCIe; NVLink bridge 600 GB/s)",
    ),
    GPU(
        "h200",
        "H200 SXM 141GB",
        141 * GiB,
        67 * TERA,
        494.5 * TERA,
        989.5 * TERA,
        989.5 * TERA,
        1979 * TERA,
        4.8e12,
        _PCIE5,
        450 * GIGA,
        50 * GIGA,
        "NVIDIA H200 Tensor Core GPU datasheet; DGX H200 (ConnectX-7 400 Gb/s per GPU)",
    ),
    GPU(
        "a100-80gb",
        "A100 SXM 80GB",
        80 * GiB,
        19.5 * TERA,
        156 * TERA,
        312 * TERA,
        312 * TERA,
        None,
        2.039e12,
        _PCIE4,
        300 * GIGA,
        25 * GIGA,
        "NVIDIA A100 Tensor Core GPU datasheet; DGX A100 (ConnectX-6 200 Gb/s per GPU)",
    ),
    GPU(
        "a100-40gb",
        "A100 SXM 40GB",
        40 * GiB,
        19.5 * TERA,
        156 * TERA,
        312 * TERA,
        312 * TERA,
        None,
        1.555e12,
        _PCIE4,
        300 * GIGA,
        25 * GIGA,
        "NVIDIA A100 Tensor Core GPU datasheet; DGX A100 (ConnectX-6 200 Gb/s per GPU)",
    ),
    GPU(
        "l4",
        "L4 24GB",
        24 * GiB,
        30.3 * TERA,
        60 * TERA,
        121 * TERA,
        121 * TERA,
        242.5 * TERA,
        300 * GIGA,
        _PCIE4,
        None,
        None,
        "NVIDIA L4 Tensor Core GPU datasheet",
    ),
    GPU(
        "l40s",
        "L40S 48GB",
        48 * GiB,
        91.6 * TERA,
        183 * TERA,
        366 * TERA,
        366 * TERA,
        733 * TERA,
        864 * GIGA,
        _PCIE4,
        None,
        None,
        "NVIDIA L40S GPU datasheet",
    ),
    GPU(
        "rtx-4090",
        "GeForce RTX 4090 24GB",
        24 * GiB,
        82.6 * TERA,
        82.6 * TERA,
        165.2 * TERA,
        165.2 * TERA,
        330.3 * TERA,
        1008 * GIGA,
        _PCIE4,
        None,
        None,
        "NVIDIA Ada GPU architecture whitepaper, appendix (FP32 accumulate)",
    ),
    GPU(
        "mi300x",
        "Instinct MI300X 192GB",
        192 * GiB,
        163.4 * TERA,
        653.7 * TERA,
        1307.4 * TERA,
        1307.4 * TERA,
        2614.9 * TERA,
        5.3e12,
        _PCIE5,
        64 * GIGA,
        50 * GIGA,
        "AMD Instinct MI300X data sheet (Infinity Fabric 128 GB/s per peer link, 896 GB/s aggregate)",
    ),
)

DEFAULT_GPU = "h100-sxm"  # the device the simulation claims to be (trace/gpu/cuda_api.py)

# Other spellings people use; lookups also ignore case, spaces and underscores.
ALIASES = {
    "h100": "h100-sxm",
    "h100-80gb": "h100-sxm",
    "h100-sxm5": "h100-sxm",
    "h100sxm": "h100-sxm",
    "h100pcie": "h100-pcie",
    "h200-sxm": "h200",
    "h200-141gb": "h200",
    "a100": "a100-80gb",
    "a100-sxm": "a100-80gb",
    "a100-80g": "a100-80gb",
    "a100-40g": "a100-40gb",
    "4090": "rtx-4090",
    "rtx4090": "rtx-4090",
    "geforce-rtx-4090": "rtx-4090",
    "mi300": "mi300x",
    "instinct-mi300x": "mi300x",
}

_BY_KEY = {gpu.key: gpu for gpu in GPUS}


def _normal(name: str) -> str:
    return "-".join(name.strip().lower().replace("_", " ").replace("-", " ").split())


def find_gpu(name: Optional[str]) -> GPU:
    """The GPU called `name` (case-insensitive; the table's keys or ALIASES); None gives the default.
    Raises KeyError with the accepted names when there is no such GPU."""
    if name is None or not name.strip():
        return _BY_KEY[DEFAULT_GPU]
    key = _normal(name)
    key = ALIASES.get(key, key)
    found = _BY_KEY.get(key)
    if found is None:
        raise KeyError(f"unknown GPU {name!r}; known: {', '.join(gpu_names())}")
    return found


def gpu_names() -> tuple[str, ...]:
    return tuple(gpu.key for gpu in GPUS)
