"""The extension's Marketplace files, checked without building it: the icon is a PNG the manifest names and
the package keeps, and every link and image of client/README.md and client/CHANGELOG.md points at a file of
this repository (vsce resolves them against the repository's client/ folder and refuses SVG images)."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = json.loads((ROOT / "package.json").read_text())
PAGES = [ROOT / "client" / "README.md", ROOT / "client" / "CHANGELOG.md"]
LINK = re.compile(r"(!?)\[[^\]]*\]\(([^)\s]+)\)")


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_icon_is_a_packaged_png_of_128_pixels() -> None:
    icon = ROOT / MANIFEST["icon"]
    assert png_size(icon) == (128, 128)
    kept = (ROOT / ".vscodeignore").read_text().splitlines()
    assert f"!{MANIFEST['icon']}" in kept
    assert "!client/README.md" in kept and "!client/CHANGELOG.md" in kept


def test_marketplace_pages_link_only_to_files_that_exist() -> None:
    for page in PAGES:
        links = LINK.findall(page.read_text())
        assert links, page
        for is_image, target in links:
            if target.startswith(("http://", "https://", "#")):
                continue
            file = (page.parent / target.split("#", 1)[0]).resolve()
            assert file.is_file(), f"{page.name}: {target} does not exist"
            if is_image:
                assert file.suffix == ".png", f"{page.name}: {target}: vsce refuses SVG images; use PNG"
                png_size(file)


def test_node_version_that_packaging_needs_is_declared() -> None:
    assert MANIFEST["engines"]["node"] == ">=22"  # @vscode/vsce 4 declares node >= 22
    vsce = json.loads((ROOT / "package-lock.json").read_text())["packages"]["node_modules/@vscode/vsce"]
    assert vsce["engines"]["node"] == ">= 22"
