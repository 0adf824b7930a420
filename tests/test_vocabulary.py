"""The report's words are torch's: the dtype abbreviations are torch's logging-tensor table, and the
CLI, the editor and the engine write dtypes and FLOPs the same way."""

import torch
from torch.utils._dtype_abbrs import dtype_abbrs

from atenlens.lsp.labels import summary_label
from atenlens.lsp.labels import tensor_label as editor_tensor_label
from atenlens.render import tensor_label as cli_tensor_label
from atenlens.report import Summary, TensorMeta
from atenlens.trace.gpu.tracker import tensor_label as engine_tensor_label
from atenlens.vocabulary import DTYPE_ABBRS, format_flops


def test_the_dtype_table_is_torchs():
    assert DTYPE_ABBRS == {str(dtype).removeprefix("torch."): abbr for dtype, abbr in dtype_abbrs.items()}


def test_cli_editor_and_engine_label_a_float8_tensor_alike():
    meta = TensorMeta(dtype="float8_e4m3fn", shape=(8, 32), device="cuda:0")
    fake = torch.empty((8, 32), dtype=torch.float8_e4m3fn, device="meta")
    assert cli_tensor_label(meta) == editor_tensor_label(meta) == engine_tensor_label(fake) == "f8e4m3fn[8, 32]"


def test_flops_read_the_same_everywhere():
    assert [format_flops(n) for n in (0, 512, 1000, 8192, 22_528, 999_999, 3 * 10**12, 10**18)] == [
        "0 FLOP",
        "512 FLOP",
        "1 kFLOP",
        "8.19 kFLOP",
        "22.5 kFLOP",
        "1 MFLOP",
        "3 TFLOP",
        "1000 PFLOP",
    ]
    summary = Summary(ops={"forward": 9, "backward": 24, "optimizer": 1}, syncs=0, flops=22_528)
    assert summary_label(summary) == "fwd 9 · bwd 24 · opt 1 · 0 syncs · 22.5 kFLOP"
