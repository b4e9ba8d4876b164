"""What every class simulation in bench/ shares: the students' inputs, the servers, the
faults, the clock and the figures.

Four drivers sit on this core, one per way a class reaches the app: bench.classsim (students
speaking Streamlit's websocket protocol through the balancer), bench.loadtest (sessions in
one headless Chromium), bench.classchaos (students in Chromium pressing Check through
faults) and bench.classroomsim (students answering through the class store, no web server).
What they have in common lives here once:

- who a student is: one marker word each (a single MiniLM token the app never shows, so
  seeing another's is cross-talk), a sentence of about 20 tokens carrying it, own digits;
- the deployment: one ``streamlit run`` (``serve``), or `make serve`'s replicas behind
  HAProxy with or without a private PostgreSQL (``deployment``), and Debian's Chromium;
- the faults: a replica killed as a crash would, started again and taken back by HAProxy;
- the clock of a class, and every wait summarised the same way (nearest-rank p50 / p95 /
  max), with the machine's load average before and after;
- the accounting of answers: planned against stored, lost and stored twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from deploy.serve import free_port, healthy, streamlit_command

ROOT = Path(__file__).resolve().parents[1]

# --- who a student is --------------------------------------------------------------------------

# One marker per student: a single MiniLM token found in no catalog or example, so seeing
# another student's marker anywhere is cross-talk (tests/unit/test_serve_and_classsim.py checks both).
MARKERS = [
    "saxophone",
    "volcano",
    "umbrella",
    "penguin",
    "trumpet",
    "cactus",
    "lobster",
    "kangaroo",
    "tornado",
    "avalanche",
    "canyon",
    "lighthouse",
    "submarine",
    "telescope",
    "compass",
    "lantern",
    "violin",
    "accordion",
    "banjo",
    "cello",
    "flute",
    "mandolin",
    "zebra",
    "rhino",
    "leopard",
    "gorilla",
    "buffalo",
    "camel",
    "donkey",
    "parrot",
    "peacock",
    "falcon",
    "eagle",
    "sparrow",
    "raven",
    "dolphin",
    "octopus",
    "squid",
    "oyster",
    "shrimp",
    "salmon",
    "trout",
    "herring",
    "coconut",
    "mango",
    "walnut",
    "almond",
    "cinnamon",
    "vanilla",
    "pumpkin",
    "cabbage",
    "blizzard",
    "glacier",
    "meteor",
    "comet",
    "nebula",
    "galaxy",
    "asteroid",
    "pyramid",
    "castle",
    "palace",
    "cathedral",
    "fortress",
    "windmill",
]  # five letters at least: a short word could turn up by chance in binary data
WARMERS = 4  # the last markers belong to the teacher's warm-up visits, never to a student
MAX_STUDENTS = len(MARKERS) - WARMERS
PLACES = ("bridge", "river", "market", "school", "station", "garden", "harbor", "library")
MOODS = ("quiet", "happy", "tired", "busy", "calm", "bright", "cold", "warm", "loud", "small")
TIMES = ("morning", "evening", "afternoon", "lesson", "break", "weekend")


def sentence(marker: str, rng: random.Random) -> str:
    """About 20 MiniLM tokens with the student's marker; new words each time (no cache hit)."""
    return (
        f"the {marker} that a student saw near the old {rng.choice(PLACES)} was "
        f"{rng.choice(MOODS)} and very {rng.choice(MOODS)} after the long "
        f"{rng.choice(TIMES)} class"
    )


def digits_for(i: int, rng: random.Random) -> list[str]:
    """Eight digits, the last two the student's number: no two students type the same."""
    return [rng.choice("0123456789") for _ in range(6)] + list(f"{i:02d}")


# --- the deployment ----------------------------------------------------------------------------

CHROMIUM = Path("/usr/bin/chromium")  # Debian's browser: what the benchmarks time for a person
# Debian's chromium-headless-shell: the same Blink and V8 without the browser around them. The
# tests drive it where it is installed: per page load it took 20-35 % less CPU than the full
# browser, and a new context half as much (/usr/bin/time over 8 loads each, 2026-11-28).
HEADLESS_SHELL = Path("/usr/bin/chromium-headless-shell")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def chromium_for_tests() -> Path:
    """The Chromium the browser tests drive: the headless shell where installed, else the
    full browser (the same checks, more CPU); a missing one makes the tests skip."""
    return HEADLESS_SHELL if HEADLESS_SHELL.exists() else CHROMIUM


def launch_args(executable: Path) -> list[str]:
    """CHROMIUM_ARGS for ``executable``: the headless shell is headless without the flag."""
    return [a for a in CHROMIUM_ARGS if not (a == "--headless" and executable == HEADLESS_SHELL)]


