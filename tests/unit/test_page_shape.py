"""How a page is shaped (docs/ARCHITECTURE.md, "How a page is shaped"): widgets, then a view
or analysis object, then viz, then the chart, each in a function with one job. A page or ui
function past 80 lines has started doing several jobs at once; this test names it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOST_LINES = 80  # from `def` to the function's last line; decorators not counted


def long_functions(folder: Path) -> list[str]:
    """'file:line name (lines)' for every function in the folder's modules past MOST_LINES."""
    found = []
    for path in sorted(folder.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MOST_LINES:
                    found.append(f"{path.name}:{node.lineno} {node.name} ({lines})")
    return found


def test_no_page_function_is_over_80_lines():
    assert long_functions(ROOT / "pages") == [], "split it by job (docs/ARCHITECTURE.md)"


def test_no_ui_function_is_over_80_lines():
    assert long_functions(ROOT / "ui") == [], "split it by job (docs/ARCHITECTURE.md)"


def test_the_rule_names_a_function_one_line_too_long(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(MOST_LINES))
    (tmp_path / "long.py").write_text(f"def draw():\n{body}\n", encoding="utf-8")
    (tmp_path / "short.py").write_text(f"def draw():\n{body[: body.rindex(chr(10))]}\n")
    assert long_functions(tmp_path) == ["long.py:1 draw (81)"]
