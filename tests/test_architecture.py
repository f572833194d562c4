"""The floors of the code, read from the source: who may import whom, where kazoo's internals may be touched.

Every import counts (module level, inside functions, under TYPE_CHECKING); the checks run on the real tree
and, to prove they can fail, on small synthetic trees that break each rule once.
"""

from __future__ import annotations

import ast
import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("migrate", "bridge", "validators", "cli")

# Which of our packages each package may import (itself always).
PACKAGE_FLOORS: dict[str, frozenset[str]] = {
    "migrate": frozenset(),
    "validators": frozenset({"migrate"}),
    "bridge": frozenset({"migrate"}),
    "cli": frozenset({"migrate", "validators", "bridge"}),
}

# Inside bridge/: the parts of the bridge each part may import (itself always). A new top-level module or
# folder under bridge/ must be placed here, which is the point: docs/architecture.md has the floors.
BRIDGE_FLOORS: dict[str, frozenset[str]] = {
    # bottom
    "stopping": frozenset(),
    "kafka": frozenset({"stopping"}),
    "api": frozenset({"kafka"}),
    # middle: pure request logic and the brokers' side
    "brokers": frozenset({"api", "kafka"}),
    "handlers": frozenset({"api", "kafka", "brokers"}),
    # middle: ZooKeeper, the log, the state machine, the pipeline
    "metrics": frozenset({"api", "kafka"}),
    "zk": frozenset({"api", "metrics"}),
    # the Raft wing: the metadata log, its recovery and its Fetch serving
    "raft": frozenset({"api", "kafka", "handlers"}),
    "driver": frozenset({"api", "zk"}),
    "pipeline": frozenset({"api", "kafka", "metrics", "zk", "raft", "driver", "stopping"}),
    "broker_lifecycle": frozenset({"api", "kafka", "brokers", "driver", "raft", "pipeline"}),
    "broker_channel": frozenset({"kafka", "brokers", "metrics", "stopping"}),
    # top: the shim and the controller process
    "shim": frozenset({"api", "kafka", "handlers", "brokers", "raft", "metrics", "stopping"}),
    "config": frozenset({"kafka"}),
    "controller": frozenset(
        {
            "api",
            "kafka",
            "handlers",
            "metrics",
            "zk",
            "raft",
        }
        | {"driver", "pipeline", "brokers", "broker_lifecycle", "broker_channel"}
        | {"config", "stopping"}
    ),
}

# kazoo's documented modules; everything else of kazoo (protocol.serialization, protocol.connection, hosts,
# handlers.utils, ...) is reached only through migrate/zk/kazoo_adapter.py, named in the kazoo pin.
KAZOO_ADAPTER = "migrate.zk.kazoo_adapter"
KAZOO_PUBLIC = frozenset(
    {
        "kazoo.client",
        "kazoo.exceptions",
        "kazoo.security",
        "kazoo.retry",
        "kazoo.interfaces",
        "kazoo.protocol.states",  # KazooState, ZnodeStat, WatchedEvent, EventType
        "kazoo.handlers.threading",  # SequentialThreadingHandler, KazooTimeoutError
    }
)
KAZOO_PUBLIC_PREFIXES = ("kazoo.recipe.",)

# Imports inside functions outside cli/, each with why it cannot sit at the top of its module.
FUNCTION_IMPORTS_ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class ImportSite:
    """One import statement's target, as seen from the module that holds it."""

    module: str
    target: str
    where: str  # "module" | "function" | "type_checking"
    path: Path
    line: int
    commented: bool  # a comment on the line or just above it (only asked of function-level imports)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module} imports {self.target} ({self.where})"


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def scan(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[ImportSite]:
    """Every import in every module of `packages` under `root`."""
    files = {module_name(root, p): p for pkg in packages for p in sorted((root / pkg).rglob("*.py"))}
    sites: list[ImportSite] = []
    for module, path in files.items():
        source = path.read_text()
        lines = source.splitlines()
        is_package = path.name == "__init__.py"
        for node, where in _imports(ast.parse(source, str(path))):
            for target in dict.fromkeys(_targets(node, module, is_package, files)):
                sites.append(
                    ImportSite(
                        module, target, where, path.relative_to(root), node.lineno, _commented(lines, node)
                    )
                )
    return sites


def _imports(tree: ast.AST) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    def walk(node: ast.AST, where: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, where
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, "function")
            elif (
                isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test) and where == "module"
            ):
                yield from walk(child, "type_checking")
            else:
                yield from walk(child, where)

    yield from walk(tree, "module")


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, files: dict[str, Path]
) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        package = module.split(".") if is_package else module.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join([*package, base] if base else package)
    out = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        out.append(sub if sub in files or _external_module(sub) else base)
    return out


