"""The model you use, on every page: a LLaMA and a GPT-2 folder speak of themselves (no toy
caption, the prompt's own map, the engine named, generation on request), Mechanisms scans
the folder, a folder:NAME link reopens it, and a folder that will not run says why."""

from __future__ import annotations

import os

import pytest
from streamlit.testing.v1 import AppTest

from model.runtime.folders import FolderProblem, folder_in_root
from tests.app.helpers import APP, chart, ok, open_tab
from tests.hf_folders import build_decoder_folder
from tests.unit.test_model_folders import BROKEN, broken
from ui.i18n import translate

LAYOUTS = {"llama": "LLaMA", "gpt2": "GPT-2"}
PROMPT = "the cat sat on the mat"


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """A models root holding a tiny LLaMA and a tiny GPT-2 folder."""
    root = tmp_path_factory.mktemp("models")
    for layout in LAYOUTS:
        build_decoder_folder(layout, root / f"tiny-{layout}")
    return root


@pytest.fixture(autouse=True)
def models_root(root, monkeypatch):
    monkeypatch.setenv("ATTENTION_LAB_MODELS", str(root))


def on(page: str, model: str, **query: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page(f"pages/{page}.py")
    at.query_params.update({"model": model, **query})
    return at.run()


def captions(at) -> list[str]:
    return [c.value for c in at.caption]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_folder_link_opens_the_prompts_own_map_with_its_engine_named(layout, lang):
    at = on("explorer", f"folder:tiny-{layout}", text=PROMPT, lang=lang)
    ok(at)
    # the folder the link names, not an empty path box
    assert at.selectbox(key="model").value == f"folder:tiny-{layout}"
    engine = translate("model.engine.lab", lang)
    layout_text = translate("model.layout", lang, layout=LAYOUTS[layout])
    assert any(engine in c and layout_text in c and "float32" in c for c in captions(at))
    toy = translate("explorer.output_tokens", lang, tokens="").split(":")[0][:20]
    assert not any(toy in c for c in captions(at))
    assert translate("explorer.prompt_only", lang) in captions(at)
    # the map is the prompt's own: as many queries as the prompt has tokens, none generated
    heatmap = chart(at, "heatmap_chart")
    ticks = heatmap["layout"]["xaxis"]["ticktext"]
    from model import load

    n_prompt = len(load(folder_in_root(f"tiny-{layout}"), device="cpu").encode(PROMPT).ids)
    assert len(ticks) == n_prompt and not any(t.endswith("⁺") for t in ticks)
    assert at.number_input(key="gen").value == 0


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_generation_is_an_option_whose_tokens_are_marked_and_the_prompt_not_repeated(layout):
    at = on("explorer", f"folder:tiny-{layout}", text=PROMPT)
    at.number_input(key="gen").set_value(4).run()
    ok(at)
    ticks = chart(at, "heatmap_chart")["layout"]["xaxis"]["ticktext"]
    marked = [t for t in ticks if t.endswith("⁺")]
    assert 1 <= len(marked) <= 4 and ticks[-len(marked) :] == marked
    said = [m.value for m in at.markdown if m.value.startswith("Generated after the prompt")]
    assert said and "cat sat on" not in said[0]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_mechanisms_scans_the_sidebars_folder_first(layout, lang):
    at = on("mechanisms", f"folder:tiny-{layout}", lang=lang)
    ok(at)
    # the scan tab is open first, on the folder: no toy model in silence
    assert at.selectbox(key="mscan_m").value == f"folder:tiny-{layout}"
    table = at.dataframe[0].value
    layers, heads = 2, 8 if layout == "llama" else 4
    assert len(table) == layers * heads
    role = translate("mech.scan.col.role", lang)
    assert set(table[role]) == {"–"}  # random weights: no head above the threshold
    none = translate("mech.scan.none.induction", lang, threshold="0.3")
    assert none in [m.value for m in at.markdown]
    assert chart(at, "mech_scan_grid") is not None
    # the toy's tab says whose heads it shows
    open_tab(at, "mech_tab", translate("mech.tab.induction", lang))
    ok(at)
    notice = translate(
        "mech.scan.toy_notice",
        lang,
        name=translate("model.root_folder", lang, name=f"tiny-{layout}"),
        tab=translate("mech.tab.scan", lang),
    )
    assert notice in [i.value for i in at.info]


def test_the_scan_tab_names_the_toy_induction_heads_first():
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page("pages/mechanisms.py")
    at.query_params["model"] = "en2ko"  # a toy in the sidebar: the scan opens on the toys
    at.session_state["mech_tab"] = translate("mech.tab.scan", "en")
    at.run()
    ok(at)
    assert at.selectbox(key="mscan_m").value == "induction"
    table = at.dataframe[0].value
    assert list(table["Head"][:3]) in (["L2 H2", "L2 H4", "L1 H3"], ["L2 H4", "L2 H2", "L1 H3"])
    assert list(table["Role"][:3]) == ["induction", "induction", "previous token"]


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("name", ["../outside", "/etc", "escape"])
def test_a_link_outside_the_models_root_is_refused_with_a_message(root, tmp_path, name, lang):
    if name == "escape" and not (root / "escape").exists():
        target = tmp_path / "elsewhere"
        build_decoder_folder("gpt2", target)
        os.symlink(target, root / "escape")
    at = on("explorer", f"folder:{name}", text=PROMPT, lang=lang)
    assert not at.exception
    with pytest.raises(FolderProblem) as problem:
        folder_in_root(name)
    expected = translate("model.problem.outside_root", lang, name=name, root=f"`{root}`")
    assert problem.value.key == "outside_root"
    assert [e.value for e in at.error] == [expected]
    assert not at.get("plotly_chart")  # nothing opened


@pytest.mark.parametrize("lang", ["en", "ko"])
@pytest.mark.parametrize("what", BROKEN)
def test_a_folder_that_does_not_run_says_why_in_the_readers_language(tmp_path, what, lang):
    folder = broken(tmp_path, what)
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page("pages/explorer.py")
    at.query_params.update({"model": "folder", "lang": lang})
    at.session_state["model_folder"] = str(folder)
    at.run()
    assert not at.exception
    from model.runtime.folders import ENGINE_DECODER_TYPES, diagnose, layout_name

    problem = diagnose(folder)
    assert problem.key == what
    details = {k: f"`{v}`" if k == "path" else v for k, v in problem.details.items()}
    engine = ", ".join(layout_name(m) for m in ENGINE_DECODER_TYPES)  # Gemma 3 since it landed
    expected = translate(f"model.problem.{what}", lang, engine=engine, **details)
    assert [e.value for e in at.error] == [expected]
    assert at.expander  # the loader's own words, behind a disclosure
    if lang == "ko":
        assert not any(word in at.error[0].value for word in ("There is", "has no", "is not"))


def test_mechanisms_says_when_the_sidebars_folder_is_not_the_one_shown(hf_folders):
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page("pages/mechanisms.py")
    at.query_params["model"] = "folder"
    at.session_state["model_folder"] = str(hf_folders["bart"])  # run by transformers
    at.run()
    ok(at)
    notice = translate("mech.scan.folder_not_engine", "en", name=hf_folders["bart"].name)
    assert notice in [i.value for i in at.info]


def test_the_patching_formula_and_the_fallback_reason_speak_korean(hf_folders):
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page("pages/mechanisms.py")
    # a toy model: the formula is the page's own text, the same for every model, and Korean's
    # real default (Gemma 3) made this one page run 150 s of the fast suite
    at.query_params.update({"lang": "ko", "model": "en2ko"})
    at.session_state["mech_tab"] = translate("mech.tab.patching", "ko")
    at.run()
    ok(at)
    formula = at.latex[0].value
    assert "회복률" in formula and "recovered" not in formula and r"\frac" in formula
    # a folder transformers runs: the note's reason in Korean, not the loader's English
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page("pages/explorer.py")
    at.query_params.update({"model": "folder", "lang": "ko", "text": "the cat sat"})
    at.session_state["model_folder"] = str(hf_folders["t5"])
    at.run()
    ok(at)
    reason = translate("models.fallback.layout", "ko", layout="T5")
    note = translate("models.fallback_note", "ko", model_type="T5", reason=reason)
    assert note in captions(at)
    assert not any("is not one Attention Lab maps" in c for c in captions(at))


@pytest.mark.parametrize("page", ["decoding", "modern", "concept_attention", "concept_layernorm"])
def test_other_pages_that_show_the_folder_name_its_engine(page):
    at = on(page, "folder:tiny-llama", text="the cat sat")
    ok(at)
    line = " · ".join(
        (
            translate("model.engine.lab", "en"),
            translate("model.layout", "en", layout="LLaMA"),
        )
    )
    assert any(c.startswith(f":material/memory: {line}") for c in captions(at))


def test_a_llama3_rescaled_folder_says_why_the_engine_does_not_run_it(tmp_path):
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 32,
    }
    folder = build_decoder_folder("llama", tmp_path / "llama3", rope_scaling=scaling)
    at = AppTest.from_file(APP, default_timeout=240)
    at.switch_page("pages/explorer.py")
    at.query_params.update({"model": "folder", "text": "the cat sat"})
    at.session_state["model_folder"] = str(folder)
    at.run()
    ok(at)
    reason = translate("models.fallback.rope_scaled", "en", layout="LLaMA", detail="llama3")
    note = translate("models.fallback_note", "en", model_type="LLaMA", reason=reason)
    assert note in captions(at)
    assert "runs LLaMA folders, but not this one" in note  # no "this llama folder needs LLaMA"
    assert any(
        c.startswith(":material/memory: transformers' own code · LLaMA") for c in captions(at)
    )
