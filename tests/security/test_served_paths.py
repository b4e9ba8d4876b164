"""Served means locked down (issue 46): on a class server nothing a visitor sends names a
server path. Every way a path can come in is tried: each ``?model=`` form (a path, ``..``,
an absolute path, ``folder:`` and ``gguf:`` names that leave the root, a link out of the root,
a folder holding a file linked out of the root) and the sidebar's typed-path box. None opens,
and no message names or lists anything of the server; the person at their own machine keeps
the typed box. Loaded models stay under a byte budget, the least recently used said gone."""

from __future__ import annotations

import logging
import os

import pytest
from streamlit.testing.v1 import AppTest

import ui.models
from model.runtime.folders import FolderProblem, folder_in_root, in_root, root_folders
from tests.app.helpers import APP
from tests.hf_folders import build_decoder_folder
from ui.i18n import translate
from ui.model_shelf import ModelShelf
from ui.served import SERVED_ENV, served_by

SECRET = "the-secret-folder"  # outside the root: no page may ever name it
TYPED = translate("model.name.folder", "en")  # the picker's "a folder by its path" choice


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    """A models root with a sound folder, a link out of the root and a folder whose weights
    file is a link to a file outside; beside it, the secret folder those links point at."""
    base = tmp_path_factory.mktemp("served")
    root, secret = base / "models", base / SECRET
    build_decoder_folder("llama", root / "tiny")
    build_decoder_folder("llama", secret)
    os.symlink(secret, root / "escape")
    linked = build_decoder_folder("llama", root / "linked")
    weights = next(linked.glob("*.safetensors"))
    weights.unlink()
    os.symlink(next(secret.glob("*.safetensors")), weights)
    return root, secret