def _external_module(name: str) -> bool:
    if not name.startswith("kazoo."):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _commented(lines: list[str], node: ast.stmt) -> bool:
    """A `#` comment on the import's own lines or in the run of imports and comments just above it."""
    end = node.end_lineno or node.lineno
    if any("#" in line for line in lines[node.lineno - 1 : end]):
        return True
    i = node.lineno - 2
    while i >= 0:
        text = lines[i].strip()
        if text.startswith("#"):
            return True
        if not (text.startswith(("import ", "from ")) or text == ""):
            return False
        i -= 1
    return False


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def _bridge_part(name: str) -> str | None:
    parts = name.split(".")
    return parts[1] if parts[0] == "bridge" and len(parts) > 1 else None


# ---------------------------------------------------------------- the checks (each returns its violations)


def package_floor_violations(sites: list[ImportSite]) -> list[str]:
    out = []
    for s in sites:
        src, dst = _top(s.module), _top(s.target)
        if dst in PACKAGE_FLOORS and dst != src and dst not in PACKAGE_FLOORS[src]:
            out.append(f"{s}: {src}/ may import only {sorted(PACKAGE_FLOORS[src])} of ours")
    return out


def bridge_floor_violations(sites: list[ImportSite]) -> list[str]:
    out = []
    for s in sites:
        src, dst = _bridge_part(s.module), _bridge_part(s.target)
        if src is None:
            continue
        if src not in BRIDGE_FLOORS:
            out.append(
                f"{s}: bridge/{src} has no floor in BRIDGE_FLOORS; place it (and in docs/architecture.md)"
            )
        elif s.target == "bridge" or (dst is not None and dst != src and dst not in BRIDGE_FLOORS[src]):
            out.append(f"{s}: bridge/{src} may import only {sorted(BRIDGE_FLOORS[src])} of the bridge")
    return out


def _in_controller(name: str) -> bool:
    return name == "bridge.controller" or name.startswith("bridge.controller.")


def controller_importers(sites: list[ImportSite]) -> list[str]:
    return [
        f"{s}: only cli/ starts a controller"
        for s in sites
        if _in_controller(s.target) and _top(s.module) != "cli" and not _in_controller(s.module)
    ]


def import_cycles(sites: list[ImportSite]) -> list[str]:
    """Cycles among our modules through module-level imports (a package and its own children excepted)."""
    graph: dict[str, set[str]] = {}
    for s in sites:
        if s.where != "module" or _top(s.target) not in PACKAGE_FLOORS or s.target == s.module:
            continue
        if s.module.startswith(s.target + "."):
            continue  # a child importing its package: Python has run the package first anyway
        graph.setdefault(s.module, set()).add(s.target)
    cycles: list[str] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def function_import_violations(sites: list[ImportSite]) -> list[str]:
    out = []
    for s in sites:
        if s.where != "function":
            continue
        if _top(s.module) == "cli":
            if not s.commented:
                out.append(f"{s}: a lazy import in cli/ says why in a comment (startup cost of what?)")
        elif (s.module, s.target) not in FUNCTION_IMPORTS_ALLOWED:
            out.append(f"{s}: hoist it, or list it in FUNCTION_IMPORTS_ALLOWED with the reason")
    return out


