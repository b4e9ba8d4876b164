"""A class through the balancer: simulated students speaking Streamlit's own websocket protocol.

    python -m bench.classsim [--students 30] [--replicas 2] [--duration 60] [--kill-after 25]
    python -m bench.classsim --class-store [--students 60] [--kill-after 8] [--restart-db-after 16]
                             [--url http://127.0.0.1:8501]

Each student does what the Streamlit frontend does, without a browser: GET the page (HAProxy's
SERVERID cookie), GET /_stcore/health (Streamlit's _streamlit_xsrf cookie), then the websocket
/_stcore/stream with both cookies and the XSRF token as its second subprotocol, and BackMsg
``rerun_script`` messages (streamlit.proto) carrying the query string, the page and widget
states; the server answers with ForwardMsg new_session, delta, ..., script_finished. A
student opens the explorer on MiniLM with its own sentence (about 20 tokens) from the query
string, re-types a sentence every few seconds (the text widget's value, by the widget id the
delta gave), goes to the decoding page, switches the model to `sort`, types its own digits
and presses Step (a fragment rerun, as the browser sends it), then goes back. Every action is
timed from the BackMsg to its script_finished (all its elements have arrived by then: one
websocket, in order).

Checks: an action that ends in an exception, an error alert, a timeout or a missing element
is an error; a student that ever receives another student's marker word (anywhere in any
message) or another student's digits is cross-talk. With ``--kill-after`` one replica is
SIGKILLed mid-class; its students reconnect as the frontend does (poll /_stcore/health
through the balancer, new websocket with the old session id, rerun with the query string and
widget states they hold) and the time until they are served again is reported.

Simplification: a student sends the states of the widgets *it* set on the current page, not
every widget's (the frontend sends all). The server keeps the others from the previous run,
so the page does the same work; after a reconnect to a fresh replica the others come from the
URL's query string, as they would for the browser. The frontend's static files are not
fetched. Bounded: students, duration and every wait are capped; loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.cookies import SimpleCookie

from bench.classcore import (  # noqa: F401 - MARKERS, sentence, ...: the students' inputs
    MARKERS,
    MAX_STUDENTS,
    MOODS,
    PLACES,
    TIMES,
    WARMERS,
    Clock,
    cpu_seconds,
    deployment,
    digits_for,
    kill_replica,
    run_async,
    sentence,
    settle,
    summary,
)
from ui.i18n import translate

ACTIONS = ("open", "explorer", "navigate", "switch", "decoding_text", "step", "reconnect")
ACTION_TIMEOUT_S = 60.0
RETYPES = 2  # explorer sentences per round, after the first
STEPS = 3  # Step presses per round
THINK_S = (3.0, 6.0)  # a student reads this long between actions (uniform)
STEP_THINK_S = (1.0, 2.5)  # ... and between Step presses
RECONNECT_POLL_S = 0.5  # the frontend's first retry interval
RECONNECT_GIVE_UP_S = 60.0

FINISHED = {0: "ok", 1: "compile error", 3: "ok"}  # ForwardMsg.ScriptFinishedStatus; 2: early


class Disconnected(Exception):
    """The websocket closed under a student (its replica died, or the balancer cut it)."""


@dataclass
class RunResult:
    """What one rerun sent back, up to its script_finished."""

    seconds: float
    status: str
    elements: list = field(default_factory=list)  # (delta fragment id, Element)
    raw: list[bytes] = field(default_factory=list)
    query_string: str | None = None
    fragment: bool = False  # a fragment rerun: only part of the page came


class Connection:
    """One websocket to /_stcore/stream and what the frontend keeps about it."""

    def __init__(self, ws, served_by: str | None):
        self.ws = ws
        self.served_by = served_by
        self.session_id: str | None = None
        self.pages: dict[str, str] = {}  # url path -> page_script_hash
        self.queue: asyncio.Queue = asyncio.Queue()
        self.closed = asyncio.Event()
        self.by_hash: dict[str, bytes] = {}
        self.reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            async for data in self.ws:
                await self.queue.put(data)
        except ConnectionClosed:
            pass
        finally:
            self.closed.set()
            await self.queue.put(None)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()
        self.reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self.reader

    async def rerun(self, client_state, timeout: float = ACTION_TIMEOUT_S) -> RunResult:
        """Send one BackMsg rerun_script; collect every ForwardMsg until its script_finished."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        while not self.queue.empty():  # status messages of the previous run
            if self.queue.get_nowait() is None:
                raise Disconnected("closed before the rerun")
        if self.closed.is_set():
            raise Disconnected("closed before the rerun")
        msg = BackMsg()
        msg.rerun_script.CopyFrom(client_state)
        start = time.perf_counter()
        try:
            await self.ws.send(msg.SerializeToString())
        except Exception as err:
            raise Disconnected(f"send failed: {type(err).__name__}") from err
        out = RunResult(0.0, "")
        deadline = start + timeout
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                raise TimeoutError(f"no script_finished in {timeout:.0f} s")
            try:
                data = await asyncio.wait_for(self.queue.get(), remaining)
            except TimeoutError:
                raise TimeoutError(f"no script_finished in {timeout:.0f} s") from None
            if data is None:
                raise Disconnected("closed during the rerun")
            fwd = ForwardMsg()
            fwd.ParseFromString(data)
            if fwd.ref_hash:  # a message the server knows this client has: look it up
                data = self.by_hash.get(fwd.ref_hash, b"")
                fwd = ForwardMsg()
                fwd.ParseFromString(data)
            elif fwd.hash:
                self.by_hash[fwd.hash] = data
            out.raw.append(data)
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                self.session_id = fwd.new_session.initialize.session_id or self.session_id
            elif kind == "navigation":
                for page in fwd.navigation.app_pages:
                    self.pages[page.url_pathname] = page.page_script_hash
            elif kind == "page_info_changed":
                out.query_string = fwd.page_info_changed.query_string
            elif kind == "delta" and fwd.delta.WhichOneof("type") == "new_element":
                out.elements.append((fwd.delta.fragment_id, fwd.delta.new_element))
            elif kind == "script_finished" and fwd.script_finished in FINISHED:
                out.seconds = time.perf_counter() - start
                out.status = FINISHED[fwd.script_finished]
                out.fragment = fwd.script_finished == 3
                return out


