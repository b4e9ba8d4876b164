"""`streamlit run`, with what every page imports begun as soon as the server answers.

    python -m deploy.launch run app.py [streamlit options]

`streamlit run` runs nothing of the app until a browser connects, so the first visitor's
script run paid for importing torch, pandas, plotly and the lab's modules (~2 s here) after
the browser had loaded Streamlit's frontend. Here a thread (ui.warm) imports what every page
needs while the browser loads; the first script run waits for it to end, then finds those
imported (docs/benchmarks.md measures both starts side by side). `make run`, each
`make serve` replica and the servers of the tests and benchmarks start through this module.
Asked for app.py, it serves asgi.py: app.py in Streamlit's st.App, which adds the teacher's
session-cookie route (ui.teacher_session); ``bare`` is exactly ``streamlit run app.py``.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import sys
from pathlib import Path

from deploy.ports import FORWARDED_ALLOW_IPS_ENV, TRUST_NO_PROXY

LAB_APP = Path(__file__).resolve().parents[1] / "app.py"
# app.py inside Streamlit's st.App, with the teacher's session-cookie route (asgi.py says why)
LAB_ASGI = LAB_APP.with_name("asgi.py")
# deploy.serve's `run` names its PORT.json here before it becomes this process (exec).
RUN_RECORD_ENV = "ATTENTION_LAB_RUN_RECORD"


def serves_the_lab(args: list[str]) -> bool:
    """Whether ``args`` (``run SCRIPT ...``) serve the lab's app.py: another script (a test's
    tiny app) has other imports, and warming the lab's would only slow its start."""
    return len(args) >= 2 and args[0] == "run" and Path(args[1]).resolve() == LAB_APP


def every_run_in_the_frame() -> None:
    """Every script run starts in app.py, from the first request on.

    Until some run has called st.navigation, Streamlit takes the pages/ folder for a legacy
    multipage app and runs a permalink's page file bare (ui.frame then reruns it in the
    frame). A bare page imports torch and the lab's modules without waiting for the warm-up
    thread, and two threads importing one circle of modules deadlock: a deep link opened
    first on a fresh server failed with _DeadlockError on model.runtime.device in the suite.
    app.py always calls st.navigation, so this only says now what its first run would say.
    """
    from streamlit.runtime.pages_manager import PagesManager

    PagesManager.uses_pages_directory = False


def stop_by_exiting() -> None:
    """Ctrl-C and SIGTERM end the process by SystemExit(0), so atexit runs (forget_run).

    Under st.App, uvicorn handles the signal, shuts down gracefully, puts back the handler it
    found and raises the signal again: with Python's defaults SIGTERM then killed the process
    outright (exit 143, `make run`'s record left behind) and SIGINT raised KeyboardInterrupt.
    `streamlit run` of a plain script exits 0 after "Stopping...", and so does this."""

    def leave(signum, frame) -> None:
        raise SystemExit(0)

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, leave)


def main(argv: list[str] | None = None, bare: bool = False) -> None:
    """Streamlit's own command line (``run app.py ...``), after starting the warm-up (with
    ``bare``: exactly ``streamlit run``, for comparison)."""
    args = sys.argv[1:] if argv is None else argv
    # Streamlit first, whole, on this thread: the warm-up thread then never imports a module
    # of it at the same time (ui.warm.start_warm_imports says why).
    from streamlit.web import cli

    if not bare and serves_the_lab(args):
        from ui.warm import start_warm_imports

        every_run_in_the_frame()
        args = [args[0], str(LAB_ASGI), *args[2:]]
        stop_by_exiting()

        # A server stopped within its first seconds lets the imports finish first:
        # interrupting an extension module's loading at exit can abort the interpreter.
        atexit.register(start_warm_imports().join, 60)

    # uvicorn takes X-Forwarded-For from 127.0.0.1 by default: a local program bypassing
    # the balancer could claim any address. It trusts no one; the app its balancer alone.
    os.environ[FORWARDED_ALLOW_IPS_ENV] = TRUST_NO_PROXY
    record = os.environ.pop(RUN_RECORD_ENV, None)
    if record:
        atexit.register(forget_run, Path(record), os.getpid())
    sys.argv = ["streamlit", *args]
    cli.main()


def forget_run(path: Path, pid: int) -> None:
    """`make run`'s PORT.json, removed as its server exits (Ctrl-C, SIGTERM, `make stop`), so
    no stale record is left; only while it still names this process (a later `make run` on
    the same port writes its own)."""
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("run") == pid:
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


if __name__ == "__main__":
    main()
