"""The second live server of the browser tests (the ``class_server`` fixture of
tests/e2e/conftest.py), for the modules that need a class store or a models root of their
own: test_browser_classroom, test_security_teacher_history and test_browser_your_model.
Each marks itself ``xdist_group(GROUP)``, so one worker starts it once for all three."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

GROUP = "class-server"
DECODER_LAYOUTS = {"llama": "LLaMA", "gpt2": "GPT-2"}  # its models root: tiny-<layout> each


@dataclass
class ClassServer:
    url: str
    room: object  # classroom.Classroom on the server's own store
    log_path: Path


def prepare(data: Path, root: Path) -> dict[str, str]:
    """A models root in ``root`` holding a tiny folder of each layout; the server's
    environment: its class store in ``data`` (SQLite, not a PostgreSQL from outside) and
    that root."""
    from tests.hf_folders import build_decoder_folder

    for layout in DECODER_LAYOUTS:
        build_decoder_folder(layout, root / f"tiny-{layout}")
    return {
        "ATTENTION_LAB_DATA": str(data),
        "ATTENTION_LAB_DATABASE_URL": "",
        "ATTENTION_LAB_MODELS": str(root),
    }