@contextmanager
def serve(
    log_path: Path | None = None,
    startup_s: float = 120,
    return_process: bool = False,
    timing_log: Path | None = None,
    port: int | None = None,
    bare: bool = False,
    preload: bool = True,
    environ: dict[str, str] | None = None,
):
    """A ``streamlit run app.py`` on ``port`` (default: a free one), started as `make run`
    starts it (deploy.launch), or as a plain ``streamlit run`` with ``bare``: yields (url,
    seconds until healthy), and the server's Popen too with ``return_process`` (to read its
    memory). With ``timing_log`` the server records every script run's time there
    (bench.scripttiming). ``preload=False``: without `make run`'s background preload
    (ui.preload: four models and the concept numbers, ~10 s of CPU), for a test whose pages
    use none of it (a class, a folder of the models root). ``environ``: more variables for
    the server alone (its class store, its models root)."""
    port = port or free_port()
    url = f"http://127.0.0.1:{port}"
    if timing_log is None:
        launcher = ["streamlit"] if bare else ["deploy.launch"]
    else:
        launcher = ["bench.scripttiming", str(timing_log), *(["--bare"] if bare else [])]
    command = streamlit_command(port, launcher)
    log = open(log_path or os.devnull, "w")  # noqa: SIM115 - closed in finally
    start = time.perf_counter()
    env = {**os.environ, **(environ or {}), "ATTENTION_LAB_PRELOAD": "1" if preload else "0"}
    server = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        while not healthy(url):
            if server.poll() is not None or time.perf_counter() - start > startup_s:
                raise RuntimeError(f"streamlit did not start (exit code {server.poll()})")
            time.sleep(0.1)
        ready = time.perf_counter() - start
        yield (url, ready, server) if return_process else (url, ready)
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


@contextlib.contextmanager
def deployment(run_dir: Path | None = None, replicas: int = 2, postgres: bool = True) -> Iterator:
    """`make serve`'s ``replicas`` behind HAProxy, over a private, throwaway PostgreSQL
    (``postgres``) or the replicas' own default store: yields (lab, the PostgreSQL server or
    None). The replicas alone are told the PostgreSQL (a replica started again too); this
    process's environment is left as it was."""
    from deploy import postgres as pg_server
    from deploy.serve import cluster

    if not postgres:
        with cluster(replicas, run_dir=run_dir) as lab:
            yield lab, None
        return
    with pg_server.temporary() as pg:
        environ = {"ATTENTION_LAB_DATABASE_URL": pg.url}
        with cluster(replicas, run_dir=run_dir, environ=environ) as lab:
            yield lab, pg


# --- faults ------------------------------------------------------------------------------------


TAKEN_BACK_S = 180.0  # a replica started again, until HAProxy counts it up: only a ceiling


def kill_replica(lab, name: str) -> int:
    """SIGKILL the replica ``name`` of a deploy.serve cluster (its whole process group), as a
    crash would; its pid."""
    replica = lab.replica(name)
    pid = replica.process.pid
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    replica.process.wait(timeout=30)
    return pid


def restart_replica(lab, name: str) -> None:
    """Start the killed replica again and wait until HAProxy counts it up."""
    from deploy.serve import STARTUP_S, wait_healthy

    replica = lab.replica(name)
    replica.start()
    wait_healthy([replica], STARTUP_S)
    deadline = time.monotonic() + TAKEN_BACK_S
    while not all(s.startswith("UP") for s in lab.server_states().values()):
        assert time.monotonic() < deadline, f"HAProxy never took {name} back"
        time.sleep(0.5)


# --- the clock and the figures -----------------------------------------------------------------


class Clock:
    """Seconds since the class started, for the failover timeline."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    def since(self, t: float) -> float:
        return round(t - self.start, 3)


def run_async(coroutine):
    """asyncio.run(coroutine) on a thread of its own: the caller may be inside an event loop
    already (Playwright's sync API keeps one running in the thread of the browser tests)."""
    box: dict = {}

    def target() -> None:
        try:
            box["result"] = asyncio.run(coroutine)
        except BaseException as err:  # handed to the caller, raised there
            box["error"] = err

    thread = threading.Thread(target=target, name="classsim")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile: the smallest wait that q% of the waits do not exceed."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))]


def summary(waits: list[float]) -> dict:
    """How many waits, their p50 / p95 / max and mean, in seconds; ``{"n": 0}`` for none."""
    if not waits:
        return {"n": 0}
    return {
        "n": len(waits),
        "p50_s": percentile(waits, 50),
        "p95_s": percentile(waits, 95),
        "max_s": max(waits),
        "mean_s": statistics.fmean(waits),
    }


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far (/proc/PID/stat), 0 when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
        fields = text.rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def settle(
    pids: list[int], quiet: float = 0.1, window_s: float = 2.0, limit_s: float = 180.0
) -> float:
    """Wait until the replicas' start-up work (ui.preload: models, the concept pages'
    numbers, on a background thread after the first page) is done: until they used less than
    ``quiet`` of a core over ``window_s``. The class starts on servers at rest, as it does
    when the teacher opened the lab minutes before. Returns the seconds waited."""
    start = time.perf_counter()
    before = sum(cpu_seconds(p) for p in pids)
    while time.perf_counter() - start < limit_s:
        time.sleep(window_s)
        now = sum(cpu_seconds(p) for p in pids)
        if (now - before) / window_s < quiet:
            break
        before = now
    return time.perf_counter() - start


def load_average() -> list[float]:
    """The machine's load average (1, 5, 15 min), rounded: every figure is read beside it."""
    return [round(x, 2) for x in os.getloadavg()]


def account(planned: set[str], stored: list[str]) -> dict:
    """Answers ``planned`` (their ids) against those ``stored`` (one id per stored row): each
    must be stored exactly once, and nothing else."""
    kept = set(stored)
    return {
        "answers_planned": len(planned),
        "answers_stored": len(stored),
        "lost": len(planned - kept),
        "duplicates": len(stored) - len(kept),
        "unplanned": len(kept - planned),
    }
