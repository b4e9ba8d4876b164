"""A private PostgreSQL server from Debian's ``postgresql`` package, for a class's answers.

    python -m deploy.postgres start [--dir .run/postgres] [--port 5432]   # prints the URL
    python -m deploy.postgres stop  [--dir .run/postgres]

``make serve DB=postgres`` starts one in ``.run/postgres`` and hands its URL to every replica
(ATTENTION_LAB_DATABASE_URL); ``make stop`` stops it; the test fixture and ``bench.classsim``
start throwaway ones. PostgreSQL refuses to run as root: as root, every server command runs as
the unprivileged ``postgres`` user (``runuser -u postgres --``), which then owns the data
folder. Only 127.0.0.1 listens, and the ``lab`` role has a random password (scram-sha-256),
kept with the URL in ``DIR/url`` (mode 600).
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from deploy.ports import free_port  # below the ephemeral range: no self-connect

ROOT = Path(__file__).resolve().parents[1]
RUN_DIR = ROOT / ".run" / "postgres"
DB_NAME = "attention_lab"
ROLE = "lab"
INSTALL_HINT = "install it with `sudo apt-get install -y postgresql` (or `make system-deps`)"


class PostgresError(RuntimeError):
    """Something the person running the server can fix; said in a sentence or two."""


def bin_dir() -> Path | None:
    """Debian's versioned bin folder (newest), or the folder of an initdb on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=_version)
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


def _version(path: str) -> int:
    try:
        return int(Path(path).parts[-3])
    except ValueError:
        return 0


def missing_reason() -> str | None:
    """Why no server can start here, or None when one can."""
    folder = bin_dir()
    if folder is None or not (folder / "initdb").exists():
        return f"PostgreSQL's initdb/pg_ctl are not installed: {INSTALL_HINT}"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no unprivileged `postgres` user to run the server"
        if shutil.which("runuser") is None:
            return "running as root, and `runuser` is missing to run the server as `postgres`"
    return None


def _as_server_user(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def _give_to_server_user(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam("postgres")
        os.chown(path, entry.pw_uid, entry.pw_gid)


@dataclass
class Server:
    """A PostgreSQL cluster in ``folder`` (data/, server.log, url), on 127.0.0.1:``port``."""

    folder: Path
    port: int
    password: str

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://{ROLE}:{self.password}@127.0.0.1:{self.port}/{DB_NAME}"

    def _pg_ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = _as_server_user([str(bin_dir() / "pg_ctl"), "-D", str(self.data), *args])
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            tail = self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
            raise PostgresError(f"pg_ctl {args[0]} failed: {done.stderr or done.stdout}\n{tail}")
        return done

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.folder} -c max_connections=200"
        )
        self._pg_ctl("-l", str(self.log), "-o", options, "-w", "-t", "60", "start")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._pg_ctl("-m", "fast", "-w", "stop", check=False)

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        return self._pg_ctl("status", check=False).returncode == 0


def create(folder: Path, port: int | None = None) -> Server:
    """A fresh cluster in ``folder`` (made if missing), started, with the lab's database."""
    reason = missing_reason()
    if reason:
        raise PostgresError(reason)
    folder = folder.resolve()
    folder.mkdir(parents=True, exist_ok=True)
    _give_to_server_user(folder)
    for parent in folder.parents:  # the server user must be able to reach its folder
        if os.geteuid() == 0 and (os.stat(parent).st_mode & 0o001) == 0:
            raise PostgresError(
                f"{parent} is not reachable for the `postgres` user; "
                "put the run folder somewhere it can enter"
            )
    server = Server(folder, port or free_port(), secrets.token_urlsafe(18))
    pwfile = folder / "pwfile"
    pwfile.write_text(server.password + "\n", encoding="utf-8")
    os.chmod(pwfile, 0o600)
    _give_to_server_user(pwfile)
    try:
        cmd = [
            str(bin_dir() / "initdb"),
            "-D",
            str(server.data),
            "-U",
            ROLE,
            f"--pwfile={pwfile}",
            "--auth=scram-sha-256",
            "-E",
            "UTF8",
            "--no-locale",
        ]
        done = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=180)
        if done.returncode != 0:
            raise PostgresError(f"initdb failed: {done.stderr or done.stdout}")
    finally:
        pwfile.unlink(missing_ok=True)
    server.start()
    _create_database(server)
    url_file = folder / "url"
    url_file.write_text(server.url + "\n", encoding="utf-8")
    os.chmod(url_file, 0o600)
    return server


def _create_database(server: Server) -> None:
    import psycopg

    deadline = time.monotonic() + 30
    while True:
        try:
            with psycopg.connect(
                host="127.0.0.1",
                port=server.port,
                user=ROLE,
                password=server.password,
                dbname="postgres",
                autocommit=True,
            ) as conn:
                conn.execute(f"CREATE DATABASE {DB_NAME}")
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)


@contextlib.contextmanager
def temporary(folder: Path | None = None, port: int | None = None) -> Iterator[Server]:
    """A throwaway server (tests, benchmarks), stopped and removed on leaving."""
    import tempfile

    own = folder is None
    if own:
        folder = Path(tempfile.mkdtemp(prefix="lab-pg-"))
        os.chmod(folder, 0o755)
    server = create(folder, port)
    try:
        yield server
    finally:
        server.stop()
        if own:
            shutil.rmtree(folder, ignore_errors=True)


def load(folder: Path = RUN_DIR) -> Server | None:
    """The server a previous ``start`` left in ``folder``, if any."""
    url_file = folder / "url"
    if not url_file.exists():
        return None
    from sqlalchemy.engine import make_url

    url = make_url(url_file.read_text(encoding="utf-8").strip())
    return Server(folder.resolve(), int(url.port), str(url.password))


def start(folder: Path = RUN_DIR, port: int = 5432) -> Server:
    """The project's server in ``folder``: made the first time, started again after."""
    server = load(folder)
    if server is None:
        if (folder / "data").exists():
            shutil.rmtree(folder / "data")  # a half-made cluster from an interrupted start
        return create(folder, port)
    if not server.running():
        server.start()
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["start", "stop"])
    parser.add_argument("--dir", default=str(RUN_DIR))
    parser.add_argument("--port", type=int, default=5432)
    args = parser.parse_args(argv)
    folder = Path(args.dir)
    try:
        if args.command == "start":
            print(start(folder, args.port).url)
        else:
            server = load(folder)
            if server is not None:
                server.stop()
    except PostgresError as err:
        print(f"postgres: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