def widget(elements, kind: str, key: str | None = None, label: str | None = None):
    """The last (fragment id, element proto) of a widget type, by user key or by label."""
    found = None
    for fragment_id, element in elements:
        if element.WhichOneof("type") != kind:
            continue
        proto = getattr(element, kind)
        if (key is None or proto.id.endswith(f"-{key}")) and (
            label is None or proto.label == label
        ):
            found = (fragment_id, proto)
    return found


def problems_in(elements) -> list[str]:
    """Exceptions and error alerts the page showed."""
    out = []
    for _, element in elements:
        kind = element.WhichOneof("type")
        if kind == "exception":
            out.append(f"exception: {element.exception.type}: {element.exception.message[:200]}")
        elif kind == "alert" and element.alert.format == 1:  # Alert.Format.ERROR
            out.append(f"error alert: {element.alert.body[:200]}")
    return out


def heatmap_tokens(elements) -> list[str] | None:
    """The key tokens on the explorer's last heatmap (its x axis labels), or None."""
    for _, element in reversed(elements):
        if element.WhichOneof("type") == "plotly_chart" and element.plotly_chart.id.endswith(
            "-heatmap_chart"
        ):
            spec = json.loads(element.plotly_chart.spec)
            axis = spec.get("layout", {}).get("xaxis", {})
            return [str(t) for t in axis.get("ticktext", [])]
    return None


def markdown_bodies(elements) -> list[str]:
    return [e.markdown.body for _, e in elements if e.WhichOneof("type") == "markdown"]


def progress_texts(elements) -> list[str]:
    return [e.progress.text for _, e in elements if e.WhichOneof("type") == "progress"]


