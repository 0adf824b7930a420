"""Named dims with simulated ranks (tests/fixtures/shapes/named_ranks.py, sequence parallel on 4 ranks):
the symbolic pass runs on the fake process group too, so each rank's local shards, the collectives'
outputs and the module tree are in the names; the global shapes of DTensors stay numbers."""

from __future__ import annotations

import subprocess
import sys

from engine_helpers import REPO

FIXTURE = "tests/fixtures/shapes/named_ranks.py"


def squeezed(lines: list[str]) -> list[str]:
    """The listing's lines with each run of spaces as one (the columns' widths are not the point here)."""
    return [" ".join(line.split()) for line in lines]


def test_cli_shows_the_local_shards_of_four_ranks_in_the_names() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "atenlens", "trace", f"{FIXTURE}::step"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[2] == "dims B=8, T=32: shapes in these names; memory and time are estimated at B=8, T=32"
    # the module tree: DTensor outputs by their global shapes, the all-gathered sequence is 4*T
    start = lines.index("38 |     model(x).sum().backward()")
    assert [line[:62].rstrip() for line in lines[start + 2 : start + 6]] == [
        "   |     module    Block              f32[B, T, 64]",
        "   |                 norm  LayerNorm  f32[B, 4*T, 64]",
        "   |                 up    Linear     f32[B, 4*T, 256]",
        "   |                 down  Linear     f32[B, 4*T, 64]",
    ]
    norm = lines.index("21 |         h = self.norm(x)")
    # each rank's local shard in the names, the global shape (4*T = 128) as its number
    assert squeezed(lines[norm + 2 : norm + 5]) == [
        "| forward aten.native_layer_norm.default f32[B, T, 64] Shard(1) of [8, 128, 64], f32[B, T, 1], f32[B, T, 1] "
        "4 µs 66 KiB",
        "| backward aten.native_layer_norm_backward.default f32[64], f32[64] 4 µs 1 KiB NativeLayerNormBackward0",
        "| information AL921 shape-guard: assumed B >= 4 (named dims B=8, T=32): the named shapes hold where this does",
    ]
    up = lines.index("22 |         h = torch.relu(self.up(h))")
    assert squeezed(lines[up + 2 : up + 7]) == [
        "| forward all_gather_into_tensor 4x 256 KiB · ~9.27 µs NVLink 9.27 µs 256 KiB",
        "| _c10d_functional.wait_tensor.default f32[4*B, T, 64] 256 KiB",
        "| aten.cat.default f32[B, 4*T, 64] 4 µs 256 KiB",
        "| aten.addmm.default f32[4*B*T, 64] 8.39 MFLOP 4 µs 256 KiB",
        "| aten.relu.default f32[B, 4*T, 64] local Shard(2) of [8, 128, 256] 4 µs 256 KiB",
    ]
    assert "   |     named     FLOPs 98304*B*T = 25.2 MFLOP" in lines[up:]
    # torch's own chunking of the gathered tensor guards on the sizes: said at the line, as torch wrote it
    assert [line for line in lines[up:] if "AL921" in line][:2] == [
        "   |     information AL921 shape-guard: assumed ((5*B - 1)//B) == 4 (named dims B=8, T=32): the named shapes "
        "hold where this does",
        "   |     information AL921 shape-guard: assumed Mod(B, 4) == 0 (named dims B=8, T=32): the named shapes hold "
        "where this does",
    ]
    assert not any("AL920" in line for line in lines)
