"""The package layering of docs/architecture.md, checked on every import statement (lazy ones too)."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# rank of each package: a module may import its own package and packages of lower rank only
RANK = {
    "sniffsync.errors": 0, "sniffsync.runtime": 0, "sniffsync.nomask": 0,
    "sniffsync.io": 1,
    "sniffsync.decode": 2,
    "sniffsync.export": 3, "airtime": 3,
    "sniffsync.sync": 4, "sniffsync.tcp": 4, "sniffsync.sim": 4,
    "sniffsync.fairness": 5,
    "sniffsync.pipeline": 6, "viz": 6,
    "web": 7, "sniffsync.campaign": 7,
    "sniffsync.cli": 8, "sniffsync": 9,
}


def _package(module: str) -> str | None:
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        name = ".".join(parts[:k])
        if name in RANK:
            return name
    return None


def _imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import (use absolute imports)"
            yield node.module
            yield from (f"{node.module}.{a.name}" for a in node.names)


def _modules():
    for top in ("sniffsync", "airtime", "viz", "web"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            yield path, ".".join(parts)


def test_every_module_has_a_layer():
    missing = [m for _, m in _modules() if _package(m) is None]
    assert not missing


def test_no_module_imports_a_higher_layer():
    bad = []
    for path, mod in _modules():
        own = _package(mod)
        for target in _imports(path):
            if target in ("sniffsync", "sniffsync.__version__"):
                continue        # the package root itself (always imported first) and its version
            pkg = _package(target)
            if pkg is None or pkg == own or (own == "sniffsync" and pkg.startswith("sniffsync")):
                continue        # third-party, same package, or the top-level lazy exports
            if RANK[pkg] >= RANK[own]:
                bad.append(f"{mod} imports {target} ({own} rank {RANK[own]} -> {pkg} rank {RANK[pkg]})")
    assert not bad, "\n".join(sorted(set(bad)))


def test_no_import_guards_between_our_packages():
    # a missing package of ours is a broken install, not an optional feature
    bad = []
    for path, mod in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ExceptHandler) and node.type is not None:
                names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
                if names & {"ImportError", "ModuleNotFoundError"}:
                    bad.append(f"{mod}:{node.lineno}")
    assert not bad


def test_checker_sees_an_upward_import(tmp_path):
    # the checker itself: an upward import in a lower layer is reported
    f = tmp_path / "m.py"
    f.write_text("def f():\n    from sniffsync.cli.main import main\n")
    assert "sniffsync.cli.main" in set(_imports(f))
    assert RANK[_package("sniffsync.cli.main")] > RANK[_package("sniffsync.io.capture")]
