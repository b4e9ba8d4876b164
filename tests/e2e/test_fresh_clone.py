"""A newcomer's first hour, from a fresh clone with the README alone.

The clone is of this checkout's last commit. `make run` creates `.venv`, installs the pins and
the project itself (`pip install -e .`), and serves the app; then every Python block of the
README runs as a script saved outside the repository, with `.venv/bin/python`, the way a
notebook or a script of the reader's would: without the editable install they failed with
"No module named 'model'". GPU-only blocks skip without CUDA.

One step differs from a machine with internet: the fresh `.venv` is made without pip and
reads this environment's installed packages through a .pth file, so "pip install -r
requirements.txt" finds every pin satisfied and downloads nothing. The editable install,
the stamps and the server are `make run`'s own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
import torch

from deploy.ports import free_port
from deploy.serve import healthy

ROOT = Path(__file__).resolve().parents[2]
READY_S = 240  # make run's pip, then Streamlit importing torch, on a busy 2-core machine

pytestmark = pytest.mark.slow


def _clean_env(**extra: str) -> dict[str, str]:
    """The reader's shell: no PYTHONPATH pointing at a checkout, no active virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "ATTENTION_LAB_THREADS": "1", "ATTENTION_LAB_PRELOAD": "0", **extra}


@pytest.fixture(scope="module")
def fresh_clone(tmp_path_factory) -> Path:
    """A clone where `make run` has set up .venv and served the app (then stopped by SIGTERM)."""
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    clone = tmp_path_factory.mktemp("newcomer") / "attention-lab"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True, timeout=300)
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(clone / ".venv")], check=True)
    site = subprocess.run(
        [
            str(clone / ".venv/bin/python"),
            "-c",
            "import sysconfig; print(sysconfig.get_path('purelib'))",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (Path(site) / "installed_here.pth").write_text(sysconfig.get_path("purelib") + "\n")

    port = free_port()
    server = subprocess.Popen(
        ["make", "-s", "run", f"PORT={port}", "SERVE_ARGS=--server.address 127.0.0.1"],
        cwd=clone,
        env=_clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    record = clone / ".run" / "run" / f"{port}.json"
    try:
        deadline = time.monotonic() + READY_S
        while not healthy(f"http://127.0.0.1:{port}"):
            assert server.poll() is None, server.stdout.read()
            assert time.monotonic() < deadline, "make run did not answer in time"
            time.sleep(0.5)
        assert record.exists()
        os.killpg(server.pid, signal.SIGTERM)
        output = server.communicate(timeout=60)[0]
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=30)
    assert "Inotify" not in output
    assert not record.exists(), "make run left its PORT.json after SIGTERM"
    assert (clone / ".venv" / ".installed-run").exists()
    return clone


def _blocks(clone: Path) -> list[str]:
    text = (clone / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_the_fresh_clone_imports_the_lab_from_anywhere_after_make_run(clone_session):
    """The reader's script, saved outside the repository, imports the clone's own code: the
    editable install found it, not a path entry of the checkout (none is on sys.path)."""
    found = clone_session["import"]
    assert "error" not in found, found["error"]
    assert found["on_sys_path"] == [], found
    assert Path(found["model"]).is_relative_to(found["clone"])  # the clone's own code


# Says where `import model` leads, runs every block, each in a namespace of its own, as a
# script outside the repository would, then opens the app's explorer (AppTest): one
# interpreter for all of it (each block alone paid torch's import and its models' loads again:
# a minute of the suite; the explorer, and the import check, in an interpreter of their own
# paid them once more), every failure reported with its block's number.
_RUN_BLOCKS_THEN_THE_EXPLORER = """
import json, os, sys, traceback
# First what `import model` finds from here: sys.path holds this script's folder (outside the
# repository) and the environment's, not the working directory, so only the editable
# install can lead it to the clone.
clone = os.path.realpath(os.getcwd())
found = {"clone": clone, "on_sys_path": [p for p in sys.path if os.path.realpath(p or ".") == clone]}
try:
    import model

    found["model"] = model.__file__
except BaseException:  # noqa: BLE001 - reported below
    found["error"] = traceback.format_exc()[-3000:]
blocks = json.load(open(sys.argv[1], encoding="utf-8"))
failed = {}
for index, source in blocks:
    try:
        exec(compile(source, f"readme_block{index}.py", "exec"), {"__name__": "__main__"})
    except BaseException:  # noqa: BLE001 - reported below, with the block's number
        failed[index] = traceback.format_exc()[-3000:]
try:
    from streamlit.testing.v1 import AppTest

    # the clone's app.py: the working directory, the repository root (a relative path would
    # be read from this script's folder)
    at = AppTest.from_file(os.path.abspath("app.py"), default_timeout=600)
    at.switch_page("pages/explorer.py")
    at.run()
    explorer = {"exceptions": [e.value for e in at.exception]}
    explorer["model"] = at.selectbox(key="model").value
except BaseException:  # noqa: BLE001 - reported below
    explorer = {"error": traceback.format_exc()[-3000:]}
print(json.dumps({"import": found, "failed": failed, "explorer": explorer}))
"""


@pytest.fixture(scope="module")
def clone_session(fresh_clone, tmp_path_factory) -> dict:
    """A reader's first session in the clone, with the Python `make run` set up there: what
    `import model` finds from a script saved outside the repository, then every README
    block as such a script (GPU-only ones without CUDA left out), then the app's explorer;
    one interpreter for all three. {"import": {"model", "clone", "on_sys_path"}, "failed":
    {block: traceback}, "explorer": {"model", "exceptions"} or {"error"}}."""
    blocks = [
        (index, source)
        for index, source in enumerate(_blocks(fresh_clone))
        if torch.cuda.is_available() or not source.lstrip().startswith("# needs a CUDA GPU")
    ]
    assert blocks, "the README has no Python block to run"
    outside = tmp_path_factory.mktemp("reader")  # outside the repository
    listing = outside / "readme_blocks.json"
    listing.write_text(json.dumps(blocks), encoding="utf-8")
    script = outside / "readme_blocks.py"
    script.write_text(_RUN_BLOCKS_THEN_THE_EXPLORER, encoding="utf-8")
    ran = subprocess.run(
        [str(fresh_clone / ".venv/bin/python"), str(script), str(listing)],
        cwd=fresh_clone,  # "from the repository root"
        env=_clean_env(ATTENTION_LAB_DATA=str(outside / "data")),
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    return json.loads(ran.stdout.strip().splitlines()[-1])


@pytest.mark.timeout(900)  # every block, one after another, on a busy machine
def test_every_readme_python_block_runs_as_a_script_in_the_fresh_clone(clone_session):
    failed = clone_session["failed"]
    assert failed == {}, "\n".join(f"block {i}:\n{why}" for i, why in failed.items())


@pytest.mark.timeout(900)  # SmolLM2 loaded from its converted folder, on a busy machine
def test_the_fresh_clone_opens_the_explorer_on_smollm2(clone_session):
    """`make run` installed the model packages (requirements-models.txt): the clone's own app
    opens the explorer on the real SmolLM2, converted from its GGUF, with no other step."""
    explorer = clone_session["explorer"]
    assert "error" not in explorer, explorer.get("error")
    assert explorer["exceptions"] == []
    assert explorer["model"] == "smollm2"