def kazoo_internal_imports(sites: list[ImportSite]) -> list[str]:
    return [
        f"{s}: kazoo internals are reached through {KAZOO_ADAPTER} only"
        for s in sites
        if _top(s.target) == "kazoo"
        and s.module != KAZOO_ADAPTER
        and s.target not in KAZOO_PUBLIC
        and not s.target.startswith(KAZOO_PUBLIC_PREFIXES)
    ]


# The standard library's public names that start with an underscore: os._exit ends a process without joining
# its threads (the last resort of a stop that hangs).
STDLIB_UNDERSCORED = frozenset({"_exit"})


def foreign_private_attributes(root: Path, packages: tuple[str, ...] = PACKAGES) -> list[str]:
    """`obj._name` where `_name` is defined nowhere in the module: another library's internals (kazoo's)."""
    out = []
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            if module_name(root, path) == KAZOO_ADAPTER:
                continue
            tree = ast.parse(path.read_text(), str(path))
            own = _defined_names(tree)
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute):
                    name = node.attr
                elif (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                    and len(node.args) >= 2
                    and isinstance(node.args[1], ast.Constant)
                    and isinstance(node.args[1].value, str)
                ):
                    name = node.args[1].value
                else:
                    continue
                if name.startswith("_") and not name.startswith("__") and name not in own | STDLIB_UNDERSCORED:
                    out.append(
                        f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)} is not this module's"
                    )
    return out


def _defined_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[-1])
        elif isinstance(node, ast.keyword) and node.arg:
            names.add(node.arg)  # dataclasses' and pydantic's fields set by keyword
    return names


# ---------------------------------------------------------------- the real tree


def _none(violations: list[str]) -> None:
    assert not violations, "\n".join(violations)


@pytest.fixture(scope="module")
def sites() -> list[ImportSite]:
    found = scan(ROOT)
    assert len({s.module for s in found}) > 100, "the scan found too few modules to be reading the tree"
    return found


def test_packages_import_only_below_them(sites: list[ImportSite]) -> None:
    _none(package_floor_violations(sites))


def test_bridge_parts_import_only_their_floors(sites: list[ImportSite]) -> None:
    _none(bridge_floor_violations(sites))


def test_only_cli_imports_the_controller(sites: list[ImportSite]) -> None:
    _none(controller_importers(sites))


def test_no_import_cycles(sites: list[ImportSite]) -> None:
    _none(import_cycles(sites))


def test_imports_inside_functions_only_in_cli_with_a_reason(sites: list[ImportSite]) -> None:
    _none(function_import_violations(sites))
    listed = {(s.module, s.target) for s in sites if s.where == "function"}
    assert set(FUNCTION_IMPORTS_ALLOWED) <= listed, "an allow-list entry whose import is gone: remove it"


def test_kazoo_internals_only_in_the_adapter(sites: list[ImportSite]) -> None:
    _none(kazoo_internal_imports(sites))
    _none(foreign_private_attributes(ROOT))
    pin = (ROOT / "pyproject.toml").read_text()
    assert KAZOO_ADAPTER.replace(".", "/") + ".py" in pin, "the kazoo pin names the adapter"


MAX_MODULE_LINES = 1000
MAX_CONTROLLER_CLASS_LINES = 700
MAX_BRIDGE_TOP_MODULES = 10


def _hand_written(path: Path) -> bool:
    return not path.read_text().startswith("# GENERATED by ")


def test_no_hand_written_module_is_over_a_thousand_lines() -> None:
    long = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if _hand_written(p) and (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    ]
    _none(long)


