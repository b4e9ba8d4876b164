"""The house's floors: every import points down, and no module reaches itself again.

Floors, low to high (docs/ARCHITECTURE.md, "Floors"):
  model root (the paper)  <  model.runtime's base (types, device, decoding)  <  model.hf
  <  model.runtime  <  model.training, model.analysis  <  model (the package) and the
  ``python -m model.train`` CLI  <  viz, practice  <  ui  <  pages, app  <  bench, deploy
(deploy, `make serve`'s replicas behind HAProxy, imports nothing of the app; bench drives it)
A module may import its own floor or lower, never higher; the graph has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("model", "viz", "ui", "practice", "pages", "bench", "deploy")
RUNTIME_BASE = {"model.runtime.types", "model.runtime.device", "model.runtime.decoding"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    found = {"app": ROOT / "app.py"}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[module_name(path)] = path
    return found


def floor(module: str) -> int:
    if module in ("model", "model.train"):
        return 5  # the public facade and the CLI re-export everything below them
    if module in RUNTIME_BASE:
        return 1
    top = module.split(".")[:2]
    if top[0] == "model":
        sub = top[1] if len(top) > 1 else ""
        return {"hf": 2, "runtime": 3, "training": 4, "analysis": 4}.get(sub, 0)
    return {"viz": 6, "practice": 6, "ui": 7, "pages": 8, "app": 8, "bench": 9, "deploy": 9}[top[0]]


def imports_of(path: Path, known: dict[str, Path]) -> set[str]:
    """Project modules ``path`` imports anywhere in it (lazy imports inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # "from model.runtime import lab" names a module; "from model.x import f" a symbol
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


GRAPH = {name: imports_of(path, modules()) - {name} for name, path in modules().items()}


def test_no_module_imports_from_a_higher_floor():
    upward = sorted(
        f"{src} (floor {floor(src)}) imports {dst} (floor {floor(dst)})"
        for src, targets in GRAPH.items()
        for dst in targets
        if floor(dst) > floor(src)
    )
    assert upward == []


def test_the_import_graph_has_no_cycle():
    state: dict[str, str] = {}
    cycles = []

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(GRAPH.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(" -> ".join([*path[path.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = "done"

    for start in sorted(GRAPH):
        if start not in state:
            visit(start, [start])
    assert cycles == []


def test_the_graph_walker_finds_a_planted_cycle_and_an_upward_import(tmp_path):
    # The two tests above are only as good as the walker: feed it a tiny tree of our own.
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "a.py").write_text("from model.b import x\n")
    (tmp_path / "model" / "b.py").write_text("def f():\n    from model.a import y\n")
    (tmp_path / "model" / "c.py").write_text("import ui.sidebar\n")
    (tmp_path / "ui").mkdir()
    (tmp_path / "ui" / "sidebar.py").write_text("")
    known = {
        "model.a": tmp_path / "model" / "a.py",
        "model.b": tmp_path / "model" / "b.py",
        "model.c": tmp_path / "model" / "c.py",
        "ui.sidebar": tmp_path / "ui" / "sidebar.py",
    }
    assert imports_of(known["model.a"], known) == {"model.b"}
    assert imports_of(known["model.b"], known) == {"model.a"}  # a lazy import counts
    assert imports_of(known["model.c"], known) == {"ui.sidebar"}
    assert floor("ui.sidebar") > floor("model.c")


def test_the_model_root_is_the_paper_in_at_most_twelve_files():
    root_files = sorted(p.name for p in (ROOT / "model").glob("*.py"))
    assert len(root_files) <= 12, root_files


@pytest.mark.parametrize("package", ["model", "viz", "ui", "practice"])
def test_app_packages_import_no_measuring_tools(package):
    """Playwright and Streamlit's script-runner internals are for bench/ only."""
    if not (ROOT / package).is_dir():
        pytest.skip(f"no {package}/ package in this checkout")
    banned = ("playwright", "streamlit.runtime.scriptrunner", "streamlit.testing", "bench")
    offenders = sorted(
        f"{name} imports {mod}"
        for name, path in modules().items()
        if name.split(".")[0] == package
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import | ast.ImportFrom)
        for mod in (
            [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
        )
        if mod.startswith(banned)
    )
    assert offenders == []


def test_the_architecture_notes_name_every_floor_the_graph_knows():
    """docs/ARCHITECTURE.md is where a newcomer reads the floors: a package added here and not
    there would leave the map behind the tree."""
    notes = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    floors = notes.split("## Floors", 1)[1].split("\n## ", 1)[0]
    missing = [p for p in (*PACKAGES, "app.py") if f"`{p}" not in floors]
    missing += [
        sub for sub in ("hf", "runtime", "training", "analysis") if f"model/{sub}/" not in floors
    ]
    assert missing == []


def test_every_sub_package_says_what_it_means():
    for init in [*(ROOT / "model").glob("*/__init__.py"), ROOT / "bench" / "__init__.py"]:
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 30, f"{init.relative_to(ROOT)} needs a docstring"
