"""The house rules: each module's imports, lazy ones included, point only down the floors of
the house; no module imports itself in a circle; the registries and public names resolve."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ragas_relevancy_ext
from ragas_relevancy_ext.scoring.probe_modes import MODE_NAMES, MODES

PACKAGE = Path(ragas_relevancy_ext.__file__).parent
ROOT = Path(__file__).resolve().parents[1]
# The floors, lowest first. A module may import its own floor and those below, never above.
# The engines share the top floor; each may use another's parts (the pytest plugin builds its
# judge with the command line's provider specs), and testing's stand-ins serve the command
# line's offline default.
FLOORS = (
    ("errors",),
    ("scoring",),
    ("run", "store", "adapters", "testing"),
    ("metric", "legacy", "results", "parity", "error_bars"),
    ("",),  # the package itself: its lazy public names
    ("cli", "ray", "pytest_plugin", "__main__"),
)


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def floor(module: str) -> int:
    room = module.removeprefix("ragas_relevancy_ext").removeprefix(".").partition(".")[0]
    for level, rooms in enumerate(FLOORS):
        if room in rooms:
            return level
    raise AssertionError(f"{module} is in no room of the house")


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        isinstance(test, ast.Name)
        and test.id == "TYPE_CHECKING"
        or isinstance(test, ast.Attribute)
        and test.attr == "TYPE_CHECKING"
    )


def imports_of(path: Path) -> set[str]:
    """Package modules that ``path`` imports anywhere (module level, in functions, lazily),
    leaving out ``if TYPE_CHECKING:`` blocks, which import nothing at run time."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for t in ast.walk(tree) if _type_checking(t) for n in ast.walk(t)}
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("ragas_relevancy_ext"):
                found.add(target)
                found.update(f"{target}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("ragas_relevancy_ext"))
    modules = {module_name(p) for p in PACKAGE.rglob("*.py")}
    return {t for t in found if t in modules and t != name}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in PACKAGE.rglob("*.py")}


def test_every_import_points_down_the_floors():
    upward = [
        f"{module} -> {target}"
        for module, targets in graph().items()
        for target in targets
        if floor(target) > floor(module)
    ]
    assert upward == []


def test_the_lazy_public_names_point_down_too():
    for name, module in ragas_relevancy_ext._EXPORTS.items():
        assert floor(f"ragas_relevancy_ext.{module}") < floor("ragas_relevancy_ext"), name


def test_the_layering_rule_sees_a_lazy_import(tmp_path):
    # a function-level import from the command line inside the scoring room is found
    room = tmp_path / "ragas_relevancy_ext" / "scoring"
    room.mkdir(parents=True)
    (room / "bad.py").write_text("def f():\n    from ..cli import main\n")
    (tmp_path / "ragas_relevancy_ext" / "cli.py").write_text("")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "ragas_relevancy_ext"
    try:
        assert graph()["ragas_relevancy_ext.scoring.bad"] == {"ragas_relevancy_ext.cli"}
    finally:
        PACKAGE = saved


def test_no_import_cycles():
    edges = graph()
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                pytest.fail("import cycle: " + " -> ".join([*path, node, nxt]))
            if nxt not in state:
                visit(nxt, [*path, node])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])


def test_every_probe_mode_names_a_prompt_class_that_fits_it():
    from ragas_relevancy_ext.scoring.probe_modes import resolve_probe_prompt

    assert MODE_NAMES == tuple(MODES) and len(MODE_NAMES) >= 3
    for name, mode in MODES.items():
        for legacy in (False, True):
            resolved, prompt = resolve_probe_prompt(name, legacy)
            assert resolved is mode and type(prompt) is mode.prompt_class(legacy)
            # an object of the mode's own class resolves back to the mode, in either flavour
            for flavour in (False, True):
                assert resolve_probe_prompt(mode.prompt_class(legacy)(), flavour)[0] is mode


def test_public_names_are_the_literal_all_and_each_resolves():
    exports = ragas_relevancy_ext._EXPORTS
    assert sorted(ragas_relevancy_ext.__all__) == sorted(exports)
    for name in ragas_relevancy_ext.__all__:
        assert getattr(ragas_relevancy_ext, name) is not None


CLOCKS = {"perf_counter", "monotonic", "time", "process_time"}


def _reads_a_clock(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr in CLOCKS
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "time"
        or isinstance(n, ast.Name)
        and n.id in {"elapsed", "seconds", "took"}
        for n in ast.walk(node)
    )


def test_no_test_puts_an_upper_bound_on_wall_time():
    """On a loaded machine any run can be slow: a test may never assert that time stayed short."""
    found = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Assert):
                continue
            for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
                sides = [compare.left, *compare.comparators]
                upper = any(isinstance(op, (ast.Lt, ast.LtE)) for op in compare.ops)
                lower = any(isinstance(op, (ast.Gt, ast.GtE)) for op in compare.ops)
                if (upper and _reads_a_clock(sides[0])) or (lower and _reads_a_clock(sides[-1])):
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []
