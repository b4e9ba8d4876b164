"""One way to keep what was computed (docs/ARCHITECTURE.md, "Keeping what was computed").

The lab keeps computed things three ways: ``st.cache_resource`` for the few process-wide
objects that are not data, the one byte-bounded cache (``model.runtime.kept.ByteLRU``:
models, traces, what views derive from a trace, figures through ``viz.memo.memo_figure``)
and ``st.cache_data`` for small pure results; ``functools`` caches only hold constants of
the process. This test reads every module of the app with ``ast`` and fails on a cache
kept any other way, so a new one picks one of these (or this list and the doc change).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("model", "viz", "ui", "pages", "practice", "classroom")
STREAMLIT_FLOORS = ("ui/", "pages/", "app.py")

# st.cache_resource: one object per process that is not computed data
RESOURCES = {
    "app.py:_configure_torch_once",
    "ui/sidebar.py:device_info",
    "ui/preload.py:start_preload",
    "ui/classroom.py:_room",
}
# functools caches: constants of the process (a catalog, the examples, plotly.js, byte
# maps, positional tables of a model's sizes, the practice model and its 64 sentences, the
# find-the-bug cases' fixed pool of test sequences)
CONSTANTS = {
    "model/positional.py:rope_table",
    "model/transformer.py:scale_in",
    "model/hf/pieces.py:_whole",
    "model/hf/gguf_tokenizer.py:byte_alphabet",
    "viz/export_html.py:_plotly_js_gzipped",
    "ui/i18n.py:_read_catalog",
    "ui/i18n.py:_merged_catalog",
    "ui/warm.py:plotly_chunk",
    "ui/sentence.py:examples_for",
    "practice/lab.py:reverse_model",
    "practice/lab.py:reverse_trace",
    "practice/kinds/family.py:_pool",
    "practice/bugs.py:_test_pool",
}
FUNCTOOLS = {"cache", "lru_cache"}
# an object's own memo of what it derives of itself, living and dying with it: a Trace's
# stacked maps, block sums and cell counts (model/trace.py is below ByteLRU's floor)
OWN_MEMOS = {
    "model/trace.py:_stack_cache",
    "model/trace.py:_block_sums_cache",
    "model/trace.py:_counts_cache",
}
# ways of keeping things the lab no longer uses: they would be a fourth mechanism
FORBIDDEN_NAMES = {"WeakKeyDictionary", "WeakValueDictionary", "KeptWithTrace", "OrderedDict"}
ONE_CACHE = "model/runtime/kept.py"  # ByteLRU itself may use what it needs


def modules() -> list[Path]:
    found = [ROOT / "app.py"]
    for folder in FOLDERS:
        found += sorted((ROOT / folder).rglob("*.py"))
    return [p for p in found if "alembic" not in p.parts]


def decorator_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def cache_sites() -> list[tuple[str, str, str]]:
    """(file, function or name, mechanism) for every cache decorator and cache-like name."""
    sites = []
    for path in modules():
        where = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=where)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for dec in node.decorator_list:
                    name = decorator_name(dec)
                    if name in {"cache_data", "cache_resource", "memo_figure", *FUNCTOOLS}:
                        sites.append((where, node.name, name))
            elif isinstance(node, ast.AnnAssign | ast.Assign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    name = getattr(target, "attr", None) or getattr(target, "id", "")
                    if name.endswith("_cache") and isinstance(node.value, ast.Dict):
                        sites.append((where, name, "own memo"))
            if isinstance(node, ast.Name | ast.Attribute | ast.alias):
                name = getattr(node, "id", None) or getattr(node, "attr", None) or node.name
                if name in FORBIDDEN_NAMES and where != ONE_CACHE:
                    sites.append((where, name, "forbidden"))
    return sites


def broken(sites) -> list[str]:
    out = []
    for where, name, how in sites:
        site = f"{where}:{name}"
        if how == "forbidden":
            out.append(f"{site}: keep it in a ByteLRU (model.runtime.kept)")
        elif how == "cache_resource" and site not in RESOURCES:
            out.append(f"{site}: st.cache_resource is for process objects, not data")
        elif how == "cache_data" and not where.startswith(STREAMLIT_FLOORS):
            out.append(f"{site}: st.cache_data only in ui/ and pages/")
        elif how == "own memo" and site not in OWN_MEMOS:
            out.append(f"{site}: a dictionary kept as a cache; use a ByteLRU")
        elif how in FUNCTOOLS and site not in CONSTANTS:
            out.append(f"{site}: functools caches hold constants only; use a ByteLRU")
    return out


def test_every_cache_is_one_of_the_three_mechanisms():
    assert broken(cache_sites()) == [], "docs/ARCHITECTURE.md, 'Keeping what was computed'"


def test_the_rule_names_a_cache_kept_a_fourth_way():
    sites = [
        ("ui/x.py", "chart", "cache_resource"),  # a figure as a process resource
        ("model/x.py", "table", "lru_cache"),  # computed data in a functools cache
        ("model/x.py", "curve", "cache_data"),  # Streamlit below ui/
        ("viz/x.py", "WeakKeyDictionary", "forbidden"),
        ("ui/x.py", "_figure_cache", "own memo"),  # a dictionary as a cache
        ("ui/sidebar.py", "device_info", "cache_resource"),  # allowed
        ("ui/x.py", "chart", "memo_figure"),  # allowed
    ]
    assert [line.split(":")[1] for line in broken(sites)] == [
        "chart",
        "table",
        "curve",
        "WeakKeyDictionary",
        "_figure_cache",
    ]
