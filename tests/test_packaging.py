"""The wheel carries what occd needs at run time (migrations, service templates), and the migrations run from
the installed copy, not from the source tree."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def test_every_package_is_listed_in_pyproject():
    listed = set(_pyproject()["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "occd").rglob("__init__.py")
             if "__pycache__" not in p.parts}
    missing = found - listed
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"
    pkg_dirs = _pyproject()["tool"]["setuptools"]["package-dir"]
    for pkg, folder in pkg_dirs.items():
        assert (REPO / folder / "__init__.py").is_file(), f"{pkg} -> {folder} has no __init__.py"
    for v in (REPO / "migrations" / "versions").glob("*.py"):
        assert v.name == "__init__.py" or v.stem[:4].isdigit(), f"unexpected file in migrations/versions: {v.name}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy2(REPO / name, src / name)
    for d in ["occd", "migrations", "systemd", "launchd"]:
        shutil.copytree(REPO / d, src / d, ignore=ignore)
    out = tmp_path_factory.mktemp("dist")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    (whl,) = out.glob("occd-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_contains_migrations_and_templates(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for rel in (REPO / "migrations").rglob("*"):
        if rel.is_file() and "__pycache__" not in rel.parts:
            assert "occd/migrations/" + rel.relative_to(REPO / "migrations").as_posix() in names
    assert "occd/migrations/env.py" in names and "occd/migrations/script.py.mako" in names
    assert any(n.startswith("occd/migrations/versions/0001") for n in names)
    for folder, pattern in [("systemd", "*.service"), ("launchd", "*.plist")]:
        for f in (REPO / folder).glob(pattern):  # templates may not exist yet; when they do, they ship
            assert f"occd/{folder}/{f.name}" in names, f"{folder}/{f.name} is not in the wheel"
    for f in (REPO / "occd" / "lean" / "plugin").iterdir():  # the lean plugin's JavaScript ships as data
        if f.suffix in (".js", ".json"):
            assert f"occd/lean/plugin/{f.name}" in names, f"occd/lean/plugin/{f.name} is not in the wheel"
    assert not any(n.endswith((".pyc", ".db")) for n in names)


def test_migrations_run_from_the_installed_copy(wheel, tmp_path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    ledger = tmp_path / "elsewhere" / "ledger.db"
    code = textwrap.dedent(f"""
        import json, sys
        import occd, occd.migrations
        from occd.ledger import Ledger
        from occd.ledger import migrate
        led = Ledger.open({str(ledger)!r})
        led.record_action("edit", "main", "s1", now=1.0)
        print(json.dumps({{"occd": occd.__file__, "scripts": migrate.script_location(),
                          "rev": led.revision(), "head": migrate.head_revision(), "n": len(led.history())}}))
    """)
    # PYTHONPATH puts the unpacked wheel before the editable install; run from a neutral folder
    env = {**os.environ, "PYTHONPATH": str(site)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    import json

    out = json.loads(p.stdout.strip().splitlines()[-1])
    assert out["occd"].startswith(str(site)) and out["scripts"].startswith(str(site))
    assert out["rev"] == out["head"] == "0003" and out["n"] == 1


def test_wheel_version_is_occds_own(wheel):
    """pyproject takes the version from occd.__version__: the wheel's name and metadata carry that one figure."""
    import occd

    assert wheel.name.startswith(f"occd-{occd.__version__}-")
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    assert f"\nVersion: {occd.__version__}\n" in zipfile.ZipFile(wheel).read(meta).decode()


@pytest.mark.slow
def test_build_says_nothing_about_missing_packages(tmp_path):
    """Every folder shipped as data is declared (no setuptools "Package ... is absent from the packages
    configuration" warning, which pip prints on every editable install)."""
    src = tmp_path / "src"
    src.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "node_modules")
    for name in ["pyproject.toml", "README.md"]:
        shutil.copy2(REPO / name, src / name)
    for d in ["occd", "migrations", "systemd", "launchd"]:
        shutil.copytree(REPO / d, src / d, ignore=ignore)
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(tmp_path / "dist"), str(src)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    out = p.stdout + p.stderr
    assert "absent from the `packages` configuration" not in out and "is absent from the" not in out, \
        [line for line in out.splitlines() if "absent" in line][:5]
