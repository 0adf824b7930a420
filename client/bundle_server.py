"""Fills bundled/libs with what the extension's language server needs besides an interpreter:
the `atenlens` package (from server/) and the exact dependencies pinned in client/bundled-requirements.txt.

Pure-Python wheels are unpacked as they are. The lint parser's compiled wheels are unpacked for one
platform (the .vsix's target) and every supported CPython version into the same folder: their extension
modules carry the Python version in their file names (`_binding.cpython-312-x86_64-linux-gnu.so`), so they
sit side by side and each interpreter imports its own. Platforms cannot share a folder (macOS's arm64 and
x86_64 modules, and the abi3 ones, have the same names), hence one .vsix per platform. torch is never bundled.

Usage: python client/bundle_server.py [--target linux-x64]   (default: this machine; needs pip and an index)
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import platform
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "client" / "bundled-requirements.txt"
LIBS = ROOT / "bundled" / "libs"
STAMP = LIBS / ".bundled-requirements.sha256"
SERVER_PACKAGE = ROOT / "server" / "atenlens"

# Distributions that ship compiled extension modules (everything else pinned must be pure Python).
NATIVE = {"tree-sitter", "tree-sitter-python"}
PYTHON_VERSIONS = ("3.11", "3.12", "3.13", "3.14")
# pip picks the best wheel among the tags given for one platform.
PLATFORMS = {
    "linux-x64": (
        "manylinux_2_17_x86_64",
        "manylinux2014_x86_64",
        "manylinux_2_28_x86_64",
        "manylinux_2_5_x86_64",
        "manylinux1_x86_64",
    ),
    "linux-arm64": ("manylinux_2_17_aarch64", "manylinux2014_aarch64", "manylinux_2_28_aarch64"),
    "darwin-arm64": ("macosx_11_0_arm64", "macosx_12_0_arm64", "macosx_13_0_arm64"),
    "darwin-x64": (
        "macosx_10_9_x86_64",
        "macosx_10_13_x86_64",
        "macosx_10_15_x86_64",
        "macosx_11_0_x86_64",
        "macosx_12_0_x86_64",
        "macosx_13_0_x86_64",
    ),
    "win32-x64": ("win_amd64",),
}


def pinned_requirements() -> list[str]:
    lines = (line.split("#", 1)[0].strip() for line in REQUIREMENTS.read_text().splitlines())
    requirements = [line for line in lines if line]
    for requirement in requirements:
        name = requirement.split("==")[0].strip().lower().replace("_", "-")
        if "==" not in requirement:
            raise SystemExit(f"{REQUIREMENTS}: {requirement!r} is not pinned with ==")
        if name == "torch":
            raise SystemExit(f"{REQUIREMENTS}: torch is never bundled")
    return requirements


def requirement_name(requirement: str) -> str:
    return requirement.split("==")[0].strip().lower().replace("_", "-")


def download(
    requirements: list[str], dest: Path, platform_tags: tuple[str, ...] = (), python_version: str | None = None
) -> None:
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--dest",
        str(dest),
    ]
    if python_version:
        command += ["--python-version", python_version, "--implementation", "cp"]
    for tag in platform_tags:
        command += ["--platform", tag]
    result = subprocess.run(command + requirements, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(
            f"pip download failed for {requirements} ({python_version}, {platform_tags}):\n{result.stderr}"
        )


def unpack(wheel: Path, target: Path) -> None:
    """A wheel is a zip of its install layout (these wheels have no .data folders)."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.infolist():
            destination = target / member.filename
            if member.is_dir() or destination.exists():
                continue  # the same .py file from another platform's wheel
            destination.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(destination, "wb") as out:
                shutil.copyfileobj(source, out)


def current_target() -> str:
    system = {"Linux": "linux", "Darwin": "darwin", "Windows": "win32"}.get(platform.system(), platform.system())
    machine = {"x86_64": "x64", "AMD64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine(), platform.machine()
    )
    return f"{system}-{machine}"


def bundle_dependencies(target: str) -> None:
    requirements = pinned_requirements()
    pure = [r for r in requirements if requirement_name(r) not in NATIVE]
    native = [r for r in requirements if requirement_name(r) in NATIVE]
    with tempfile.TemporaryDirectory() as tmp:
        wheels = Path(tmp)
        jobs = [(pure, (), None)] + [(native, PLATFORMS[target], version) for version in PYTHON_VERSIONS]
        with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda job: download(job[0], wheels, job[1], job[2]), jobs))
        for wheel in sorted(wheels.glob("*.whl")):
            if requirement_name(wheel.name.split("-")[0]) not in NATIVE and not wheel.name.endswith("-none-any.whl"):
                raise SystemExit(f"{wheel.name} is not pure Python; list it in NATIVE")
            unpack(wheel, LIBS)


def requirements_digest(target: str) -> str:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes())
    digest.update(Path(__file__).read_bytes())
    digest.update(target.encode())
    return digest.hexdigest()


def copy_server_package() -> None:
    target = LIBS / "atenlens"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(SERVER_PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--target",
        choices=sorted(PLATFORMS),
        default=current_target(),
        help="VS Code platform of the .vsix (default: this machine's)",
    )
    target = parser.parse_args().target
    # Downloads happen again only when the pins, this script or the target change.
    digest = requirements_digest(target)
    if not (STAMP.exists() and STAMP.read_text() == digest):
        shutil.rmtree(LIBS, ignore_errors=True)
        LIBS.mkdir(parents=True)
        bundle_dependencies(target)
        STAMP.write_text(digest)
    copy_server_package()
    if (LIBS / "torch").exists():
        raise SystemExit("torch found in bundled/libs: it must never be bundled")
    print(f"bundled atenlens and {len(pinned_requirements())} dependencies for {target} into {LIBS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
