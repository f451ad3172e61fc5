"""The layer table of ARCHITECTURE.md, enforced: every module of `dp/`, `tasks/`, `flows/` and
`dppub/` belongs to one layer, and imports only from the layers its own may import."""

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# layer -> the top-level names it holds (a package or a module: `dp.matrix` holds `dp.matrix.*`).
LAYERS: dict[str, tuple[str, ...]] = {
    "foundations": (
        "dp.errors",
        "dp.validation",
        "dp.schema",
        "dp.budget",
        "dp.periods",
        "dp.stopping",
    ),
    "privacy core": (
        "dp.mechanisms",
        "dp.calibration",
        "dp.numerics",
        "dp.axes",
        "dp.matrix",
        "dp.regression",
        "dp.kmeans",
        "dp.anonymity",
        "dp.tables",
        "dp.series",
        "dp.contributions",
    ),
    "synthetic": ("dp.synthetic",),
    "data access": ("dp.engine", "dp.io"),
    "operations": ("dp.ledger", "dp.publication", "dp.runs", "dp.faults"),
    "pipeline": ("dp.pipeline",),
    "reference": ("dp.reference",),
    "tasks": ("tasks",),
    "flows": ("flows",),
    "api": ("dppub",),
}
TOPS = ("dp", "flows", "tasks")
DP = ("foundations", "privacy core", "synthetic", "data access", "operations", "pipeline")
# layer -> the layers (its own included) and third-party roots it may import from.
MAY_IMPORT: dict[str, frozenset[str]] = {
    "foundations": frozenset({"foundations"}),
    "privacy core": frozenset({"foundations", "privacy core"}),
    # AIM and the one module that imports mbi / JAX (an optional extra, imported lazily).
    "synthetic": frozenset({"foundations", "privacy core", "synthetic", "mbi", "jax"}),
    "data access": frozenset({"foundations", "privacy core", "data access"}),
    "operations": frozenset({"foundations", "operations"}),
    "pipeline": frozenset(DP),
    # What tests and benchmarks compare against; nothing else imports it.
    "reference": frozenset({"foundations", "privacy core", "data access", "reference"}),
    "tasks": frozenset({*DP, "tasks", "prefect"}),
    "flows": frozenset({*DP, "tasks", "flows", "prefect"}),
    # `import dppub`: the Python API, the CLI over it, running a publication with or without
    # Prefect (whose flow, runner and server it may call, never import Prefect itself).
    "api": frozenset({*DP, "tasks", "flows", "api"}),
}
# Third-party roots only the layers that name them may import.
GUARDED = frozenset({"prefect", "mbi", "jax"})


def _layer(module: str) -> str | None:
    """The layer of a module or import name (`None`: third party, or `dp` itself)."""
    for layer, names in LAYERS.items():
        if any(module == n or module.startswith(n + ".") for n in names):
            return layer
    return None


