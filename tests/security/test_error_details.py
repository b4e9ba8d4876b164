"""A served replica hides error details: its effective config (.streamlit/config.toml under
the very flags deploy.serve starts it with, for `make serve` and `make run`) says
``client.showErrorDetails = "none"``. (That an exception raised in a script then shows the
browser no traceback: tests/e2e/test_security_error_details.py, beside the one Chromium.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deploy.serve import run_command, streamlit_command

ROOT = Path(__file__).resolve().parents[2]

READ_CONFIG = """
import json, sys
from streamlit import config
config._main_script_path = sys.argv[1]
flags = json.loads(sys.argv[2])
config.get_config_options(force_reparse=True, options_from_flags=flags)
print(json.dumps({k: config.get_option(k) for k in json.loads(sys.argv[3])}))
"""


def flags_of(command: list[str]) -> dict[str, str]:
    """The ``--section.option value`` pairs of a `streamlit run` command line."""
    args = command[command.index("run") + 2 :]
    return {args[i][2:]: args[i + 1] for i in range(0, len(args) - 1, 2)}


def effective(command: list[str], options: list[str]) -> dict:
    """What Streamlit itself makes of config.toml and ``command``'s flags (a fresh process:
    Streamlit's config is process-wide)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMLIT_")}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            READ_CONFIG,
            str(ROOT / "app.py"),
            json.dumps(flags_of(command)),
            json.dumps(options),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("how", ["make serve", "make run"])
def test_a_served_replicas_effective_config_hides_error_details(how):
    command = streamlit_command(9999) if how == "make serve" else run_command(9999)
    assert not any(a.startswith("--client.showErrorDetails") for a in command)
    got = effective(command, ["client.showErrorDetails", "client.toolbarMode"])
    assert got == {"client.showErrorDetails": "none", "client.toolbarMode": "minimal"}
