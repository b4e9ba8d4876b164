"""`make serve`'s balancer for real: HAProxy in front of two replicas of the app.

Cookie-less clients spread over the replicas, the SERVERID cookie keeps a browser (and its
websocket) on one, with XSRF protection on, and a killed replica is dropped by the health
check while its students (Chromium and a simulated class) move to the other. Speed
is measured by bench.classsim (`make bench`), not asserted here.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.cookies import SimpleCookie
from pathlib import Path

import pytest

from bench import classsim, loadtest
from bench.classcore import kill_replica
from deploy.serve import admin_command, free_port, haproxy_path, render_config
from tests.e2e.servers import DEPLOYMENT_GROUP, need_haproxy
from ui.i18n import translate

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group(DEPLOYMENT_GROUP)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def lab(shared_deployment):
    """Two replicas behind HAProxy (tests/e2e/servers.py: shared with test_class_chaos, which
    runs after this module), MiniLM and sort loaded on both, untimed."""
    running, _ = shared_deployment.get()
    classsim.warm(running.url)
    return running


@contextlib.contextmanager
def haproxy_in_front(tmp_path, replica_ports: list[int], secret: str | None = None):
    """The lab's HAProxy configuration over these ports (plain HTTP servers a test runs),
    on a free port of 127.0.0.1, yielded once every replica and the backend are UP."""
    port, sock, config = free_port(), tmp_path / "haproxy.sock", tmp_path / "haproxy.cfg"
    config.write_text(render_config(port, replica_ports, sock, "127.0.0.1", secret))
    haproxy = subprocess.Popen(
        [haproxy_path(), "-db", "-f", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(OSError):
                if admin_command(sock, "show stat").count(",UP,") >= len(replica_ports) + 1:
                    break
            assert time.monotonic() < deadline and haproxy.poll() is None, "HAProxy not up"
            time.sleep(0.2)
        yield port
    finally:
        haproxy.terminate()
        haproxy.wait(timeout=10)


def get(url: str, cookie: str | None = None) -> tuple[str, dict[str, str]]:
    """(replica that answered, cookies set by the answer)."""
    request = urllib.request.Request(url)
    if cookie:
        request.add_header("Cookie", cookie)
    with urllib.request.urlopen(request, timeout=10) as response:
        jar = SimpleCookie()
        for raw in response.headers.get_all("Set-Cookie") or []:
            jar.load(raw)
        return response.headers["X-Served-By"], {k: m for k, m in jar.items()}


def test_make_serve_starts_one_replica_and_make_stop_ends_all_of_it(tmp_path):
    """The command line behind `make serve` / `make stop`, with its own run folder and port,
    and a class arriving at once on its fresh replica. First in the module: it runs before
    the shared two-replica balancer starts."""
    need_haproxy()

    port, run_dir = free_port(), tmp_path / "run"
    pid_dir = ["--pid-dir", str(tmp_path / "pids")]  # not this checkout's own `make run`
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "deploy.serve",
            "--replicas",
            "1",
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--run-dir",
            str(run_dir),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        lines = []
        for line in serve.stdout:  # "starting ...", then "ready in N s: open URL ..."
            lines.append(line)
            if line.startswith("ready in") or len(lines) > 50:
                break
        assert lines and lines[-1].startswith("ready in"), "".join(lines)
        served, _ = get(f"http://127.0.0.1:{port}/_stcore/health")
        assert served == "r1"
        # A class opening its links together on the freshly started replica: every student
        # gets the page inside the frame, on the link's model (MiniLM), not a bare page on
        # the default model (ui.frame.require_frame).
        together = classsim.run_class(
            f"http://127.0.0.1:{port}", students=6, duration_s=1, seed=3, arrival_s=0
        )
        assert together["errors"] == [] and together["crosstalk"] == []
        assert together["actions"]["open"]["n"] == 6
        pids = json.loads((run_dir / "pids.json").read_text())
        started = [pids["serve"], pids["haproxy"], *pids["replicas"].values()]
        stop = subprocess.run(
            [sys.executable, "-m", "deploy.serve", "stop", "--run-dir", str(run_dir), *pid_dir],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stop.returncode == 0, stop.stderr
        assert serve.wait(timeout=30) == 0
        deadline = time.monotonic() + 10
        while any(Path(f"/proc/{pid}").exists() for pid in started):
            assert time.monotonic() < deadline, f"still running: {started}"
            time.sleep(0.2)
        assert not (run_dir / "pids.json").exists()
        again = subprocess.run(
            [sys.executable, "-m", "deploy.serve", "stop", "--run-dir", str(run_dir), *pid_dir],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert again.returncode == 0 and "nothing to stop" in again.stdout
    finally:
        if serve.poll() is None:
            serve.terminate()
            serve.wait(timeout=30)


class _Replica(http.server.BaseHTTPRequestHandler):
    """A stand-in replica: healthy, and ``broken`` ones drop a static file's request unanswered
    (as a replica killed while sending it)."""

    broken = False

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.broken and self.path.startswith("/static/"):
            self.close_connection = True  # nothing written: HAProxy sees an empty response
            return
        body = b"ok"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


def test_a_request_cut_off_by_a_dying_replica_is_sent_to_the_other(tmp_path):
    """HAProxy's retry-on: a browser fetching a script chunk from the replica that dies
    gets it from the other one instead of an error it would keep until a reload."""
    need_haproxy()

    broken = type("Broken", (_Replica,), {"broken": True})
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), h) for h in (broken, _Replica)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    ports = [server.server_address[1] for server in servers]
    try:
        with haproxy_in_front(tmp_path, ports) as port:
            url = f"http://127.0.0.1:{port}/static/js/PlotlyChart.js"
            served, cookies = get(url, cookie="SERVERID=r1")  # the browser belongs to r1
            assert served == "r2"  # retried, redispatched: not a 502
            assert cookies["SERVERID"].value == "r2"
            assert get(f"http://127.0.0.1:{port}/", cookie="SERVERID=r1")[0] == "r1"  # sticky
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def test_cookieless_clients_spread_and_the_cookie_keeps_one_on_its_replica(lab):
    first, cookies = get(lab.url + "/")
    second, _ = get(lab.url + "/")
    assert {first, second} == {"r1", "r2"}  # round robin, not one source address -> one replica
    sticky = cookies["SERVERID"]
    assert sticky.value == first and sticky["httponly"]
    for _ in range(4):
        served, again = get(lab.url + "/_stcore/health", cookie=f"SERVERID={first}")
        assert served == first
        assert "SERVERID" not in again  # a valid cookie is kept, not reissued


def put_file(url: str, cookies: dict[str, str], token: str | None) -> tuple[int, str, str]:
    """PUT one small file the way st.file_uploader does: (status, replica, error detail)."""
    boundary = "lab-test-boundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="n.txt"'
        f"\r\nContent-Type: text/plain\r\n\r\nthe zebra\r\n--{boundary}--\r\n"
    ).encode()
    request = urllib.request.Request(url, data=body, method="PUT")
    request.add_header("Content-Type", f"multipart/form-data; boundary={boundary}")
    request.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in cookies.items()))
    if token is not None:
        request.add_header("X-Xsrftoken", token)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers["X-Served-By"], ""
    except urllib.error.HTTPError as err:
        return err.code, err.headers["X-Served-By"], err.read().decode(errors="replace")


def test_an_upload_reaches_the_replica_that_holds_its_session_and_xsrf_is_checked(lab):
    student = classsim.Student(0, lab.url, classsim.MARKERS, 5, classsim.Clock())
    student.query_string = f"model=minilm&text=the+{student.marker}+crossed+the+bridge"

    async def upload_during_a_session() -> dict:
        await student.connect()
        await student.act("open", student.client_state(), student.check_explorer)
        session, home = student.conn.session_id, student.conn.served_by
        url = f"{lab.url}/_stcore/upload_file/{session}/file-1"
        token = student.cookies["_streamlit_xsrf"]
        other = {"r1": "r2", "r2": "r1"}[home]
        answers = {
            "sticky": await asyncio.to_thread(put_file, url, student.cookies, token),
            "no token": await asyncio.to_thread(put_file, url, student.cookies, None),
            "other replica": await asyncio.to_thread(
                put_file, url, {**student.cookies, "SERVERID": other}, token
            ),
        }
        await student.conn.close()
        return {"home": home, "other": other, **answers}

    got = classsim.run_async(upload_during_a_session())
    assert student.errors == [], student.errors
    assert got["sticky"][:2] == (204, got["home"])  # the cookie took it to the session
    assert got["no token"][:2] == (403, got["home"])  # XSRF protection on behind HAProxy
    status, served, detail = got["other replica"]  # without stickiness it would fail so
    assert (status, served) == (400, got["other"]) and "Invalid session_id" in detail


@pytest.mark.browser
def test_a_killed_replica_is_dropped_and_chromium_and_a_class_on_it_move(
    lab, browser, screenshot_whole_page, artifacts_dir
):
    """Last in this module: it leaves a replica dead (test_class_chaos's fixture starts it
    again). One SIGKILL, two kinds of student on the replica it hits: Streamlit's own frontend
    in Chromium and a simulated class of four (one kill and one start again for both; each
    used to pay its own).

    Chromium opens the decoding page through HAProxy (sort: a light page whose Step draws a
    chart, and proves the same routing, cookies and websocket as the explorer did; the
    explorer's own drawing is test_browser_explorer's); the class is 8 s in, every student
    still in it (its first round, two explorer reruns 3-6 s apart, ends 7 s in at the
    soonest, and a round begun is finished), when Chromium presses Step and its replica is
    killed right away, the chart perhaps still loading. The page reconnects to the other
    replica, comes back from its URL, works and shows no error; the class's students on the
    victim move there, the others see nothing; HAProxy's health check marks it DOWN.

    The same class holds the websocket sessions to their replicas: its students speak
    Streamlit's protocol through HAProxy with the XSRF token on, spread over both replicas
    (round robin) and, but for the victim's, never move (this was a class of its own)."""
    from playwright.sync_api import Error as PlaywrightError  # the browser fixture needs it

    # Reduced motion, which the lab honours (ui/a11y.py): a page reconnecting on a busy
    # machine redraws no animation frame by frame; what is checked does not move.
    context = browser.new_context(
        viewport={"width": 1280, "height": 900}, base_url=lab.url, reduced_motion="reduce"
    )
    page = context.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
    position = re.escape(translate("decoding.position", "en", step="§", total="¶"))

    def at_step(step: int):
        pattern = position.replace("§", str(step)).replace("¶", r"\d+")
        # the progress bar's own line (the live region says "Step n of N: ..." too)
        return page.get_by_test_id("stProgress").get_by_text(re.compile(pattern))

    def button(name: str):
        return page.get_by_role("button", name=translate(f"decoding.{name}", "en"), exact=True)

    # The class's kill() runs on a thread of its own when the class is 8 s in: it asks for
    # Chromium's Step (this thread drives Playwright), then kills Chromium's replica.
    want_step, stepped, killed = threading.Event(), threading.Event(), threading.Event()
    home: dict[str, str] = {}

    def kill_after_the_step() -> tuple[str, int]:
        want_step.set()
        assert stepped.wait(120), "Chromium never pressed Step"
        try:
            return home["replica"], kill_replica(lab, home["replica"])
        finally:
            killed.set()

    out: dict = {}

    def run() -> None:
        try:
            out["result"] = classsim.run_class(
                lab.url,
                students=4,
                duration_s=12,
                seed=11,
                arrival_s=0.3,
                kill=kill_after_the_step,
                kill_after_s=8,
            )
        except BaseException as err:  # raised on this test's thread below
            out["error"] = err
            want_step.set()
            killed.set()

    lesson = threading.Thread(target=run, name="class")
    try:
        page.goto("/decoding?model=sort&text=4+1+3+2")
        button("step").wait_for(timeout=90_000)
        cookies = {c["name"]: c for c in context.cookies()}
        home["replica"] = cookies["SERVERID"]["value"]
        assert home["replica"] in ("r1", "r2")
        assert cookies["SERVERID"]["httpOnly"]
        assert "_streamlit_xsrf" in cookies  # XSRF protection stays on behind the proxy
        lesson.start()
        assert want_step.wait(120), "the class never came to its kill"
        assert "error" not in out, out.get("error")
        button("step").click()
        at_step(1).wait_for(timeout=90_000)
        stepped.set()
        assert killed.wait(60), "the replica was not killed"
        assert "error" not in out, out.get("error")
        killed_at = time.monotonic()
        # Reset, pressed until the page answers: only a live session on the other replica can.
        while True:
            assert time.monotonic() - killed_at < 60, "the page never came back"
            with contextlib.suppress(PlaywrightError):
                button("reset").click(timeout=2_000)
                at_step(0).wait_for(timeout=2_000)
                break
        back_s = time.monotonic() - killed_at
        cookies = {c["name"]: c["value"] for c in context.cookies()}
        assert cookies["SERVERID"] != home["replica"]  # HAProxy sent it on, with a new cookie
        box = page.get_by_role("textbox", name=translate("input.label", "en"))
        assert box.input_value() == "4 1 3 2"  # the sentence came back from the URL
        button("step").click()
        at_step(1).wait_for(timeout=90_000)
        # The chart draws: its component (a script chunk the browser may have been fetching
        # from the dead replica, right after the first Step) came, via HAProxy's retry-on.
        loadtest.wait_for_mask_rows(page, 1, 90_000)  # a broken chunk never draws: no flake cover
        assert page.get_by_text("Failed to fetch dynamically imported module").count() == 0
        assert page.get_by_test_id("stException").count() == 0
        assert problems == []
        print(f"page served again {back_s:.1f} s after its replica was killed")
    finally:
        stepped.set()  # a class waiting for a Step that will not come goes on
        if lesson.ident is not None:  # started
            lesson.join()
        with contextlib.suppress(PlaywrightError):  # passed or not: how the page looked
            screenshot_whole_page(page, artifacts_dir / "balancer-after-failover.png")
        context.close()
    if "error" in out:
        raise out["error"]
    victim = home["replica"]
    other = {"r1": "r2", "r2": "r1"}[victim]
    result = out["result"]
    failover = result["failover"]
    print(f"{victim} killed {failover['killed_at']:.1f} s into the class")
    assert failover["students_on_victim"] >= 1
    assert failover["reconnected"] == failover["students_on_victim"]
    assert failover["moved_to"] == [other]
    assert failover["errors_on_victim"] == []
    assert failover["errors_elsewhere"] == []  # the other replica's students saw nothing
    assert failover["reconnects_elsewhere"] == 0
    assert result["crosstalk"] == []
    # the sessions: every student served without an error (XSRF on), both replicas took
    # students, each spared one stayed on its own, and the explorer reran for them
    assert result["errors"] == []
    assert sorted(result["replicas"]) == ["r1", "r2"]
    assert all(path == [other] for path in result["served_by"] if path[:1] != [victim])
    assert result["actions"]["explorer"]["n"] >= 2
    deadline, states = time.monotonic() + 10, {}
    while not states.get(victim, "").startswith("DOWN"):
        assert time.monotonic() < deadline, f"{victim} still {states} after its death"
        time.sleep(0.2)
        # HAProxy's admin socket now and then refuses one connection while the suite runs
        # other servers beside it; students never use it, the next poll asks again.
        with contextlib.suppress(OSError):
            states = lab.server_states()
    assert {get(lab.url + "/_stcore/health")[0] for _ in range(3)} == {other}
