"""The pieces of `make serve` and bench.classsim that need no running server.

The balancer itself runs in tests/e2e/test_balancer.py; the class figures come from
`make bench` (bench.benchreport), never from a timed test.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from bench import benchreport, classcore, classsim
from deploy.serve import haproxy_path, render_config

ROOT = Path(__file__).resolve().parents[2]


def test_markers_are_single_minilm_tokens_that_the_app_never_shows():
    """A marker seen by another student is cross-talk only if the app itself never says it."""
    from model import load

    lm = load("minilm", "cpu")
    assert len(set(classcore.MARKERS)) == len(classcore.MARKERS)
    assert classcore.MAX_STUDENTS >= 60
    shipped = " ".join(
        p.read_text(encoding="utf-8").lower()
        for p in [*ROOT.glob("assets/i18n/*.json"), ROOT / "assets/examples.json"]
    )
    for word in classcore.MARKERS:
        assert len(word) >= 5, word
        assert [t for t in lm.encode(word).tokens if t not in ("[CLS]", "[SEP]")] == [word]
        assert not re.search(rf"\b{word}\b", shipped), word


def test_a_student_sentence_is_about_twenty_tokens_and_carries_its_marker():
    import random

    from model import load

    lm = load("minilm", "cpu")
    rng = random.Random(0)
    for marker in classcore.MARKERS[:5]:
        tokens = lm.encode(classcore.sentence(marker, rng)).tokens
        assert 18 <= len(tokens) <= 24
        assert marker in tokens
    digits = [classcore.digits_for(i, random.Random(i)) for i in range(classcore.MAX_STUDENTS)]
    assert len({" ".join(d) for d in digits}) == len(digits)  # nobody types another's digits


def test_percentile_and_summary():
    waits = [0.1 * k for k in range(1, 21)]
    s = classcore.summary(waits)
    assert s["n"] == 20 and s["p50_s"] == pytest.approx(1.0) and s["p95_s"] == pytest.approx(1.9)
    assert s["max_s"] == pytest.approx(2.0)
    assert classcore.summary([]) == {"n": 0}


def test_widget_lookup_and_heatmap_tokens_read_streamlit_elements():
    from streamlit.proto.Element_pb2 import Element

    box, chart, step = Element(), Element(), Element()
    box.text_input.id = "$$ID-abc-text"
    box.text_input.label = "Sentence"
    chart.plotly_chart.id = "$$ID-def-heatmap_chart"
    chart.plotly_chart.spec = json.dumps({"layout": {"xaxis": {"ticktext": ["[CLS]", "zebra"]}}})
    step.button.id = "$$ID-123-None"
    step.button.label = "Step"
    elements = [("", box), ("", chart), ("frag1", step)]
    assert classsim.widget(elements, "text_input", key="text")[1].id == "$$ID-abc-text"
    assert classsim.widget(elements, "text_input", key="other") is None
    assert classsim.widget(elements, "button", label="Step") == ("frag1", step.button)
    assert classsim.heatmap_tokens(elements) == ["[CLS]", "zebra"]
    assert classsim.heatmap_tokens([("", box)]) is None


def test_haproxy_config_is_cookie_sticky_with_websockets_and_health_checks(tmp_path):
    text = render_config(8501, [8602, 8603, 8604], tmp_path / "haproxy.sock", bind="127.0.0.1")
    assert "bind 127.0.0.1:8501" in text
    assert re.findall(r"server (r\d) 127\.0\.0\.1:(\d+) cookie (r\d)", text) == [
        ("r1", "8602", "r1"),
        ("r2", "8603", "r2"),
        ("r3", "8604", "r3"),
    ]
    assert "balance roundrobin" in text and "cookie SERVERID insert indirect nocache" in text
    assert "timeout tunnel" in text and "option redispatch" in text
    assert "uri /_stcore/health" in text and "inter 1s fall 2" in text
    # every placeholder filled ("{ ssl_fc }" is HAProxy's own condition, not ours)
    assert not re.search(r"\{[a-z_]+\}", text)
    if haproxy_path() is None:
        pytest.skip("HAProxy is not installed: its own check of the file was skipped")
    path = tmp_path / "haproxy.cfg"
    path.write_text(text)
    done = subprocess.run([haproxy_path(), "-c", "-f", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr + done.stdout


def _run(replicas: int, explorer_p95: float) -> dict:
    actions = {a: {"n": 0} for a in classsim.ACTIONS}
    actions["explorer"] = {"n": 3, "p50_s": 0.2, "p95_s": explorer_p95, "max_s": 1.0}
    return {
        "replica_count": replicas,
        "students": 30,
        "errors": [],
        "crosstalk": [],
        "replicas": {"r1": 30 // replicas},
        "actions": actions,
        "load_average_before": [1.0, 1.0, 1.0],
        "load_average_after": [2.0, 1.0, 1.0],
    }


def test_the_class_section_sits_beside_the_rest_of_the_report():
    section = benchreport.class_markdown(
        {"students": 30, "duration_s": 60, "runs": [_run(1, 0.9), _run(2, 0.4)]}
    )
    assert "1 replica(s): n, p50 / p95 / max | 2 replica(s)" in section
    assert "| re-type a sentence → explorer re-rendered | 3, 0.20 / 0.90 / 1.00 s | " in section
    assert "| errors, cross-talk | 0, 0 | 0, 0 |" in section
    report = "# Bench\n\n## Memory\n\nsome\n"
    once = benchreport.replace_class_section(report, section)
    assert once.startswith(report) and once.count(benchreport.CLASS_TITLE) == 1
    twice = benchreport.replace_class_section(once + "\n## Later\n\nkept\n", section)
    assert twice.count(benchreport.CLASS_TITLE) == 1 and twice.endswith("## Later\n\nkept\n")
    skipped = benchreport.class_markdown({"skipped": "HAProxy is not installed"})
    assert "Not measured: HAProxy is not installed." in skipped


def test_the_browser_class_run_alone_replaces_only_its_section_and_keeps_the_counts(
    tmp_path, monkeypatch
):
    counts = {"presses": 30, "stored": 27, "told_not_saved": 3, "lost": 0, "duplicates": 0}
    run = {**counts, "students": 10, "seconds": 412.5, "problems": []}
    monkeypatch.setattr(benchreport, "class_chaos", lambda students: {**run, "asked": students})
    report, data = tmp_path / "benchmarks.md", tmp_path / "benchmarks.json"
    report.write_text("# Bench\n\n## Memory\n\nsome\n", encoding="utf-8")
    data.write_text('{"memory": {"rss": 1}}', encoding="utf-8")
    for _ in range(2):  # run again: the section is replaced, not added twice
        benchreport.main(["--chaos-only", "--report", str(report), "--json", str(data)])
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# Bench\n\n## Memory\n\nsome\n")
    assert text.count(benchreport.CHAOS_TITLE) == 1
    assert "| 30 | 27 | 3 | 0 | 0 |" in text and "10 students in Chromium" in text
    assert "--chaos-only" in text and "load average" in text
    stored = json.loads(data.read_text(encoding="utf-8"))
    assert stored["memory"] == {"rss": 1}
    assert stored["class_chaos"]["asked"] == 10 and stored["class_chaos"]["lost"] == 0


def test_the_class_section_says_which_targets_the_two_replica_run_met():
    fast, slow = _run(2, 0.4), _run(2, 2.0)
    slow["errors"] = ["student 3: explorer: no heatmap came"]
    met = benchreport.class_targets({"runs": [_run(1, 3.0), fast]})
    assert met[0] == "- 2 replicas, explorer re-render p95: 0.40 s (target ≤ 1.5 s: met)"
    assert met[1].endswith("(target 0, 0: met)")
    missed = benchreport.class_targets({"runs": [slow]})
    assert missed[0].endswith("(target ≤ 1.5 s: NOT met)")
    assert missed[1] == "- 2 replicas, errors and cross-talk: 1, 0 (target 0, 0: NOT met)"
    failover = {
        "students_on_victim": 2,
        "reconnected": 2,
        "errors_on_victim": [],
        "errors_elsewhere": [],
        "kill_to_served": classcore.summary([3.0, 12.0]),
    }
    late = benchreport.class_targets({"failover": {"failover": failover}})
    assert late == [
        "- replica killed: every student of it served again, without an error, the "
        "last 12.0 s after the kill; no error among the other replica's students "
        "(target ≤ 10 s: NOT met)"
    ]
    failover["kill_to_served"] = classcore.summary([3.0, 4.0])
    assert benchreport.class_targets({"failover": {"failover": failover}})[0].endswith(": met)")


def test_server_ports_never_come_from_the_range_outgoing_connections_use():
    """A health check connecting to an ephemeral port before its server listens can get that
    port as its own source and read its own request back (parallel tests failed on it)."""
    from deploy.ports import REPLICA_PORT_OFFSET, ephemeral_ports, free_port, port_in_use

    low = ephemeral_ports()[0]
    for _ in range(50):
        port = free_port()
        assert port >= 1024 and port + REPLICA_PORT_OFFSET + 8 < low
        assert not port_in_use(port)


def test_a_port_that_answers_with_something_else_is_not_healthy():
    import socket
    import threading

    from deploy.serve import healthy

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def echo_the_request():  # what a TCP self-connect does: the request comes back
            conn, _ = server.accept()
            with conn:
                conn.sendall(conn.recv(1024))

        threading.Thread(target=echo_the_request, daemon=True).start()
        assert healthy(f"http://127.0.0.1:{server.getsockname()[1]}", timeout=5) is False


def test_make_stop_ends_only_the_children_its_pids_json_names(tmp_path):
    """A pids.json left by a `make serve` that died (a crash, a reboot) names pids that may
    since belong to the machine's own HAProxy or to another checkout's server: `make stop`
    ends a recorded pid only if it still runs this run's HAProxy config or replica port."""
    import signal
    import sys

    from deploy.serve import _stop_serve

    def sleeper(*words: str) -> subprocess.Popen:  # a process whose command line says words
        code = "import time; time.sleep(60)"
        return subprocess.Popen([sys.executable, "-c", code, *words], start_new_session=True)

    config = tmp_path / "haproxy.cfg"
    ours = {
        "haproxy": sleeper("haproxy", "-db", "-f", str(config)),
        "r1": sleeper("--server.port", "23101"),
    }
    strangers = [
        sleeper("haproxy", "-db", "-f", "/etc/haproxy/haproxy.cfg"),  # the system's HAProxy
        sleeper("--server.port", "8501"),  # somebody's `streamlit run`
    ]
    (tmp_path / "pids.json").write_text(
        json.dumps(
            {
                "serve": None,
                "haproxy": strangers[0].pid,  # a stale pid, now another HAProxy's
                "replicas": {"r1": ours["r1"].pid, "r2": strangers[1].pid},
                "haproxy_config": str(config),
                "replica_ports": {"r1": 23101, "r2": 23102},
            }
        )
    )
    try:
        assert _stop_serve(tmp_path, timeout=5) == [ours["r1"].pid]
        assert ours["r1"].wait(timeout=10) == -signal.SIGTERM
        assert all(p.poll() is None for p in strangers), "make stop ended a stranger"
        assert not (tmp_path / "pids.json").exists()
        # Its own HAProxy is recognised by the config path it runs.
        (tmp_path / "pids.json").write_text(
            json.dumps({"haproxy": ours["haproxy"].pid, "haproxy_config": str(config)})
        )
        assert _stop_serve(tmp_path, timeout=5) == [ours["haproxy"].pid]
        assert ours["haproxy"].wait(timeout=10) == -signal.SIGTERM
    finally:
        for p in [*ours.values(), *strangers]:
            p.kill()
            p.wait()