class Student:
    def __init__(self, i: int, base: str, markers: list[str], seed: int, log: Clock):
        self.i = i
        self.base = base
        self.marker = markers[i]
        self.others = re.compile(
            rb"\b(" + b"|".join(m.encode() for j, m in enumerate(markers) if j != i) + rb")\b"
        )
        self.rng = random.Random(seed * 1000 + i)
        self.digits = digits_for(i, self.rng)
        self.others_digits = {
            " ".join(digits_for(j, random.Random(seed * 1000 + j))): j
            for j in range(len(markers))
            if j != i
        }
        self.clock = log
        self.cookies: dict[str, str] = {}
        self.conn: Connection | None = None
        self.page = "explorer"
        self.query_string = ""
        self.widgets: dict[str, object] = {}  # widget id -> WidgetState the student set
        # URL parameters that widgets own (bind="query-params"): the frontend writes them and
        # keeps them when the server sends a query string without them (a fragment run does)
        self.bound: dict[str, str] = {}
        self.page_check = None  # what the current page must show, checked after a reconnect
        self.elements: list = []  # the last full run's elements
        self.waits: dict[str, list[float]] = {a: [] for a in ACTIONS}
        self.errors: list[str] = []
        self.crosstalk: list[str] = []
        self.replicas: list[str] = []  # every replica that served this student, in order
        self.reconnects: list[dict] = []
        self.text = ""
        self.history: list[str] = []  # actions done, for the story behind an error
        self.progress = ""  # the decoding page's last step counter, from any run

    # ---- HTTP and the websocket, as the frontend does them ----

    def _http_get(self, path: str) -> tuple[int, dict]:
        request = urllib.request.Request(self.base + path)
        if self.cookies:
            request.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
                status, headers = response.status, response.headers
        except urllib.error.HTTPError as err:
            status, headers = err.code, err.headers
        for raw in headers.get_all("Set-Cookie") or []:
            jar = SimpleCookie()
            jar.load(raw)
            self.cookies.update({k: m.value for k, m in jar.items()})
        return status, {"served_by": headers.get("X-Served-By")}

    async def connect(self, resume: bool = False) -> None:
        """Page, health (cookies), then the websocket; ``resume``: offer the old session id."""
        from websockets.asyncio.client import connect

        if not resume:
            await asyncio.to_thread(self._http_get, f"/{self.page}?{self.query_string}")
        status, _ = await asyncio.to_thread(self._http_get, "/_stcore/health")
        if status != 200:
            raise Disconnected(f"health answered {status}")
        xsrf = self.cookies.get("_streamlit_xsrf", "")
        protocols = ["streamlit", xsrf] if xsrf else ["streamlit"]
        if resume and self.conn is not None and self.conn.session_id:
            protocols = ["streamlit", xsrf, self.conn.session_id]
        ws_url = "ws" + self.base.removeprefix("http") + "/_stcore/stream"
        ws = await connect(
            ws_url,
            subprotocols=protocols,
            origin=self.base,
            additional_headers={"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())},
            max_size=64 * 2**20,
            open_timeout=10,
            proxy=None,
        )
        old = self.conn
        self.conn = Connection(ws, ws.response.headers.get("X-Served-By"))
        if old is not None:
            self.conn.pages = old.pages
            self.conn.session_id = old.session_id
            await old.close()
        if not self.replicas or self.replicas[-1] != self.conn.served_by:
            self.replicas.append(self.conn.served_by)

    def client_state(self, *, page_hash: str = "", fragment_id: str = "", trigger=None):
        from streamlit.proto.ClientState_pb2 import ClientState

        state = ClientState(query_string=self.query_string, fragment_id=fragment_id)
        if page_hash:
            state.page_script_hash = page_hash
        else:
            state.page_name = self.page
        for value in self.widgets.values():
            state.widget_states.widgets.add().CopyFrom(value)
        if trigger is not None:
            state.widget_states.widgets.add().CopyFrom(trigger)
        state.context_info.url = f"{self.base}/{self.page}"
        state.context_info.locale = "en-US"
        state.context_info.timezone = "UTC"
        return state

    async def act(self, action: str, state, check=None) -> RunResult | None:
        """One timed rerun and its checks. If the websocket died, reconnect: the reconnect's
        rerun carries the same URL and widget states, and is checked for what the page must
        show (its own sentence on the explorer, its own digits on the decoding page)."""
        if action in ("open", "explorer"):
            self.page_check = self.check_explorer
        elif action == "decoding_text":
            self.page_check = self.check_decoding(None)
        elif action in ("navigate", "switch"):  # the text shown is the session's, not typed
            self.page_check = None
        try:
            result = await self.conn.rerun(state)
        except Disconnected:
            self.history.append(f"lost during {action}")
            await self.reconnect()
            return None
        except TimeoutError as err:
            self.errors.append(f"{action}: {err}")
            return None
        self.history.append(action)
        self._look(action, result)
        self.waits[action].append(result.seconds)
        if check is not None:
            check(result)
        return result

    def _look(self, action: str, result: RunResult) -> None:
        if result.query_string is not None:
            params = dict(urllib.parse.parse_qsl(result.query_string, keep_blank_values=True))
            for k in self.bound:
                if k in params:  # the server set it (an example picked, a default written)
                    self.bound[k] = params[k]
                else:  # a run where the widget did not register: the frontend keeps it
                    params[k] = self.bound[k]
            self.query_string = urllib.parse.urlencode(params)
        if result.status != "ok":
            self.errors.append(f"{action}: script {result.status}")
        self.errors += [f"{action}: {p}" for p in problems_in(result.elements)]
        for data in result.raw:
            hit = self.others.search(data)
            if hit:
                self.crosstalk.append(
                    f"{action}: received another student's word {hit.group(1).decode()!r}"
                )
        self.progress = (progress_texts(result.elements) or [self.progress])[-1]
        if not result.fragment:
            self.elements = result.elements  # a full run; a fragment run keeps the page's

    async def reconnect(self) -> None:
        """As the frontend: poll health through the balancer, new websocket, rerun the page."""
        lost = time.perf_counter()
        lost_on = self.conn.served_by if self.conn else None
        deadline = lost + RECONNECT_GIVE_UP_S
        while True:
            try:
                await self.connect(resume=True)
                state = self.client_state()
                result = await self.conn.rerun(state)
                break
            except (Disconnected, OSError, TimeoutError) as err:
                if time.perf_counter() > deadline:
                    self.errors.append(
                        f"reconnect: gave up after {RECONNECT_GIVE_UP_S:.0f} s "
                        f"({type(err).__name__}: {err})"
                    )
                    raise Disconnected("gave up") from err
                await asyncio.sleep(RECONNECT_POLL_S)
            except Exception as err:  # a refused handshake (the balancer had no replica)
                if time.perf_counter() > deadline:
                    self.errors.append(f"reconnect: gave up ({type(err).__name__}: {err})")
                    raise Disconnected("gave up") from err
                await asyncio.sleep(RECONNECT_POLL_S)
        self._look("reconnect", result)
        served = time.perf_counter()
        self.waits["reconnect"].append(served - lost)
        self.history.append(f"reconnect[{self.query_string}]")
        self.reconnects.append(
            {
                "from": lost_on,
                "to": self.conn.served_by,
                "lost_at": self.clock.since(lost),
                "served_at": self.clock.since(served),
                "seconds": served - lost,
            }
        )
        if self.page_check is not None:  # the page came back with this student's input
            self.page_check(result)

    async def think(self, span: tuple[float, float]) -> None:
        """Read the page; a websocket that dies meanwhile is noticed at once (as a browser)."""
        wait = self.rng.uniform(*span)
        if self.conn.closed.is_set():
            await self.reconnect()
            return
        try:
            await asyncio.wait_for(self.conn.closed.wait(), wait)
        except TimeoutError:
            return
        await self.reconnect()

    # ---- what a student does ----

    def set_text(self, text: str) -> None:
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        found = widget(self.elements, "text_input", key="text")
        if found is None:
            raise LookupError(f"no text box on the {self.page} page")
        self.text = text
        self.widgets[found[1].id] = WidgetState(id=found[1].id, string_value=text)
        if found[1].query_param_key:  # a bound widget: the frontend writes it into the URL
            params = dict(urllib.parse.parse_qsl(self.query_string, keep_blank_values=True))
            params[found[1].query_param_key] = self.bound[found[1].query_param_key] = text
            self.query_string = urllib.parse.urlencode(params)

    def set_model(self, name: str) -> None:
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        found = widget(self.elements, "selectbox", key="model")
        if found is None:
            raise LookupError("no model picker in the sidebar")
        option = next((o for o in found[1].options if o.split(" ")[0].lower() == name), None)
        if option is None:
            raise LookupError(f"no {name} in the model picker")
        self.widgets[found[1].id] = WidgetState(id=found[1].id, string_value=option)

    def check_explorer(self, result: RunResult) -> None:
        tokens = heatmap_tokens(result.elements)
        if tokens is None:
            self.errors.append("explorer: no heatmap came")
        elif self.marker not in tokens:
            self.errors.append(
                f"explorer: heatmap without the own word {self.marker!r} "
                f"(it shows {' '.join(tokens[:8])} ..., after "
                f"{' > '.join(self.history[-3:])})"
            )

    def check_decoding(self, expect_step: int | None):
        # an encoder-decoder's shifted target, or what a decoder-only model reads
        prefixes = tuple(
            translate(key, "en", tokens="")
            for key in ("decoding.decoder_input", "decoding.decoder_input_lm")
        )

        def check(result: RunResult) -> None:
            lines = [b for b in markdown_bodies(result.elements) if b.startswith(prefixes)]
            if not lines:
                self.errors.append("decoding: no decoder input shown")
                return
            shown = re.findall(r"`\s*([^`]*?)\s*`", lines[-1])
            run = [t for t in shown if t.isdigit()][: len(self.digits)]
            if " ".join(run) in self.others_digits:
                j = self.others_digits[" ".join(run)]
                self.crosstalk.append(f"decoding shows student {j}'s digits {run}")
            elif run != self.digits:
                self.errors.append(
                    f"decoding shows {run}, typed {self.digits} (after "
                    f"{' > '.join(self.history[-4:])})"
                )
            if expect_step is not None:
                want = translate("decoding.position", "en", step=expect_step, total="")
                if not any(p.startswith(want) for p in progress_texts(result.elements)):
                    self.errors.append(
                        f"step: expected {want!r}, got {progress_texts(result.elements)}"
                    )

        return check

    def current_step(self) -> tuple[int, int]:
        pattern = re.escape(translate("decoding.position", "en", step="§", total="¶"))
        pattern = pattern.replace("§", r"(\d+)").replace("¶", r"(\d+)")
        m = re.fullmatch(pattern, self.progress)
        if m is None:
            raise LookupError(f"no step counter on the decoding page ({self.progress!r})")
        return int(m.group(1)), int(m.group(2))

    async def navigate(self, page: str) -> None:
        self.page, self.query_string, self.widgets, self.bound = page, "", {}, {}
        self.page_check = None
        state = self.client_state(page_hash=self.conn.pages.get(page, ""))
        await self.act("navigate", state)

    async def press(self, label: str, expect_step: int) -> None:
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        found = widget(self.elements, "button", label=label)
        if found is None:
            raise LookupError(f"no {label} button")
        fragment_id, button = found
        trigger = WidgetState(id=button.id, trigger_value=True)
        state = self.client_state(fragment_id=fragment_id, trigger=trigger)
        await self.act("step", state, self.check_decoding(expect_step))

    async def run(self, stop_at: float) -> None:
        step_label = translate("decoding.step", "en")
        reset_label = translate("decoding.reset", "en")
        try:
            self.text = sentence(self.marker, self.rng)
            self.query_string = urllib.parse.urlencode({"model": "minilm", "text": self.text})
            await self.connect()
            await self.act("open", self.client_state(), self.check_explorer)
            while time.perf_counter() < stop_at:
                for _ in range(RETYPES):
                    await self.think(THINK_S)
                    self.set_text(sentence(self.marker, self.rng))
                    await self.act("explorer", self.client_state(), self.check_explorer)
                if time.perf_counter() >= stop_at:
                    break
                await self.think(THINK_S)
                await self.navigate("decoding")
                self.set_model("sort")
                await self.act("switch", self.client_state())
                await self.think(THINK_S)
                self.set_text(" ".join(self.digits))
                await self.act("decoding_text", self.client_state(), self.check_decoding(None))
                step, total = self.current_step()
                for _ in range(STEPS):
                    await self.think(STEP_THINK_S)
                    if step >= total:
                        await self.press(reset_label, 0)
                    else:
                        await self.press(step_label, step + 1)
                    step, total = self.current_step()  # after a reconnect: the URL's step
                if time.perf_counter() >= stop_at:
                    break
                await self.think(THINK_S)
                await self.navigate("explorer")
                self.set_model("minilm")
                await self.act("switch", self.client_state())
        except Disconnected as err:
            self.errors.append(f"disconnected for good: {err}")
        except Exception as err:  # a broken page is a result, not a crash of the class
            self.errors.append(
                f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            )
        finally:
            if self.conn is not None:
                await self.conn.close()


async def _class(
    base: str,
    n: int,
    duration_s: float,
    seed: int,
    arrival_s: float,
    kill=None,
    kill_after_s: float | None = None,
) -> tuple[list[Student], dict]:
    clock = Clock()
    students = [Student(i, base, MARKERS, seed, clock) for i in range(n)]
    stop_at = clock.start + duration_s
    failover: dict = {}

    async def arrive(s: Student) -> None:
        await asyncio.sleep(s.i * arrival_s)
        await s.run(stop_at)

    async def killer() -> None:
        await asyncio.sleep(kill_after_s)
        # On a thread: the students go on meanwhile (a kill() may wait for its moment, and
        # the replica's death takes a moment too).
        failover["victim"], failover["pid"] = await asyncio.to_thread(kill)
        failover["killed_at"] = clock.since(time.perf_counter())

    tasks = [asyncio.create_task(arrive(s)) for s in students]
    if kill is not None and kill_after_s is not None:
        tasks.append(asyncio.create_task(killer()))
    await asyncio.gather(*tasks)
    return students, failover


def run_class(
    base_url: str,
    students: int = 30,
    duration_s: float = 60.0,
    seed: int = 0,
    arrival_s: float = 0.2,
    kill=None,
    kill_after_s: float | None = None,
) -> dict:
    """Drive a class against ``base_url`` (the balancer); ``kill()`` -> (replica, pid) ends one
    replica ``kill_after_s`` into the class. Waits in seconds."""
    if not 1 <= students <= MAX_STUDENTS:
        raise ValueError(f"1 to {MAX_STUDENTS} students (one marker word each)")
    started = time.perf_counter()
    load_before = [round(x, 2) for x in os.getloadavg()]
    people, failover = run_async(
        _class(base_url.rstrip("/"), students, duration_s, seed, arrival_s, kill, kill_after_s)
    )
    out = {
        "students": students,
        "duration_s": duration_s,
        "wall_s": time.perf_counter() - started,
        "load_average_before": load_before,
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "errors": [f"student {s.i}: {e}" for s in people for e in s.errors],
        "crosstalk": [f"student {s.i}: {c}" for s in people for c in s.crosstalk],
        "replicas": {},
        "served_by": [s.replicas for s in people],  # per student, every replica in order
        "actions": {a: summary([w for s in people for w in s.waits[a]]) for a in ACTIONS},
    }
    for s in people:
        if s.replicas:
            out["replicas"][s.replicas[0]] = out["replicas"].get(s.replicas[0], 0) + 1
    if failover:
        victim = failover["victim"]
        hit = [s for s in people if s.replicas and s.replicas[0] == victim]
        spared = [s for s in people if s.replicas and s.replicas[0] != victim]
        served = [r["served_at"] - failover["killed_at"] for s in hit for r in s.reconnects[:1]]
        failover.update(
            {
                "students_on_victim": len(hit),
                "reconnected": sum(1 for s in hit if s.reconnects),
                "kill_to_served": summary(served),
                "detect_to_served": summary([r["seconds"] for s in hit for r in s.reconnects[:1]]),
                "moved_to": sorted({r["to"] for s in hit for r in s.reconnects if r["to"]}),
                "errors_on_victim": [f"student {s.i}: {e}" for s in hit for e in s.errors],
                "errors_elsewhere": [f"student {s.i}: {e}" for s in spared for e in s.errors],
                "reconnects_elsewhere": sum(len(s.reconnects) for s in spared),
            }
        )
        out["failover"] = failover
    return out


def replica_killer(lab, name: str = "r1"):
    """kill() for run_class: SIGKILL one replica of a deploy.serve cluster (classcore)."""
    return lambda: (name, kill_replica(lab, name))


def warm(base_url: str) -> None:
    """The teacher opens the lab before class on every replica: MiniLM and sort loaded there.
    Cookie-less opens go round robin, so a few of them reach every replica."""
    people = [Student(MAX_STUDENTS + k, base_url, MARKERS, 99, Clock()) for k in range(WARMERS)]

    async def one(s: Student) -> None:
        await s.run(0)  # opens the explorer only
        s.page, s.query_string, s.widgets = "decoding", "model=sort&text=3+1+2", {}
        await s.connect()
        await s.act("open", s.client_state())
        await s.conn.close()

    async def all_of_them() -> None:
        for s in people:  # one after another: each lands on the next replica
            await one(s)

    run_async(all_of_them())
    errors = [e for s in people for e in s.errors]
    if errors:
        raise RuntimeError(f"warming the replicas failed: {errors[:3]}")


def simulate(
    replicas: int,
    students: int,
    duration_s: float,
    kill_after_s: float | None = None,
    seed: int = 0,
    log_dir=None,
) -> dict:
    """Start ``replicas`` behind HAProxy (deploy.serve), warm them, let their start-up work
    finish, run the class, stop."""
    with deployment(log_dir, replicas, postgres=False) as (lab, _):
        warm(lab.url)
        settled_s = settle([r.process.pid for r in lab.replicas])
        kill = replica_killer(lab) if kill_after_s is not None else None
        out = run_class(lab.url, students, duration_s, seed, kill=kill, kill_after_s=kill_after_s)
        out["replica_count"] = replicas
        out["ready_s"] = lab.ready_s
        out["settled_s"] = settled_s
        return out


def describe(r: dict) -> str:
    lines = [
        f"{r['students']} students, {r.get('replica_count', '?')} replica(s), "
        f"{r['duration_s']:.0f} s; first replicas {r['replicas']}; load average "
        f"{r['load_average_before']} -> {r['load_average_after']}"
    ]
    for a, s in r["actions"].items():
        if s["n"]:
            lines.append(
                f"  {a:14s} n={s['n']:4d}  p50 {s['p50_s']:.2f} s  p95 {s['p95_s']:.2f} s"
                f"  max {s['max_s']:.2f} s"
            )
    lines.append(f"  errors: {len(r['errors'])}, cross-talk: {len(r['crosstalk'])}")
    lines += [f"    {x}" for x in (r["errors"] + r["crosstalk"])[:20]]
    f = r.get("failover")
    if f:
        k = f["kill_to_served"]
        lines.append(
            f"  failover: killed {f['victim']} at {f['killed_at']:.1f} s; "
            f"{f['reconnected']}/{f['students_on_victim']} of its students served again "
            f"(on {f['moved_to']}), kill -> served max {k.get('max_s', float('nan')):.2f} s; "
            f"errors on it {len(f['errors_on_victim'])}, elsewhere {len(f['errors_elsewhere'])}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of class")
    parser.add_argument(
        "--kill-after",
        type=float,
        default=None,
        help="SIGKILL replica r1 this many seconds into the class",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--url", default=None, help="a running balancer; default: start one")
    parser.add_argument("--json", default=None, help="write the result here")
    parser.add_argument(
        "--class-store",
        action="store_true",
        help="students who join a class and answer it, through the class store "
        "(bench.classroomsim; its options follow)",
    )
    args, rest = parser.parse_known_args(argv)
    if args.class_store:
        from bench import classroomsim

        keep = ["--students", str(args.students), "--replicas", str(args.replicas)]
        keep += ["--seed", str(args.seed)]
        if args.kill_after is not None:
            keep += ["--kill-after", str(args.kill_after)]
        if args.json:
            keep += ["--json", args.json]
        return classroomsim.main(keep + rest)
    args = parser.parse_args(argv)
    if args.url:
        if args.kill_after is not None:
            parser.error("--kill-after needs the replicas this command starts (no --url)")
        result = run_class(args.url, args.students, args.duration, args.seed)
    else:
        result = simulate(args.replicas, args.students, args.duration, args.kill_after, args.seed)
    print(describe(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main()
