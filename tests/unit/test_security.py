"""Static guards over the source: no remote code, no pickle, no user text as HTML, safe server config.

These read the code rather than run it, so a future change that opens one of these doors
fails here even when no test happens to exercise the new path.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted(
    p for folder in ("model", "ui", "viz", "pages") for p in (ROOT / folder).rglob("*.py")
) + [ROOT / "app.py"]
# The only HTML the app hands to the browser as a document: our own templates, which
# escape every token before it lands in the page (viz/headview.py).
OUR_HTML = {"head_view_html", "highlighted_text_html"}
# The only st.html: our own style sheet (ui/chrome.py), built from catalog text, no user text.
# Our own templates, each escaping what it embeds: the chrome style sheet and the
# accessibility script (ui.a11y), whose JSON config escapes "<" and ">"; and the chart-code
# warm-up (ui.warm), which embeds only a file name Streamlit ships, JSON-quoted; and the
# live region's announcement (ui.a11y.announce_html), JSON with "<" and ">" escaped; and
# the class page's draft keeper (ui.classroom.draft_html), the same escaped JSON.
OUR_CSS = {
    "chrome_css",
    "a11y_html",
    "warm_html",
    "announce_html",
    "resend_html",
    "press_id_css",
    "cookie_html",
    "draft_html",
    # the teacher's session (ui.classroom): each embeds a ticket, a class code or a link as
    # JSON with "<" and ">" escaped
    "session_cookie_html",
    "sign_out_html",
    "go_to_html",
}


def trees():
    for path in SOURCES:
        yield path, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def name_of(func: ast.expr) -> str:
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def keyword(call: ast.Call, name: str):
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{node.lineno}"


def test_the_guards_read_the_whole_app():
    assert len(SOURCES) > 30 and ROOT / "pages" / "explorer.py" in SOURCES


def test_trust_remote_code_is_never_switched_on():
    for path, tree in trees():
        for call in calls(tree):
            value = keyword(call, "trust_remote_code")
            if value is not None:
                assert isinstance(value, ast.Constant) and value.value is False, where(path, call)


def test_every_from_pretrained_is_local_and_without_remote_code():
    found = 0
    for path, tree in trees():
        for call in calls(tree):
            if name_of(call.func) != "from_pretrained":
                continue
            found += 1
            for name, wanted in (("trust_remote_code", False), ("local_files_only", True)):
                value = keyword(call, name)
                assert isinstance(value, ast.Constant) and value.value is wanted, (
                    f"{where(path, call)}: {name}={wanted} missing"
                )
    assert found >= 3  # tokenizer, config, model: the guard is looking at real calls


def test_nothing_is_ever_unpickled():
    for path, tree in trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                modules = [a.name for a in node.names] + [getattr(node, "module", "") or ""]
                assert not {"pickle", "dill", "joblib", "cloudpickle"} & set(modules), where(
                    path, node
                )
        for call in calls(tree):
            func = ast.unparse(call.func)
            assert func not in ("torch.load", "np.load", "numpy.load"), where(path, call)
            value = keyword(call, "use_safetensors")
            if value is not None:
                assert isinstance(value, ast.Constant) and value.value is True, where(path, call)


def test_no_text_is_rendered_as_raw_html():
    for path, tree in trees():
        for call in calls(tree):
            value = keyword(call, "unsafe_allow_html")
            assert value is None or (isinstance(value, ast.Constant) and value.value is False), (
                where(path, call)
            )
            func = ast.unparse(call.func)
            ours = bool(call.args) and isinstance(call.args[0], ast.Call)
            ours = ours and name_of(call.args[0].func) in OUR_CSS
            assert ours or func not in ("st.html", "components.html", "st.components.v1.html"), (
                where(path, call)
            )


def test_a_remembered_key_cannot_close_its_cookie_script():
    from ui.classroom import cookie_html

    html = cookie_html("lab_student_X", "</script><b>")
    assert html.count("</script>") == 1 and "<b>" not in html


def test_a_ticket_a_code_or_a_link_cannot_close_the_session_scripts():
    from ui.classroom import go_to_html, session_cookie_html, sign_out_html

    for html in (
        session_cookie_html("</script><b>"),
        sign_out_html("</script><b>"),
        go_to_html("/lab/teacher?class=</script><b>"),
    ):
        assert html.count("</script>") == 1 and "<b>" not in html


def test_a_stored_answer_cannot_close_the_draft_script():
    from ui.classroom import draft_html

    stored = {"answer_tokens": "</script><img src=x onerror=alert(1)>"}
    html = draft_html("ABC123", "k", 0, "class_exercise", stored, 1, "n")
    assert html.count("</script>") == 1 and "<img" not in html


def test_iframes_show_only_our_own_escaping_templates():
    seen = 0
    for path, tree in trees():
        for call in calls(tree):
            if ast.unparse(call.func) != "st.iframe":
                continue
            seen += 1
            (source,) = call.args[:1]
            assert isinstance(source, ast.Call) and name_of(source.func) in OUR_HTML, where(
                path, call
            )
    assert seen >= 1


def test_user_text_reaches_messages_only_through_code_spans():
    """Pages format the reader's sentence into markdown with code_span, never bare."""
    bare = re.compile(
        r"st\.(markdown|caption|warning|info|error|success|write)\(\s*f?[\"'].*\{text\}"
    )
    for path in SOURCES:
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            assert not bare.search(line), f"{path.relative_to(ROOT)}:{lineno}"


@pytest.fixture(scope="module")
def streamlit_config() -> dict:
    return tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))


def test_server_config_protects_forms_sends_nothing_and_takes_only_small_uploads(
    streamlit_config,
):
    server, browser = streamlit_config["server"], streamlit_config["browser"]
    assert server["enableXsrfProtection"] is True
    assert server.get("enableCORS", True) is True  # XSRF protection needs CORS protection on
    assert browser["gatherUsageStats"] is False
    assert 1 <= server["maxUploadSize"] <= 20  # megabytes
    assert server.get("maxMessageSize", 200) <= 200
    assert server["headless"] is True


def test_streamlit_reads_the_same_config_we_check():
    """The options above are real Streamlit option names with the values we wrote."""
    from streamlit import config

    config.get_config_options(force_reparse=True)
    assert config.get_option("server.enableXsrfProtection") is True
    assert config.get_option("browser.gatherUsageStats") is False
    assert config.get_option("server.maxUploadSize") <= 20


def test_the_accessibility_script_cannot_be_closed_by_a_label():
    from ui.a11y import a11y_html

    hostile = "</script><script>alert(1)</script>"
    html = a11y_html("ko", {"upload": hostile, "formula": hostile, "code": "x", "table": "y"})
    assert html.count("</script>") == 1 and html.endswith("</script>")
    assert "alert(1)" in html  # kept as text, inside the JSON string