@pytest.fixture
def root(places, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MODELS", str(places[0]))
    return places[0]


@pytest.fixture
def served(root, monkeypatch):
    """This process as a `make serve` replica sees itself."""
    monkeypatch.setenv(SERVED_ENV, "1")


@pytest.fixture(autouse=True)
def no_missing_translations(caplog):
    caplog.set_level(logging.WARNING, logger="ui.i18n")
    yield
    assert [r.getMessage() for r in caplog.get_records("call") if r.name == "ui.i18n"] == []


def page(model: str | None = None, lang: str = "en", **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=180)
    at.switch_page("pages/explorer.py")
    at.query_params.update({"lang": lang, **({"model": model} if model is not None else {})})
    for key, value in state.items():
        at.session_state[key] = value
    return at.run()


def everything_said(at: AppTest) -> str:
    """Every text the page and its sidebar show, and the picker's options."""
    parts = []
    for kind in ("error", "warning", "info", "caption", "markdown", "toast", "code", "exception"):
        parts += [str(getattr(e, "value", "")) for e in getattr(at, kind)]
        parts += [str(getattr(e, "value", "")) for e in getattr(at.sidebar, kind, [])]
    parts += [str(o) for o in at.selectbox(key="model").options]
    return "\n".join(parts)


# ---- the rule ----


@pytest.mark.parametrize(
    ("flag", "address", "real_server", "expected"),
    [
        ("1", "127.0.0.1", True, True),  # a make serve replica: loopback, behind HAProxy
        (None, "0.0.0.0", True, True),
        (None, "192.168.1.20", True, True),
        (None, "::", True, True),
        (None, None, True, True),  # streamlit with no address listens everywhere
        (None, "127.0.0.1", True, False),  # make run
        (None, "localhost", True, False),
        (None, "::1", True, False),
        (None, "[::1]", True, False),
        ("0", "127.0.0.1", True, False),
        (None, None, False, False),  # AppTest, a notebook: no server
    ],
)
def test_served_is_the_replicas_flag_or_any_address_but_loopback(
    flag, address, real_server, expected
):
    assert served_by(flag, address, real_server) is expected


def test_the_replicas_read_the_flag_deploy_serve_sets():
    from deploy.ports import SERVED_ENV as given

    assert given == SERVED_ENV


@pytest.mark.parametrize("name", ["../x", "a/../../x", "/etc", "~/x", "C:x", "gguf:../x", ""])
def test_a_name_in_the_root_never_leaves_it(root, name):
    with pytest.raises(FolderProblem) as problem:
        in_root(name, root)
    assert problem.value.key == "outside_root"


def test_links_out_of_the_root_are_refused_folders_and_files_alike(root, places):
    assert root_folders(root) == ["tiny"]
    for name in ("escape", "linked"):
        with pytest.raises(FolderProblem) as problem:
            folder_in_root(name, root)
        assert problem.value.key == "outside_root"
        assert str(places[1]) not in str(problem.value), "where a link leads is not said"


@pytest.mark.parametrize("name", ["/etc", "../models", "assets", "~/x", "gguf:../x", "a/b"])
def test_served_the_one_door_to_every_load_refuses_a_path(served, name):
    with pytest.raises(FolderProblem):
        ui.models.model_path(name)


def test_served_the_one_door_lets_through_what_the_picker_lists(served, root):
    assert ui.models.model_path("en2ko") == "en2ko"
    assert ui.models.model_path("folder:tiny") == str(root / "tiny")


# ---- through the page ----


@pytest.mark.parametrize(
    "value",
    [
        "../../etc",
        "/etc",
        "/etc/passwd",
        "~/.ssh",
        "folder:../../etc",
        "folder:/etc",
        "folder:escape",
        "folder:linked",
        f"folder:../{SECRET}",
        "gguf:../x.gguf",
        "gguf:/etc/passwd",
        "C:\\Windows",
    ],
)
def test_served_no_model_link_opens_or_names_a_place_outside_the_root(served, places, value):
    at = page(value)
    assert not at.exception
    said = everything_said(at)
    assert translate("model.problem.outside_root_served", "en") in [e.value for e in at.error]
    for leak in (SECRET, "/etc", "passwd", str(places[0]), os.path.expanduser("~")):
        assert leak not in said, f"{leak!r} shown for ?model={value}"
    assert at.selectbox(key="model").value != value


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_served_the_refusal_is_said_in_the_readers_language(served, lang):
    at = page("folder:escape", lang)
    assert [e.value for e in at.error] == [translate("model.problem.outside_root_served", lang)]
    assert translate("model.detail_in_log", lang) in [c.value for c in at.caption]


def test_served_the_picker_lists_the_root_and_no_typed_path(served):
    at = page()
    options = at.selectbox(key="model").options
    assert TYPED not in options
    assert any("tiny" in o for o in options)
    assert not any("escape" in o or "linked" in o for o in options)
    assert not [w for w in at.sidebar.text_input if w.key == "model_folder"]


def test_served_a_typed_path_in_the_session_is_never_read(served):
    """Even with the widget's state forged to the typed-path choice and a path in it."""
    at = page(model=ui.models.FOLDER, model_folder="/etc")
    assert not at.exception
    assert not [w for w in at.sidebar.text_input if w.key == "model_folder"]
    assert "/etc" not in everything_said(at)
    assert at.session_state["model"] == ui.models.default_model("en")


def test_on_the_owners_own_machine_the_typed_box_stays(root, monkeypatch):
    monkeypatch.delenv(SERVED_ENV, raising=False)
    at = page(model=ui.models.FOLDER)
    assert TYPED in at.selectbox(key="model").options
    assert [w for w in at.sidebar.text_input if w.key == "model_folder"]


# ---- the models' byte budget ----


def test_the_least_recently_used_model_goes_first_and_the_newest_always_stays():
    shelf = ModelShelf(budget=100)
    sizes = {"a": 40, "b": 40, "c": 40, "huge": 500}
    get = lambda k: shelf.get_or_load(k, lambda: k.upper(), lambda v: sizes[v.lower()])  # noqa: E731
    assert get("a") == ("A", []) and get("b") == ("B", [])
    assert get("a") == ("A", [])  # a hit: a is now the most recent
    assert get("c") == ("C", ["b"])
    assert shelf.kept_keys() == ["a", "c"] and shelf.total == 80
    assert get("huge") == ("HUGE", ["a", "c"])  # in use: kept, alone, over the budget
    assert shelf.kept_keys() == ["huge"]


@pytest.mark.parametrize("lang", ["en", "ko"])
def test_a_model_pushed_out_of_the_budget_is_said(served, monkeypatch, lang):
    monkeypatch.setattr(ui.models, "MODELS", ModelShelf(budget=1))
    at = page("en2ko", lang)
    assert not at.toast
    at.selectbox(key="model").set_value("reverse").run()
    label = translate("model.name.en2ko", lang)
    said = [t.value for t in at.toast]
    assert said == [translate("model.unloaded", lang, names=label, budget=0)]
    assert ui.models.MODELS.kept_keys() == [("reverse", "auto")]


def test_make_run_listens_on_localhost_unless_told_an_address():
    """`make run` is the owner's own lab (the typed box stays) only while others cannot
    reach it; an address given to it serves the app, locked down."""
    from deploy.serve import run_command

    def address(command):
        return command[command.index("--server.address") + 1]

    assert address(run_command(8501)) == "127.0.0.1"
    shared = run_command(8501, extra=["--server.address", "0.0.0.0"])
    assert shared.count("--server.address") == 1 and address(shared) == "0.0.0.0"
    assert served_by(None, address(shared), True) and not served_by(None, "127.0.0.1", True)


def test_every_replica_is_told_it_is_served_and_believes_no_forwarded_header(tmp_path, monkeypatch):
    import deploy.serve
    from deploy.ports import FORWARDED_ALLOW_IPS_ENV, TRUST_NO_PROXY

    seen = {}

    def recorder(command, env, **kwargs):  # the replica's process, not started
        seen.update(env)

    monkeypatch.setattr(deploy.serve.subprocess, "Popen", recorder)
    deploy.serve.Replica("r1", 1, tmp_path / "r1.log", "1").start()
    assert seen[SERVED_ENV] == "1" and seen[FORWARDED_ALLOW_IPS_ENV] == TRUST_NO_PROXY
