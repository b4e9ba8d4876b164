"""A checkpoint folder as one zip, to download and upload again, opened as untrusted input.

Only the checkpoint's own file names are accepted (flat, or inside one top folder), sizes are
bounded before and while reading, and files are written under names we choose, so an
archive can never place a file outside the target folder. The weights are then parsed by
safetensors and the config by TransformerConfig.from_dict (both inside load_checkpoint):
nothing is ever unpickled.
"""

from __future__ import annotations

import io
import zipfile
from pathlib import Path, PurePosixPath

from model.runtime.checkpoint import CONFIG, CURVE, METRICS, VOCAB, WEIGHTS, load_checkpoint
from model.runtime.lab import LabModel
from model.runtime.types import ModelLoadError

REQUIRED = (WEIGHTS, CONFIG, VOCAB)
ALLOWED = (*REQUIRED, METRICS, CURVE)
MAX_ZIP_BYTES = 32 * 2**20  # the largest preset is ~3 MB; anything far bigger is not ours
MAX_FILE_BYTES = {WEIGHTS: 32 * 2**20, CURVE: 2**20}  # JSON files: 1 MiB each
MAX_JSON_BYTES = 2**20


def pack(folder: str | Path) -> bytes:
    """The checkpoint files of ``folder`` as zip bytes (flat: no folder inside)."""
    folder = Path(folder)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name in ALLOWED:
            if (folder / name).is_file():
                zf.write(folder / name, arcname=name)
    return buffer.getvalue()


def _member_names(zf: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """Our file name -> its entry; anything unexpected is refused with the reason."""
    found: dict[str, zipfile.ZipInfo] = {}
    tops: set[str] = set()
    for info in zf.infolist():
        path = PurePosixPath(info.filename.replace("\\", "/"))
        if info.is_dir():
            continue
        if len(path.parts) > 2 or ".." in path.parts or path.is_absolute():
            raise ModelLoadError(f"the zip holds an unexpected path: {info.filename!r}")
        if len(path.parts) == 2:
            tops.add(path.parts[0])
        name = path.name
        if name not in ALLOWED:
            raise ModelLoadError(
                f"the zip holds {info.filename!r}; a checkpoint zip holds only {', '.join(ALLOWED)}"
            )
        if name in found:
            raise ModelLoadError(f"the zip holds {name} twice")
        found[name] = info
    if len(tops) > 1:
        raise ModelLoadError("the zip holds more than one folder; zip one checkpoint at a time")
    missing = [name for name in REQUIRED if name not in found]
    if missing:
        raise ModelLoadError(f"the zip has no {', '.join(missing)}; is it a checkpoint zip?")
    return found


def unpack(data: bytes, dest: str | Path) -> Path:
    """Check the zip and extract its checkpoint files into ``dest`` (created; must be empty)."""
    if len(data) > MAX_ZIP_BYTES:
        raise ModelLoadError(f"the zip is {len(data):,} bytes; the limit is {MAX_ZIP_BYTES:,}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as err:
        raise ModelLoadError(f"not a readable zip file: {err}") from err
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with zf:
        for name, info in _member_names(zf).items():
            limit = MAX_FILE_BYTES.get(name, MAX_JSON_BYTES)
            if info.file_size > limit:
                raise ModelLoadError(f"{name} is {info.file_size:,} bytes; the limit is {limit:,}")
            try:
                with zf.open(info) as src:
                    content = src.read(limit + 1)  # bounded even if the header lies
            except (zipfile.BadZipFile, OSError, EOFError, RuntimeError) as err:
                raise ModelLoadError(f"{name} in the zip is damaged: {err}") from err
            if len(content) > limit:
                raise ModelLoadError(f"{name} unpacks to more than {limit:,} bytes")
            (dest / name).write_bytes(content)  # our name, never the archive's path
    return dest


def load_zip(data: bytes, dest: str | Path, name: str = "") -> LabModel:
    """unpack() then load_checkpoint() on the CPU; every failure is a ModelLoadError."""
    folder = unpack(data, dest)
    return load_checkpoint(folder, "cpu", name or folder.name)
