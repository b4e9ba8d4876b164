"""`make test` runs pytest-xdist with --dist loadgroup: tests that share a module's fixture
(a balancer with its replicas, a database) must stay on one worker, or two workers each build
the fixture and collide on what it names (CI of stop 39: two HAProxies on one admin socket)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_tests_sharing_a_module_fixture_run_on_one_worker(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n"
    )
    body = textwrap.dedent(
        """
        import os, time
        import pytest

        @pytest.fixture(scope="module")
        def shared():
            return "built once"

        @pytest.mark.parametrize("i", range(8))
        def test_uses_it(shared, i, tmp_path_factory):
            time.sleep(0.05)  # long enough for both workers to be asking for work
            with open(os.environ["WORKERS_FILE"], "a") as f:
                f.write(os.environ.get("PYTEST_XDIST_WORKER", "none") + "\\n")

        @pytest.mark.parametrize("i", range(8))
        def test_alone(i):
            time.sleep(0.05)
        """
    )
    (tmp_path / "test_shared.py").write_text(body)
    workers_file = tmp_path / "workers.txt"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "WORKERS_FILE": str(workers_file),
    }
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup"]
        + ["-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    workers = workers_file.read_text().split()
    assert len(workers) == 8
    assert len(set(workers)) == 1, f"the module's tests ran on {sorted(set(workers))}"


def test_a_test_that_raises_torchs_threads_leaves_the_next_test_its_workers_count():
    """tests/conftest.py gives each test its worker's torch thread count back, so a test (or
    the code it runs) that raises it cannot slow every later test of the worker."""
    import pytest
    import torch

    from tests.conftest import _torch_threads_kept

    keeper = _torch_threads_kept.__wrapped__()  # the fixture's generator, as pytest runs it
    before = torch.get_num_threads()
    next(keeper)
    torch.set_num_threads(before + 1)  # what a trainer run left behind
    with pytest.raises(StopIteration):
        next(keeper)
    assert torch.get_num_threads() == before
