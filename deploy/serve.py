"""Serve a class: N `streamlit run app.py` replicas on private loopback ports, HAProxy in front.

    python -m deploy.serve [--replicas 2] [--port 8501] [--bind *]   # make serve
    python -m deploy.serve stop                                       # make stop
    python -m deploy.serve run [--port 8501]                          # make run
    python -m deploy.serve --print-config                             # the HAProxy config
    python -m deploy.serve --db postgres                              # make serve DB=postgres

HAProxy (deploy/haproxy.cfg.in) keeps each browser on one replica with a cookie it inserts,
spreads new browsers round robin, passes the websocket through and drops a replica whose
/_stcore/health stops answering. The replicas listen on 127.0.0.1 only, on ports PORT+101,
PORT+102, ... (8602, 8603 for the default 8501). Everything started is recorded in
.run/serve/pids.json; Ctrl-C, `make stop` or SIGTERM (to the process or its whole group, once
or several times) stops all of it: a stop signal only raises a flag that the start-up waits and
the watch loop look at, so no signal can cut the clean-up short, and every child runs in its
own process group, which is sent SIGTERM, waited for, then SIGKILL. A replica that dies is
started again; if HAProxy dies, everything stops. A `make serve` killed outright (SIGKILL)
leaves its children behind: `make stop`, or the next `make serve`, ends them from pids.json.

`make run` stays the one-process way to serve: `deploy.serve run` records its pid in
.run/run/PORT.json (for `make stop`) and becomes `streamlit run app.py` (exec), so Ctrl-C and
SIGTERM reach Streamlit itself. Both start Streamlit through deploy.launch: its own command
line, with the pages' imports begun on a thread at process start.

Every replica keeps the class's answers in the same store (classroom/): by default the SQLite
file in ATTENTION_LAB_DATA (one machine); ``--db postgres`` starts a private PostgreSQL server
in .run/postgres (deploy/postgres.py, Debian's `postgresql` package) and hands its URL to the
replicas; `make stop` stops it too. An ATTENTION_LAB_DATABASE_URL already set is used as is.

HAProxy itself comes from the system: `apt-get install -y haproxy` (`make system-deps`).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from deploy.launch import RUN_RECORD_ENV
from deploy.ports import (
    BALANCER_SECRET_ENV,
    FORWARDED_ALLOW_IPS_ENV,
    REPLICA_PORT_OFFSET,
    SERVED_ENV,
    TRUST_NO_PROXY,
    free_port,
    port_in_use,
)

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = Path(__file__).with_name("haproxy.cfg.in")
RUN_DIR = ROOT / ".run" / "serve"
STARTUP_S = 180.0  # a replica imports torch; N of them at once on 2 busy cores take a while
# HAProxy's own start, counted from its launch: it answers in milliseconds, and its first
# health checks (inter 1s, rise 2) need a few seconds more on a loaded machine.
HAPROXY_START_S = 30.0
GRACE_S = 10.0  # after SIGTERM, how long a child may take to stop before SIGKILL
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RUN_APP_DIR = ROOT / ".run" / "run"  # make run: one pid file per port
PG_DIR = ROOT / ".run" / "postgres"  # make serve DB=postgres: its cluster, log and URL
PG_PORT = 5432
SOCKET_PATH_MAX = 100  # a unix socket's path must fit in 108 bytes (sun_path)
LAUNCHER = ("deploy.launch",)  # `streamlit run` with the pages' imports started at once
REPLICA_NEEDLE = "--server.port"  # in every replica's command line, whichever launcher
INSTALL_HINT = "install it with `sudo apt-get install -y haproxy` (or `make system-deps`)"


class ServeError(RuntimeError):
    """Something the person running `make serve` can fix; said in one sentence."""


class Stopping(Exception):  # noqa: N818 (a request, not an error)
    """A stop signal arrived: leave what is being waited for; the clean-up follows."""


class StopFlag:
    """The signal handler of `make serve`: it notes the first stop signal and returns.

    It never raises, so a signal cannot land in the middle of starting a child (a process
    started but not yet recorded) or of the clean-up (the second SIGTERM that `make` passes on
    when its whole group gets one); ``check()``, called at the points where waiting may stop,
    raises :class:`Stopping` instead.
    """

    def __init__(self) -> None:
        self.signum: int | None = None

    def __call__(self, signum, frame) -> None:
        if self.signum is None:
            self.signum = signum

    def __bool__(self) -> bool:
        return self.signum is not None

    def check(self) -> None:
        if self.signum is not None:
            raise Stopping(signal.Signals(self.signum).name)

    def install(self) -> None:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self)


def haproxy_path() -> str | None:
    """The haproxy binary on PATH (Debian puts it in /usr/sbin), or None."""
    found = shutil.which("haproxy")
    if found:
        return found
    return "/usr/sbin/haproxy" if os.access("/usr/sbin/haproxy", os.X_OK) else None


def replica_name(i: int) -> str:
    """r1, r2, ...: the HAProxy server name, the SERVERID cookie value, X-Served-By."""
    return f"r{i + 1}"


def render_config(
    port: int,
    replica_ports: Sequence[int],
    stats_socket: Path,
    bind: str = "*",
    balancer_secret: str | None = None,
) -> str:
    """The HAProxy configuration for these ports, from deploy/haproxy.cfg.in.
    ``balancer_secret``: what HAProxy tells the replicas it is by (a fresh one if None)."""
    balancer_secret = balancer_secret or secrets.token_urlsafe(24)
    servers = "\n".join(
        f"    server {replica_name(i)} 127.0.0.1:{p} cookie {replica_name(i)}"
        for i, p in enumerate(replica_ports)
    )
    text = TEMPLATE.read_text(encoding="utf-8")
    for name, value in (
        ("bind", bind),
        ("port", port),
        ("servers", servers),
        ("stats_socket", stats_socket),
        ("balancer_secret", balancer_secret),
    ):
        text = text.replace("{" + name + "}", str(value))
    return text


def healthy(url: str, timeout: float = 2.0, via_balancer: bool = False) -> bool:
    """``url`` answers its health check. ``via_balancer``: only through our HAProxy, which
    names the replica that answered (X-Served-By); another program on the port does not count."""
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=timeout) as response:
            named = not via_balancer or bool(response.headers.get("X-Served-By"))
            return response.status == 200 and named
    except (urllib.error.URLError, OSError, http.client.HTTPException):
        return False  # HTTPException: whatever answered there is not a Streamlit server


def replica_threads(replicas: int) -> str:
    """Torch threads per replica: the cores shared out, 1 at least, 4 at most; a value the
    person set (ATTENTION_LAB_THREADS) wins."""
    if os.environ.get("ATTENTION_LAB_THREADS", "").isdigit():
        return os.environ["ATTENTION_LAB_THREADS"]
    return str(max(1, min(4, (os.cpu_count() or 2) // max(1, replicas))))


def streamlit_command(
    port: int, launcher: Sequence[str] = LAUNCHER, app: str = "app.py"
) -> list[str]:
    """``streamlit run app.py`` headless on 127.0.0.1:``port``, with no file watcher and no
    usage statistics; ``launcher`` is the module run with ``python -m``: deploy.launch (the
    pages' imports start with the process), or ``streamlit`` itself, or the timed server of
    bench.scripttiming (which takes Streamlit's arguments after its own)."""
    return [
        sys.executable,
        "-m",
        *launcher,
        "run",
        app,
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
    ]


@dataclass
class Replica:
    name: str
    port: int
    log_path: Path
    threads: str
    app: str = "app.py"
    command: list[str] = field(default_factory=list)
    process: subprocess.Popen | None = None
    balancer_secret: str = ""  # the header its HAProxy adds; believed only with it
    environ: dict[str, str] = field(default_factory=dict)  # over this process's, at each start

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, launcher: Sequence[str] = LAUNCHER) -> None:
        self.command = streamlit_command(self.port, launcher, self.app)
        env = {
            **os.environ,
            "ATTENTION_LAB_THREADS": self.threads,
            # served to a class: no typed paths, no server folder named (ui/served.py)
            SERVED_ENV: "1",
            # uvicorn believes no one's X-Forwarded-For; the app believes its balancer's
            FORWARDED_ALLOW_IPS_ENV: TRUST_NO_PROXY,
            **self.environ,
        }
        if self.balancer_secret:
            env[BALANCER_SECRET_ENV] = self.balancer_secret
        with open(self.log_path, "ab") as log:
            # Its own session and process group: a Ctrl-C reaches `make serve` alone, which
            # stops the replicas itself (and does not take a replica's exit for a crash), and
            # stopping the group ends whatever the replica itself started.
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class Cluster:
    """A running balancer and its replicas; ``url`` is what students open."""

    url: str
    port: int
    run_dir: Path
    config_path: Path
    stats_socket: Path
    replicas: list[Replica]
    haproxy: subprocess.Popen | None = None
    ready_s: float = 0.0

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def server_states(self) -> dict[str, str]:
        """replica name -> HAProxy's view of it ("UP", "DOWN", "UP 1/2", ...)."""
        states = {}
        for line in admin_command(self.stats_socket, "show stat").splitlines():
            cells = line.split(",")
            if len(cells) > 17 and cells[0] == "replicas" and cells[1] not in ("BACKEND",):
                states[cells[1]] = cells[17]
        return states

    def record(self) -> None:
        """pids.json: what `stop` ends, and which command each pid ran (to recognise it)."""
        pids = {
            "serve": os.getpid(),
            "url": self.url,
            "haproxy": self.haproxy.pid if self.haproxy else None,
            "replicas": {r.name: r.process.pid for r in self.replicas if r.process},
            # what each child's command line holds, so that `stop` recognises exactly these
            "haproxy_config": str(self.config_path),
            "replica_ports": {r.name: r.port for r in self.replicas},
        }
        _write_json(self.run_dir / "pids.json", pids)


def admin_command(stats_socket: Path, command: str, timeout: float = 2.0) -> str:
    """One command on HAProxy's admin socket; its whole answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(stats_socket))
        sock.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def _signal_group(pid: int, signum: int) -> None:
    """``signum`` to the process group led by ``pid`` (children start in their own session,
    so its group id is its pid); nothing if the group is gone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signum)