def _module(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(source: str) -> set[str]:
    """Every absolute name imported anywhere in ``source`` (TYPE_CHECKING and function-local
    imports included); `from dp import x` counts as `dp.x`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, "a relative import"
            names.add(node.module)
            if node.module in ("dp", "dppub.dp"):
                names |= {f"dp.{a.name}" for a in node.names}
    # The code imports its own modules under the installed package: `dppub.dp.x` is `dp.x`;
    # `dppub.run` is dppub's own module.
    return {_top_level(n) for n in names}


def _top_level(name: str) -> str:
    """``dppub.dp.x`` -> ``dp.x`` (the installed name of a top-level folder's module)."""
    head, _, rest = name.partition(".")
    return rest if head == "dppub" and rest.split(".")[0] in TOPS else name


@functools.cache
def _sources() -> dict[str, frozenset[str]]:
    """Module -> what it imports, for every module of dp/, tasks/ and flows/, and of dppub/ (the
    API and the CLI; its subpackages `dppub.dp`, `dppub.flows`, `dppub.tasks` are the others)."""
    paths = sorted(p for top in ("dp", "tasks", "flows") for p in (ROOT / top).rglob("*.py"))
    paths += sorted((ROOT / "dppub").glob("*.py"))
    assert paths
    return {_module(p): frozenset(_imports(p.read_text())) for p in paths}


def violations(sources: dict[str, frozenset[str]]) -> list[str]:
    """`module (layer) imports name (layer)` for every import the table forbids."""
    found = []
    for module, imported in sorted(sources.items()):
        own = _layer(module)
        if own is None:
            if module != "dp":
                found.append(f"{module} is in no layer of the table")
            continue
        for name in sorted(imported):
            root_name = name.split(".")[0]
            target = _layer(name) or (root_name if root_name in GUARDED else None)
            if target is not None and target not in MAY_IMPORT[own]:
                found.append(f"{module} ({own}) imports {name} ({target})")
    return found


@pytest.mark.slow
def test_every_import_follows_the_layer_table() -> None:
    found = violations(_sources())
    assert not found, "\n".join(found)


@pytest.mark.slow
def test_every_layer_holds_modules() -> None:
    assert {_layer(m) for m in _sources()} - {None} == set(LAYERS)


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        ("dp.budget", "from dppub.dp.ledger import Ledger", "dp.budget (foundations)"),
        ("dp.matrix.error", "from dppub.dp.engine import TableSource", "dp.matrix.error (privacy"),
        ("dp.ledger.chain", "import dppub.dp.mechanisms", "dp.ledger.chain (operations)"),
        ("dp.engine.memory", "from dppub.dp import pipeline", "dp.engine.memory (data"),
        ("dp.pipeline.plan", "from prefect import flow", "dp.pipeline.plan (pipeline)"),
        ("dp.pipeline.plan", "import mbi", "dp.pipeline.plan (pipeline)"),
        (
            "dp.synthetic.aim",
            "from dppub.dp.engine import TableSource",
            "dp.synthetic.aim (synthetic)",
        ),
        ("dp.pipeline.plan", "import dppub.dp.reference.histogram", "dp.pipeline.plan (pipeline)"),
        ("tasks.releases", "from dppub.flows import publish", "tasks.releases (tasks)"),
        ("flows.publish", "from dppub.run import execute", "flows.publish (flows)"),
        ("dppub.run", "from prefect import flow", "dppub.run (api)"),
        ("dp.io", "if True:\n    import dppub.tasks.releases", "dp.io (data access)"),
        ("dp.newpackage.module", "import numpy", "dp.newpackage.module is in no layer"),
    ],
)
def test_an_import_against_the_table_fails(module: str, line: str, broken: str) -> None:
    sources = dict(_sources())
    sources[module] = sources.get(module, frozenset()) | _imports(line)
    found = violations(sources)
    assert len(found) == 1 and found[0].startswith(broken), found


@pytest.mark.slow  # a fresh interpreter importing all of dp: seconds of CPU
def test_importing_all_of_dp_loads_no_prefect() -> None:
    modules = [m for m in _sources() if m.split(".")[0] == "dp"]
    code = "import sys\n" + "".join(f"import dppub.{m}\n" for m in modules)
    code += "assert not [m for m in sys.modules if m.split('.')[0] == 'prefect']\n"
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


@pytest.mark.slow
def test_own_modules_are_imported_through_the_installed_package() -> None:
    """Installed, the code is `dppub.dp`, `dppub.flows`, `dppub.tasks`: a bare `import dp...`
    works only from the repository's root, so it must not appear anywhere."""
    bare = []
    for top in ("dp", "tasks", "flows", "dppub", "tests", "bench"):
        for path in sorted((ROOT / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom) and node.level == 0
                    else []
                )
                bare += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in TOPS]
    assert not bare, "\n".join(bare)


KINDS = ROOT / "dp" / "pipeline" / "kinds"
KIND_ROLES = frozenset({"item", "kind", "result", "facts", "plot", "planning"})
"""The role modules of a kind package: the same name in every kind, on purpose."""
MAX_LINES = 450


def _dp_modules() -> list[Path]:
    return sorted(p for p in (ROOT / "dp").rglob("*.py") if p.name != "__init__.py")


def test_no_module_in_dp_is_over_450_lines() -> None:
    long = [
        f"{p.relative_to(ROOT)}: {n}"
        for p in _dp_modules()
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    ]
    assert not long, "\n".join(long)


def test_no_module_name_repeats_in_dp_but_a_kinds_role() -> None:
    by_name: dict[str, list[str]] = {}
    for p in _dp_modules():
        if not (p.parent.parent == KINDS and p.stem in KIND_ROLES):
            by_name.setdefault(p.stem, []).append(str(p.relative_to(ROOT)))
    repeated = {name: paths for name, paths in by_name.items() if len(paths) > 1}
    assert not repeated, repeated


def test_a_kind_package_imports_no_other_kind() -> None:
    kinds = sorted(p.name for p in KINDS.iterdir() if (p / "__init__.py").exists())
    assert len(kinds) >= 6
    found = []
    for kind in kinds:
        for path in sorted((KINDS / kind).rglob("*.py")):
            for name in _imports(path.read_text()):
                other = name.removeprefix("dp.pipeline.kinds.").split(".")[0]
                if name.startswith("dp.pipeline.kinds.") and other in kinds and other != kind:
                    found.append(f"{path.relative_to(ROOT)} imports {name}")
    assert not found, "\n".join(found)
