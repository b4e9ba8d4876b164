"""The servers that browser test modules share besides the session's app server, each
built once by one worker for the modules that mark themselves with its ``xdist_group``:

- the class server (the ``class_server`` fixture of tests/e2e/conftest.py), for the modules
  that need a class store or a models root of their own: test_browser_classroom,
  test_security_teacher_history and test_browser_your_model (group ``GROUP``);
- `make serve`'s deployment, two replicas behind HAProxy over a private PostgreSQL (the
  ``deployment`` fixture), for test_balancer and then test_class_chaos, whose faults (a
  replica killed, the database stopped) come last (group ``DEPLOYMENT_GROUP``).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

import pytest

GROUP = "class-server"
DEPLOYMENT_GROUP = "deployment"
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


def need_haproxy() -> None:
    """Skip, saying how to install it, where HAProxy is missing; under CI=true fail instead
    (.ci/run installs it there, so a missing one is a broken set-up, not a reason to skip)."""
    from deploy.serve import INSTALL_HINT, haproxy_path

    if haproxy_path() is None:
        reason = f"the balancer tests need HAProxy: {INSTALL_HINT}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


class SharedDeployment:
    """bench.classcore.deployment, started by the first module that asks for it and stopped
    by the last one (test_class_chaos), or at the session's end: not kept running, two
    replicas and a PostgreSQL, beside the worker's later tests. Over a PostgreSQL where its
    binaries are installed, else over the replicas' own store."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.running = None  # (lab, PostgreSQL server or None) while started
        self._stack = contextlib.ExitStack()

    def get(self):
        """(lab, pg): started if need be, every replica alive (a test that killed one and
        failed before starting it again leaves it to the next)."""
        from bench.classcore import deployment, restart_replica
        from deploy import postgres
        from deploy.serve import ServeError

        need_haproxy()
        if self.running is None:
            try:
                self.running = self._stack.enter_context(
                    deployment(self.run_dir, postgres=postgres.missing_reason() is None)
                )
            except ServeError as err:
                self.close()
                pytest.fail(str(err))
        lab, _ = self.running
        for replica in lab.replicas:
            if not replica.alive():
                restart_replica(lab, replica.name)
        return self.running

    def close(self) -> None:
        self.running = None
        self._stack.close()
