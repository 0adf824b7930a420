"""Build, cache and load the two C++ shims that give a CPU-only torch fake CUDA tensors.

This module must not import torch: the worker calls `load_shims()` before `import torch`, because
libtorch creates its CUDA hooks once, lazily, and only a library loaded before that moment is
picked (fake_cuda_hooks.cpp). Everything about the installed torch is read from its files.

- fake_cuda_guard.cpp registers a no-op CUDA device guard (`.to("cuda")`, `.cuda()`, `copy_`).
- fake_cuda_hooks.cpp makes libtorch's CUDA hooks report a device (backward on fake cuda) and
  create CUDA generators (`torch.Generator(device="cuda")`).

They are compiled on first use with the C++ compiler that is present, against the headers shipped
inside the torch wheel, and cached outside the project tree, one folder per torch version + C++ ABI
+ Python + platform (plus a hash of the sources, the compiler and the torch binary, so a rebuilt
torch or an edited shim never loads a stale library). Each library is compiled to a temporary file
in that folder and renamed into place, so two workers building at once never load a half-written
file.

Loading a library runs its constructors as the tracing user, so the cache is trusted only as far
as only that user could have written it: the cache folders are created 0700, and a folder on the
way (the cache root, `shims/`, the build folder) that is not a directory owned by this user, or is
writable by group or others, is not used (the shims are then built in a private temporary folder,
and a note says why and how to fix it). Each library's SHA-256 is recorded when it is built, in
`<name>.so.sha256` beside it (0600); a library that is not a regular file of this user's, not
writable by others, whose hash is missing or differs, is deleted and rebuilt, with a note.
Environment:
- ATENLENS_CACHE_DIR: where the cache lives (default $XDG_CACHE_HOME/atenlens or ~/.cache/atenlens)
- ATENLENS_CXX: the compiler to use (default $CXX, else c++, g++ or clang++ on PATH)
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Optional

_SOURCE_DIR = os.path.dirname(os.path.abspath(__file__))
COMPILE_TIMEOUT_SECONDS = 180.0
# C++17 is what torch's headers need; -w because torch's headers warn under some compilers.
CXX_FLAGS = ("-O1", "-std=c++17", "-shared", "-fPIC", "-w")
TEMPORARY_PREFIX = "atenlens-shims-"  # a private build folder used when the cache cannot be trusted


@dataclass(frozen=True)
class Shim:
    name: str  # library base name (also the .cpp name)
    libraries: tuple[str, ...]  # torch libraries it links against
    check_symbol: str  # extern "C" int f(): 1 when the shim took effect


GUARD = Shim("fake_cuda_guard", ("c10",), "atenlens_cuda_guard_registered")
HOOKS = Shim("fake_cuda_hooks", ("c10", "torch_cpu"), "atenlens_cuda_hooks_active")
SHIMS = (GUARD, HOOKS)


@dataclass(frozen=True)
class TorchInstall:
    root: str  # the torch package folder
    version: str  # "2.13.0+cpu"
    cxx11_abi: bool  # built with _GLIBCXX_USE_CXX11_ABI=1
    cuda_build: bool  # a CUDA build: fake cuda is native, no shims needed

    @property
    def include_dir(self) -> str:
        return os.path.join(self.root, "include")

    @property
    def lib_dir(self) -> str:
        return os.path.join(self.root, "lib")


@dataclass(frozen=True)
class ShimStatus:
    """What happened when this process tried to make simulated CUDA available."""

    available: bool  # fake cuda tensors will work in this process
    native: bool = False  # a CUDA build of torch: nothing was loaded
    reason: str = ""  # why not, when not available (one line for the user)
    cache_dir: Optional[str] = None
    built: bool = False  # compiled now (cold) rather than found in the cache
    build_seconds: float = 0.0
    load_seconds: float = 0.0
    notes: tuple[str, ...] = ()  # what was refused in the cache and rebuilt (for the report's notes)


class ShimError(Exception):
    """Simulated CUDA cannot be set up here; the message says why, for the report's notes."""