def test_the_controller_class_stays_small_and_bridge_keeps_its_wings_in_folders() -> None:
    source = (ROOT / "bridge" / "controller" / "process.py").read_text()
    cls = next(
        n for n in ast.parse(source).body if isinstance(n, ast.ClassDef) and n.name == "BridgeController"
    )
    lines = (cls.end_lineno or cls.lineno) - cls.lineno + 1
    assert lines < MAX_CONTROLLER_CLASS_LINES, f"BridgeController is {lines} lines"
    top = sorted(p.name for p in (ROOT / "bridge").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= MAX_BRIDGE_TOP_MODULES, f"bridge/ has {len(top)} top-level modules: {top}"


# ---------------------------------------------------------------- the checks can fail


BAD_TREES: dict[str, tuple[dict[str, str], str]] = {
    "migrate imports bridge": (
        {"migrate/zk/x.py": "def f():\n    from bridge.zk import leadership\n"},
        "floor",
    ),
    "validators imports cli under TYPE_CHECKING": (
        {"validators/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import cli.main\n"},
        "floor",
    ),
    "kafka wing imports the zk wing": (
        {"bridge/kafka/x.py": "from bridge.zk.leadership import Leadership\n"},
        "bridge",
    ),
    "zk wing imports the pipeline": ({"bridge/zk/x.py": "from bridge import pipeline\n"}, "bridge"),
    "handlers import the shim": ({"bridge/handlers/x.py": "from ..shim import server\n"}, "bridge"),
    "an unplaced bridge module": ({"bridge/newthing.py": "import bridge.api\n"}, "bridge"),
    "the shim imports the controller": ({"bridge/shim/x.py": "import bridge.controller\n"}, "controller"),
    "the shim imports the controller's routing": (
        {"bridge/shim/x.py": "from bridge.controller.routing import ControllerApis\n"},
        "controller",
    ),
    "a cycle": ({"migrate/a.py": "from migrate import b\n", "migrate/b.py": "import migrate.a\n"}, "cycle"),
    "a function-level import outside cli": ({"bridge/zk/x.py": "def f():\n    import json\n"}, "function"),
    "a lazy cli import without a reason": ({"cli/x.py": "def f():\n    import json\n"}, "function"),
    "kazoo's serialization outside the adapter": (
        {"bridge/zk/x.py": "from kazoo.protocol.serialization import Create\n"},
        "kazoo",
    ),
    "kazoo's hosts parser outside the adapter": ({"migrate/zk/x.py": "from kazoo import hosts\n"}, "kazoo"),
    "a kazoo client's private field": (
        {"migrate/zk/x.py": "def f(client):\n    return client._session_id\n"},
        "private",
    ),
    "a kazoo client's private field by name": (
        {"bridge/zk/x.py": "def f(client):\n    return getattr(client, '_connection', None)\n"},
        "private",
    ),
}


def _violations(root: Path, rule: str) -> list[str]:
    found = scan(root)
    return {
        "floor": package_floor_violations,
        "bridge": bridge_floor_violations,
        "controller": controller_importers,
        "cycle": import_cycles,
        "function": function_import_violations,
        "kazoo": kazoo_internal_imports,
        "private": lambda _sites: foreign_private_attributes(root),
    }[rule](found)


@pytest.mark.parametrize("case", sorted(BAD_TREES))
def test_each_check_fails_on_a_tree_that_breaks_it(tmp_path: Path, case: str) -> None:
    files, rule = BAD_TREES[case]
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "bridge" / "api.py").write_text("")
    (tmp_path / "bridge" / "controller.py").write_text("")
    assert _violations(tmp_path, rule) == [], "the tree without the bad file is clean"
    for rel, text in files.items():
        path = tmp_path / rel
        for parent in path.relative_to(tmp_path).parents:
            if parent != Path("."):
                (tmp_path / parent).mkdir(exist_ok=True)
                (tmp_path / parent / "__init__.py").touch()
        path.write_text(text)
    found = _violations(tmp_path, rule)
    bad = [rel for rel in files if any(rel in v or rel[:-3].replace("/", ".") in v for v in found)]
    assert bad, f"{case}: no violation names the bad file ({found})"


def test_a_lazy_cli_import_with_its_reason_passes(tmp_path: Path) -> None:
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "cli" / "x.py").write_text(
        "def f():\n    # Spark starts slowly: only when asked.\n    import json\n"
    )
    assert function_import_violations(scan(tmp_path)) == []
