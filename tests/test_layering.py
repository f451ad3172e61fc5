"""The privacy core never imports Prefect; tasks never import flows."""

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_dp_sources_do_not_import_prefect_or_upper_layers() -> None:
    files = sorted((ROOT / "dp").rglob("*.py"))
    assert files
    for f in files:
        bad = _imports(f) & {"prefect", "tasks", "flows"}
        assert not bad, f"{f.relative_to(ROOT)} imports {bad}"


def test_tasks_do_not_import_flows() -> None:
    for f in sorted((ROOT / "tasks").rglob("*.py")):
        assert "flows" not in _imports(f), f


def test_importing_all_of_dp_loads_no_prefect() -> None:
    modules = [
        ".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for p in sorted((ROOT / "dp").rglob("*.py"))
    ]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules)
    code += "assert not [m for m in sys.modules if m.split('.')[0] == 'prefect']\n"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
