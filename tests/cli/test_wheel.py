"""`pip install .` (a wheel, not editable) gives a working `sniffsync demo`: the shipped samples
are package data. The wheel is built from a copy of the tree, installed into a fresh venv
that sees the already installed numpy/pandas/pyarrow/flask but not this checkout, and its
demo must write what the demo from the source tree writes."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ["setup.py", "setup.cfg", "pyproject.toml", "README.md", "sniffsync", "airtime", "viz", "web", "samples"]
DEPS = ["numpy", "pandas", "pyarrow", "flask", "werkzeug"]

pytestmark = pytest.mark.slow          # ~15 s: builds a wheel and a venv (still in the default run)


def _can_build_wheels() -> bool:
    code = "from setuptools.dist import Distribution; Distribution().get_command_class('bdist_wheel')"
    return subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0


def _run(cmd, **kw):
    # without PYTHONPATH: a checkout on it makes pip see sniffsync "already installed"
    kw.setdefault("env", {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")})
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=180, **kw)
    assert p.returncode == 0, f"{cmd}\n{p.stdout}\n{p.stderr}"
    return p


def _deps_dirs() -> list:
    """Folders holding the runtime dependencies (not this checkout's editable finder: a
    folder named in a .pth is added as is, its own .pth files are not run)."""
    import importlib.util
    dirs = []
    for name in DEPS:
        d = str(Path(importlib.util.find_spec(name).origin).parents[1])
        if d not in dirs:
            dirs.append(d)
    return dirs


def _purelib(env_dir: Path) -> Path:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return Path(_run([str(env_dir / "bin" / "python"), "-c", code]).stdout.strip())


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    if not _can_build_wheels():
        pytest.skip("setuptools cannot build wheels here (needs `wheel`, or setuptools >= 70.1)")
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy2)(
            ROOT / name, src / name, **({"ignore": shutil.ignore_patterns("__pycache__")}
                                        if (ROOT / name).is_dir() else {}))
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index",
          "-w", str(tmp / "dist"), str(src)])
    wheel, = (tmp / "dist").glob("sniffsync-*.whl")
    env_dir = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)])
    py = env_dir / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q", "--no-deps", "--no-index", str(wheel)])
    (_purelib(env_dir) / "sniffsync-test-deps.pth").write_text("\n".join(_deps_dirs()) + "\n")
    return env_dir


def test_installed_wheel_runs_the_demo_like_the_source_tree(venv, tmp_path):
    from sniffsync.cli.main import main
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    where = _run([str(venv / "bin" / "python"), "-c", "import sniffsync; print(sniffsync.__file__)"],
                 cwd=cwd, env=env).stdout.strip()
    assert Path(where).resolve().is_relative_to(venv.resolve()), where
    _run([str(venv / "bin" / "sniffsync"), "demo", "--no-serve", "-q", "--out", "out"], cwd=cwd, env=env)
    out = cwd / "out"
    for name in ("merged.pcapng", "report.html", "ppdus.csv"):
        assert (out / name).stat().st_size > 0, name
    assert main(["demo", "--no-serve", "-q", "--out", str(tmp_path / "src_demo")]) == 0
    for name in ("ppdus.csv", "merged.pcapng", "report.html"):
        assert (out / name).read_bytes() == (tmp_path / "src_demo" / name).read_bytes(), name


def test_wheel_ships_the_samples_and_the_web_assets(venv):
    site = _purelib(venv)
    shipped = sorted(p.name for p in (site / "sniffsync" / "samples" / "hidden-node").glob("*.pcap.gz"))
    assert shipped == sorted(p.name for p in (ROOT / "samples" / "hidden-node").glob("*.pcap.gz"))
    assert (site / "web" / "static" / "index.html").is_file()
    assert (site / "web" / "static" / "vendor" / "d3" / "d3.min.js").is_file()
    assert not (site / "samples").exists() and not (site / "tests").exists()