def end_processes(processes: Sequence[subprocess.Popen | None], grace_s: float = GRACE_S) -> None:
    """Stop these children, each started in its own process group, and all they started:
    SIGTERM to every group at once, up to ``grace_s`` for them to exit, then SIGKILL to the
    groups (a process that ignored SIGTERM, or one a child left behind)."""
    live = [p for p in processes if p is not None]
    for p in live:
        if p.poll() is None:
            _signal_group(p.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    for p in live:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
    for p in live:
        _signal_group(p.pid, signal.SIGKILL)
    for p in live:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)


def wait_healthy(
    replicas: Sequence[Replica], startup_s: float, stop_flag: StopFlag | None = None
) -> None:
    """Until every replica answers /_stcore/health; a clear error naming the one that died;
    :class:`Stopping` once ``stop_flag`` is raised."""
    start = time.perf_counter()
    waiting = list(replicas)
    while waiting:
        if stop_flag is not None:
            stop_flag.check()
        for r in list(waiting):
            if not r.alive():
                tail = r.log_path.read_text(errors="replace")[-2000:]
                raise ServeError(f"replica {r.name} exited (code {r.process.poll()}):\n{tail}")
            if healthy(r.url, timeout=1.0):
                waiting.remove(r)
        if waiting and time.perf_counter() - start > startup_s:
            names = ", ".join(r.name for r in waiting)
            raise ServeError(
                f"replicas {names} did not answer /_stcore/health in {startup_s:.0f} s"
            )
        if waiting:
            time.sleep(0.2)