def find_torch() -> TorchInstall:
    """Locate the installed torch without importing it."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ShimError("torch is not installed")
    root = os.path.abspath(list(spec.submodule_search_locations)[0])
    version = _read_version(os.path.join(root, "version.py"))
    lib_dir = os.path.join(root, "lib")
    c10 = _shared_library(lib_dir, "c10")
    if c10 is None:
        raise ShimError(f"no libc10 in {lib_dir}")
    with open(c10, "rb") as f:
        # The C++11 ABI mangles std::string as std::__cxx11::basic_string; a pre-C++11-ABI
        # libc10 contains no such symbol.
        cxx11_abi = b"__cxx11" in f.read()
    cuda_build = _shared_library(lib_dir, "torch_cuda") is not None or _shared_library(lib_dir, "c10_cuda") is not None
    return TorchInstall(root=root, version=version, cxx11_abi=cxx11_abi, cuda_build=cuda_build)


def _read_version(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            match = re.search(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", f.read(), re.M)
    except OSError:
        match = None
    if match:
        return match.group(1)
    from importlib.metadata import version

    return version("torch")


def _shared_library(lib_dir: str, name: str) -> Optional[str]:
    for candidate in (f"lib{name}.so", f"lib{name}.dylib"):
        path = os.path.join(lib_dir, candidate)
        if os.path.exists(path):
            return path
    return None


def cache_root() -> str:
    explicit = os.environ.get("ATENLENS_CACHE_DIR")
    if explicit:
        return os.path.abspath(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "atenlens")


def find_compiler() -> str:
    """The compiler command, or ShimError saying which one is missing."""
    wanted = os.environ.get("ATENLENS_CXX") or os.environ.get("CXX")
    if wanted:
        resolved = shutil.which(wanted)
        if resolved is None:
            raise ShimError(f"the C++ compiler {wanted!r} (ATENLENS_CXX/CXX) was not found")
        return resolved
    for name in ("c++", "g++", "clang++"):
        resolved = shutil.which(name)
        if resolved is not None:
            return resolved
    raise ShimError("no C++ compiler (c++, g++ or clang++) on PATH")


def shim_cache_dir(torch_install: TorchInstall, compiler: str) -> str:
    """One folder per torch version + ABI + Python + platform; the hash covers what else could
    make a cached library wrong for this process."""
    digest = hashlib.sha256()
    for shim in SHIMS:
        with open(os.path.join(_SOURCE_DIR, shim.name + ".cpp"), "rb") as f:
            digest.update(f.read())
    c10 = _shared_library(torch_install.lib_dir, "c10")
    stat = os.stat(c10) if c10 else None
    digest.update(repr((compiler, CXX_FLAGS, torch_install.root, stat and (stat.st_size, stat.st_mtime_ns))).encode())
    abi = "cxx11abi" if torch_install.cxx11_abi else "precxx11abi"
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    name = f"torch-{torch_install.version}-{abi}-{python}-{sys.platform}-{platform.machine()}-{digest.hexdigest()[:12]}"
    return os.path.join(cache_root(), "shims", re.sub(r"[^A-Za-z0-9._+-]", "_", name))


def _compile(shim: Shim, torch_install: TorchInstall, compiler: str, out_dir: str) -> None:
    target = os.path.join(out_dir, shim.name + ".so")
    fd, partial = tempfile.mkstemp(prefix=shim.name + ".", suffix=".so.partial", dir=out_dir)
    os.close(fd)
    command = [
        compiler,
        *CXX_FLAGS,
        f"-D_GLIBCXX_USE_CXX11_ABI={int(torch_install.cxx11_abi)}",
        "-I",
        torch_install.include_dir,
        os.path.join(_SOURCE_DIR, shim.name + ".cpp"),
        "-L",
        torch_install.lib_dir,
        *(f"-l{lib}" for lib in shim.libraries),
        f"-Wl,-rpath,{torch_install.lib_dir}",
        "-o",
        partial,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_SECONDS)
        if done.returncode != 0:
            first_error = next(
                (line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip()[:300]
            )
            raise ShimError(f"compiling {shim.name}.cpp failed: {first_error.strip()}")
        os.chmod(partial, 0o700)  # the linker creates its output under the umask (0775 under 002)
        _record_hash(target, _sha256(partial))
        os.replace(partial, target)  # atomic: a concurrent loader sees the old file or the new one
    except subprocess.TimeoutExpired:
        raise ShimError(f"compiling {shim.name}.cpp took longer than {COMPILE_TIMEOUT_SECONDS:.0f} s") from None
    except OSError as error:
        raise ShimError(f"compiling {shim.name}.cpp failed: {error}") from None
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _record_hash(library: str, hexdigest: str) -> None:
    """Writes `<library>.sha256` (0600, atomically)."""
    folder = os.path.dirname(library)
    fd, partial = tempfile.mkstemp(prefix=os.path.basename(library) + ".", suffix=".sha256.partial", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(hexdigest + "\n")
        os.replace(partial, library + ".sha256")
    finally:
        if os.path.exists(partial):
            os.unlink(partial)


def _not_private(path: str, directory: bool) -> Optional[str]:
    """Why `path` cannot be trusted as written only by this user (None when it can)."""
    info = os.lstat(path)
    if directory and not stat.S_ISDIR(info.st_mode):
        return "is not a directory" + (" (a symbolic link)" if stat.S_ISLNK(info.st_mode) else "")
    if not directory and not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    if info.st_uid != os.getuid():
        return f"is owned by uid {info.st_uid}, not by this user (uid {os.getuid()})"
    if info.st_mode & 0o022:
        return f"is writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def _private_cache_dir(out_dir: str) -> Optional[str]:
    """Creates the cache folders this user alone may write (0700) and checks them; why they cannot
    be used, or None."""
    root = cache_root()
    try:
        os.makedirs(os.path.dirname(root), exist_ok=True)
        for folder in (root, os.path.dirname(out_dir), out_dir):
            try:
                os.mkdir(folder, 0o700)
            except FileExistsError:
                pass
            why = _not_private(folder, directory=True)
            if why:
                return f"{folder} {why}"
    except OSError as error:
        return f"cannot create {error.filename or root}: {error.strerror or error}"
    return None


def _untrusted_library(path: str) -> Optional[str]:
    """Why the cached library at `path` must not be loaded, or None."""
    why = _not_private(path, directory=False)
    if why:
        return why
    record = path + ".sha256"
    if not os.path.lexists(record):
        return "has no recorded hash"
    why = _not_private(record, directory=False)
    if why:
        return f"has a hash record that {why}"
    with open(record, encoding="ascii", errors="replace") as f:
        recorded = f.read().strip()
    if recorded != _sha256(path):
        return "does not match the hash recorded when it was built"
    return None


def build_shims(torch_install: TorchInstall) -> tuple[str, bool, float, tuple[str, ...]]:
    """Compile what the cache lacks or cannot be trusted with. Returns (folder to load from,
    whether anything was built, seconds, notes on what was refused)."""
    compiler = find_compiler()
    out_dir = shim_cache_dir(torch_install, compiler)
    notes: list[str] = []
    refused = _private_cache_dir(out_dir)
    if refused:
        out_dir = tempfile.mkdtemp(prefix=TEMPORARY_PREFIX)  # 0700, this process's own
        notes.append(
            f"the shim cache is not used: {refused}; the CUDA shims were built in a private "
            f"temporary folder instead (make the cache folder yours and 0700, or set ATENLENS_CACHE_DIR)"
        )
    missing = []
    for shim in SHIMS:
        library = os.path.join(out_dir, shim.name + ".so")
        if not os.path.lexists(library):
            missing.append(shim)
            continue
        why = _untrusted_library(library)
        if why:
            notes.append(f"the cached {shim.name}.so {why}: not loaded, rebuilt")
            try:
                os.unlink(library)
            except OSError as error:
                raise ShimError(f"cannot remove the untrusted {library}: {error.strerror}") from None
            missing.append(shim)
    if not missing:
        return out_dir, False, 0.0, tuple(notes)
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(missing)) as pool:
        for future in [pool.submit(_compile, s, torch_install, compiler, out_dir) for s in missing]:
            future.result()
    return out_dir, True, time.perf_counter() - started, tuple(notes)


_status: Optional[ShimStatus] = None  # what this process did; the process cannot undo a load


def loaded_status() -> Optional[ShimStatus]:
    """The result of `load_shims()` in this process, or None if it never ran."""
    return _status


def load_shims() -> ShimStatus:
    """Make fake cuda tensors work in this process. Call before `import torch`; idempotent."""
    global _status
    if _status is None:
        _status = _load()
    return _status


def _load() -> ShimStatus:
    try:
        torch_install = find_torch()
        if torch_install.cuda_build:
            return ShimStatus(available=True, native=True)
        if "torch" in sys.modules:
            raise ShimError("torch was imported before the CUDA shims could be loaded")
        cache_dir, built, build_seconds, notes = build_shims(torch_install)
        started = time.perf_counter()
        for shim in SHIMS:
            library = ctypes.CDLL(os.path.join(cache_dir, shim.name + ".so"), mode=ctypes.RTLD_GLOBAL)
            if not getattr(library, shim.check_symbol)():
                raise ShimError(f"{shim.name} loaded but did not take effect")
        if os.path.basename(cache_dir).startswith(TEMPORARY_PREFIX):
            shutil.rmtree(cache_dir, ignore_errors=True)  # the temporary folder: loaded, not needed
        return ShimStatus(
            available=True,
            cache_dir=cache_dir,
            built=built,
            build_seconds=build_seconds,
            load_seconds=time.perf_counter() - started,
            notes=notes,
        )
    except ShimError as error:
        return ShimStatus(available=False, reason=str(error))
    except OSError as error:  # dlopen failures: missing symbols, wrong architecture
        return ShimStatus(available=False, reason=f"loading the CUDA shims failed: {error}")