@contextlib.contextmanager
def cluster(
    replicas: int = 2,
    port: int | None = None,
    replica_ports: Sequence[int] | None = None,
    bind: str = "127.0.0.1",
    run_dir: Path | None = None,
    startup_s: float = STARTUP_S,
    launcher: Sequence[str] = LAUNCHER,
    stop_flag: StopFlag | None = None,
    app: str = "app.py",
    environ: dict[str, str] | None = None,
) -> Iterator[Cluster]:
    """Start the replicas (in parallel) and HAProxy; stop them all on leaving.

    Free ports are picked where none are given; logs go to ``run_dir`` (a temporary folder
    by default): replica-r1.log, ..., haproxy.log. With ``stop_flag``, the start-up waits
    end in :class:`Stopping` once it is raised. ``app`` is the script the replicas run;
    ``environ``, variables for the replicas alone, kept for a replica started again.
    """
    haproxy = haproxy_path()
    if haproxy is None:
        raise ServeError(f"HAProxy is not installed: {INSTALL_HINT}")
    if replicas < 1:
        raise ServeError("at least one replica is needed")
    picked = port is None  # a port picked here may be taken by another program meanwhile
    port = free_port() if port is None else port
    replica_ports = list(replica_ports or [free_port() for _ in range(replicas)])
    if len(replica_ports) != replicas:
        raise ServeError(f"{replicas} replicas need {replicas} ports, got {len(replica_ports)}")
    busy = [p for p in [port, *replica_ports] if port_in_use(p)]
    if busy:
        raise ServeError(f"port(s) {busy} are in use: stop what runs there or pick another PORT")
    with contextlib.ExitStack() as stack:
        if run_dir is None:
            run_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lab-serve-")))
        run_dir.mkdir(parents=True, exist_ok=True)
        stats_socket = run_dir / "haproxy.sock"
        if len(str(stats_socket)) > SOCKET_PATH_MAX:  # a deep checkout (CI): a short one
            short = stack.enter_context(tempfile.TemporaryDirectory(prefix="lab-"))
            stats_socket = Path(short) / "haproxy.sock"
        config_path = run_dir / "haproxy.cfg"
        secret = secrets.token_urlsafe(24)  # this run's: HAProxy and its replicas share it
        config_path.write_text(
            render_config(port, replica_ports, stats_socket, bind, secret), "utf-8"
        )
        os.chmod(config_path, 0o600)
        check = subprocess.run(
            [haproxy, "-c", "-q", "-f", str(config_path)], capture_output=True, text=True
        )
        if check.returncode != 0:
            raise ServeError(f"HAProxy rejects {config_path}:\n{check.stderr or check.stdout}")
        threads = replica_threads(replicas)
        members = [
            Replica(
                replica_name(i),
                p,
                run_dir / f"replica-{replica_name(i)}.log",
                threads,
                app=app,
                balancer_secret=secret,
                environ=dict(environ or {}),
            )
            for i, p in enumerate(replica_ports)
        ]
        host = "127.0.0.1" if bind in ("*", "0.0.0.0", "") else bind
        lab = Cluster(f"http://{host}:{port}", port, run_dir, config_path, stats_socket, members)
        try:
            start = time.perf_counter()
            for r in members:  # all at once: each spends its first seconds importing torch
                r.start(launcher)
            lab.record()
            wait_healthy(members, startup_s, stop_flag)
            if port_in_use(port):  # taken while the replicas started (seconds)
                if not picked:
                    raise ServeError(f"port {port} is in use: stop what runs there")
                port = free_port()
                lab.port, lab.url = port, f"http://{host}:{port}"
                config_path.write_text(
                    render_config(port, replica_ports, stats_socket, bind, secret), "utf-8"
                )
            log = stack.enter_context(open(run_dir / "haproxy.log", "ab"))
            lab.haproxy = subprocess.Popen(
                [haproxy, "-db", "-f", str(config_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            lab.record()
            # Whatever of startup_s the replicas left, and never less than HAProxy's own time:
            # replicas that took most of it under load must not leave HAProxy none.
            give_up = max(start + startup_s, time.perf_counter() + HAPROXY_START_S)
            while not healthy(lab.url, timeout=1.0, via_balancer=True):
                if stop_flag is not None:
                    stop_flag.check()
                if lab.haproxy.poll() is not None:
                    tail = (run_dir / "haproxy.log").read_text(errors="replace")[-2000:]
                    raise ServeError(f"HAProxy exited (code {lab.haproxy.poll()}):\n{tail}")
                if time.perf_counter() > give_up:
                    raise ServeError(f"HAProxy did not answer on {lab.url}")
                time.sleep(0.1)
            # The balancer answers once one replica is up; wait until it counts them all.
            deadline, states = time.perf_counter() + 10, {}
            while time.perf_counter() < deadline:
                if stop_flag is not None:
                    stop_flag.check()
                with contextlib.suppress(OSError):
                    states = lab.server_states()
                if len(states) == replicas and all(s.startswith("UP") for s in states.values()):
                    break
                time.sleep(0.2)
            lab.ready_s = time.perf_counter() - start
            yield lab
        finally:  # all at once: they stop in parallel
            end_processes([lab.haproxy, *(r.process for r in members)])


# ---- the command line: make serve / make run / make stop ----


def _recorded(pid: int, *needles: str) -> bool:
    """Whether ``pid`` still runs a command containing one of ``needles``: a pid from an old
    pids.json may since belong to someone else's process."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        cmdline = cmdline.decode(errors="replace")  # any process may sit behind a stale pid
    except OSError:
        return False
    return any(n in cmdline for n in needles)


def _wait_gone(pid: int, needle: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _recorded(pid, needle):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _write_json(path: Path, data: dict) -> None:
    """Written whole or not at all: `make stop` never reads half a file."""
    part = path.with_suffix(".part")
    part.write_text(json.dumps(data, indent=2), encoding="utf-8")
    part.replace(path)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _stop_serve(run_dir: Path, timeout: float) -> list[int] | None:
    """End a `make serve` from its pids.json: the serve process first (it stops its own
    children), SIGKILL if it has not ended in ``timeout``; then the process group of any child
    still running (a `make serve` killed outright leaves them). None: nothing recorded."""
    path = run_dir / "pids.json"
    if not path.exists():
        return None
    pids = _read_json(path)
    signalled = []
    serve_pid = pids.get("serve")
    if serve_pid and serve_pid != os.getpid() and _recorded(serve_pid, "deploy.serve"):
        os.kill(serve_pid, signal.SIGTERM)
        signalled.append(serve_pid)
        if not _wait_gone(serve_pid, "deploy.serve", timeout):
            with contextlib.suppress(ProcessLookupError):
                os.kill(serve_pid, signal.SIGKILL)
            _wait_gone(serve_pid, "deploy.serve", 5)
    # This run's own HAProxy config and replica ports (a pids.json from before they were
    # recorded: any HAProxy, any replica): after a reboot, a stale pid may be the system's
    # own HAProxy or another checkout's server.
    ports = pids.get("replica_ports") or {}
    children = [(pids.get("haproxy"), pids.get("haproxy_config") or "haproxy")] + [
        (pid, _run_needle(ports[name]) if name in ports else REPLICA_NEEDLE)
        for name, pid in (pids.get("replicas") or {}).items()
    ]
    left = [(pid, needle) for pid, needle in children if pid and _recorded(pid, needle)]
    for pid, _ in left:  # each child leads its own group (start_new_session)
        _signal_group(pid, signal.SIGTERM)
    for pid, needle in left:
        if not _wait_gone(pid, needle, GRACE_S):
            _signal_group(pid, signal.SIGKILL)
            _wait_gone(pid, needle, 5)
    signalled += [pid for pid, _ in left]
    path.unlink(missing_ok=True)
    return signalled


def _run_needle(port) -> str:
    return f"--server.port {port} "


def _stop_runs(pid_dir: Path, timeout: float) -> list[int] | None:
    """End every `make run` recorded in ``pid_dir`` (one PORT.json each): SIGTERM, then
    SIGKILL if it has not ended in ``timeout``. None: nothing recorded."""
    files = sorted(pid_dir.glob("*.json")) if pid_dir.is_dir() else []
    if not files:
        return None
    signalled = []
    for path in files:
        recorded = _read_json(path)
        pid, needle = recorded.get("run"), _run_needle(recorded.get("port"))
        if pid and pid != os.getpid() and _recorded(pid, needle):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            signalled.append(pid)
            if not _wait_gone(pid, needle, timeout):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                _wait_gone(pid, needle, 5)
        path.unlink(missing_ok=True)
    return signalled


def stop(run_dir: Path = RUN_DIR, timeout: float = 20.0, pid_dir: Path = RUN_APP_DIR) -> list[int]:
    """End what `make serve` (``run_dir``) and `make run` (``pid_dir``) recorded. Returns the
    pids signalled."""
    served, ran = _stop_serve(run_dir, timeout), _stop_runs(pid_dir, timeout)
    stop_postgres()  # a server left by an interrupted `make serve DB=postgres`
    if served is None and ran is None:
        print(f"nothing to stop: no {_shown(run_dir / 'pids.json')}")
        return []
    signalled = (served or []) + (ran or [])
    print(f"stopped {len(signalled)} process(es)" if signalled else "nothing was running")
    return signalled


def _shown(path: Path) -> Path:
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def serve_forever(args) -> int:
    run_dir = Path(args.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    old = run_dir / "pids.json"
    if old.exists():
        recorded = _read_json(old).get("serve")
        if recorded and recorded != os.getpid() and _recorded(recorded, "deploy.serve"):
            print(
                f"make serve is already running (pid {recorded}): `make stop` first",
                file=sys.stderr,
            )
            return 1
        _stop_serve(run_dir, timeout=0)  # children a killed `make serve` left running
    ports = [args.port + REPLICA_PORT_OFFSET + i + 1 for i in range(args.replicas)]
    flag = StopFlag()
    flag.install()  # before anything starts: from here on a signal only raises the flag
    try:
        store = prepare_store(args.db, run_dir, args.pg_port)
    except Exception as err:  # noqa: BLE001 - a store that cannot start is said in a sentence
        print(f"make serve: the class database did not start: {err}", file=sys.stderr)
        if args.db == "postgres":
            stop_postgres()
        return 1
    print(f"class answers are kept in {store}", flush=True)
    print(
        f"starting {args.replicas} replica(s) on 127.0.0.1:{ports[0]}..{ports[-1]} "
        f"and HAProxy on {args.bind}:{args.port} ...",
        flush=True,
    )
    code = 0
    try:
        with cluster(
            args.replicas,
            args.port,
            ports,
            bind=args.bind,
            run_dir=run_dir,
            stop_flag=flag,
            app=args.app,
        ) as lab:
            shown = f"http://localhost:{args.port}" if args.bind in ("*", "0.0.0.0") else lab.url
            print(
                f"ready in {lab.ready_s:.0f} s: open {shown}  (Ctrl-C or `make stop` ends it; "
                f"logs in {_shown(run_dir)})",
                flush=True,
            )
            code = _watch(lab, flag)
    except Stopping:
        pass  # the cluster's own clean-up has run
    except ServeError as err:
        print(f"make serve: {err}", file=sys.stderr)
        code = 1
    finally:
        (run_dir / "pids.json").unlink(missing_ok=True)
        if args.db == "postgres":
            stop_postgres()
    print("stopped", flush=True)
    return code


def prepare_store(db: str, run_dir: Path, pg_port: int = PG_PORT) -> str:
    """The replicas' shared class store, migrated before they start; where it is, said
    without its password."""
    from classroom.store import default_url, ready_engine, redacted

    if db == "postgres" and not os.environ.get("ATTENTION_LAB_DATABASE_URL"):
        from deploy import postgres

        server = postgres.start(PG_DIR, port=pg_port)
        os.environ["ATTENTION_LAB_DATABASE_URL"] = server.url  # the replicas inherit it
        (run_dir / "postgres").write_text(str(PG_DIR), encoding="utf-8")
    url = default_url()
    ready_engine(url)
    return redacted(url)


def stop_postgres() -> None:
    from deploy import postgres

    server = postgres.load(PG_DIR)
    if server is not None and server.running():
        server.stop()
        print("stopped PostgreSQL", flush=True)


def _watch(lab: Cluster, flag: StopFlag) -> int:
    """Until a stop signal (:class:`Stopping`) or HAProxy's death (1): a replica that dies
    is started again (HAProxy has dropped it already and takes it back once healthy)."""
    while True:
        for _ in range(5):
            if flag:
                print("stopping ...", flush=True)
                flag.check()
            time.sleep(0.2)
        for r in lab.replicas:
            if not r.alive():
                print(
                    f"replica {r.name} exited (code {r.process.poll()}); starting it again",
                    flush=True,
                )
                r.start()
                lab.record()
        if lab.haproxy.poll() is not None:
            print(f"HAProxy exited (code {lab.haproxy.poll()}); stopping", file=sys.stderr)
            return 1


def run_app(args) -> int:
    """`make run`: record this pid in PID_DIR/PORT.json, then become `streamlit run`."""
    pid_dir = Path(args.pid_dir).resolve()
    pid_dir.mkdir(parents=True, exist_ok=True)
    path = pid_dir / f"{args.port}.json"
    recorded = _read_json(path).get("run") if path.exists() else None
    if recorded and recorded != os.getpid() and _recorded(recorded, _run_needle(args.port)):
        print(f"make run is already running on port {args.port} (pid {recorded})", file=sys.stderr)
        return 1
    command = run_command(args.port, args.app, args.streamlit_args)
    _write_json(path, {"run": os.getpid(), "port": args.port})
    os.environ[RUN_RECORD_ENV] = str(path)  # deploy.launch removes it when the server exits
    os.chdir(ROOT)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, command)  # the same pid: Ctrl-C and SIGTERM reach Streamlit
    return 1  # not reached


def run_command(port: int, app: str = "app.py", extra: Sequence[str] = ()) -> list[str]:
    """`make run`'s ``streamlit run``: headless, on localhost only (the machine's owner keeps
    the typed-path box; ui/served.py), and no file watcher, which would watch the whole
    repository (.venv's thousands of files included), overflow the inotify queue and print
    "Inotify queue overflowed" for ever; ``extra`` comes last, so it may turn it back on, and
    an ``--server.address`` in it serves the app to others (then locked down as a class)."""
    command = [sys.executable, "-m", *LAUNCHER, "run", app, "--server.headless", "true"]
    if not any(a.split("=")[0] == "--server.address" for a in extra):
        command += ["--server.address", "127.0.0.1"]
    return command + ["--server.port", str(port), "--server.fileWatcherType", "none", *extra]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", nargs="?", choices=["serve", "run", "stop"], default="serve")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--port", type=int, default=8501, help="where students connect")
    parser.add_argument("--bind", default="*", help="HAProxy's address; * = every interface")
    parser.add_argument(
        "--run-dir",
        default=str(RUN_DIR),
        help="where pids, logs and the generated config go (serve and stop)",
    )
    parser.add_argument(
        "--pid-dir",
        default=str(RUN_APP_DIR),
        help="where `run` records its pid, one PORT.json each (run and stop)",
    )
    parser.add_argument("--app", default="app.py", help="the Streamlit script to serve")
    parser.add_argument(
        "--print-config", action="store_true", help="print the HAProxy configuration and exit"
    )
    parser.add_argument(
        "--db",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="the class store shared by every replica: the SQLite file, or a local PostgreSQL",
    )
    parser.add_argument("--pg-port", type=int, default=PG_PORT, help="PostgreSQL's port (--db)")
    args, extra = parser.parse_known_args(argv)
    args.streamlit_args = extra  # `run` passes the rest on (--server.address 127.0.0.1, ...)
    if extra and args.command != "run":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "stop":
        stop(Path(args.run_dir).resolve(), pid_dir=Path(args.pid_dir).resolve())
        return 0
    if args.command == "run":
        return run_app(args)
    if args.print_config:
        ports = [args.port + REPLICA_PORT_OFFSET + i + 1 for i in range(args.replicas)]
        print(
            render_config(args.port, ports, Path(args.run_dir) / "haproxy.sock", args.bind), end=""
        )
        return 0
    if haproxy_path() is None:
        print(f"make serve: HAProxy is not installed: {INSTALL_HINT}", file=sys.stderr)
        return 1
    return serve_forever(args)


if __name__ == "__main__":
    sys.exit(main())
