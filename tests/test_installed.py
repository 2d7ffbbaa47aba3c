"""The tests exercise the package a user installs: every module of the source tree ships, and the
``willump`` imported here is the installed copy, not the clone's source (which would hide a file
left out of the wheel)."""

import importlib
import importlib.metadata
import subprocess
import sys
from pathlib import Path

import willump

ROOT = Path(__file__).resolve().parent.parent
NEEDS_AN_EXTRA = {"willump.dask": "dask"}  # module: the extra installing what it imports


def _installed_files() -> set[str]:
    distribution = importlib.metadata.distribution("willump")
    return {file.as_posix() for file in distribution.files or [] if file.suffix == ".py"}


def _source_modules() -> list[str]:
    return sorted(path.relative_to(ROOT).as_posix() for path in (ROOT / "willump").rglob("*.py"))


def test_the_imported_willump_is_the_installed_one_not_the_source_tree():
    imported = Path(willump.__file__).resolve()
    installed = Path(importlib.metadata.distribution("willump").locate_file("willump/__init__.py")).resolve()
    assert imported == installed, (
        f"willump was imported from {imported}, not from the installed package ({installed}): "
        'install it with pip install ".[test]" (not editable) and run the tests again'
    )
    assert ROOT not in imported.parents
    assert importlib.metadata.version("willump") == willump.__version__


def test_every_module_of_the_source_tree_is_installed_and_imports():
    modules = _source_modules()
    assert "willump/compile/__init__.py" in modules
    missing = sorted(set(modules) - _installed_files())
    assert not missing, f"the installed package lacks {missing}: add the folders' __init__.py files"
    installed = Path(importlib.metadata.distribution("willump").locate_file(""))
    stale = [file for file in modules if (installed / file).read_bytes() != (ROOT / file).read_bytes()]
    assert not stale, f"the installed {stale} differ from the clone's: install it again (pip install .)"
    for file in modules:
        name = file[: -len(".py")].replace("/", ".").removesuffix(".__init__")
        try:
            importlib.import_module(name)
        except ImportError as error:  # (a module of an extra not installed, or unusable: it says which)
            if name not in NEEDS_AN_EXTRA or f'pip install "willump[{NEEDS_AN_EXTRA[name]}]"' not in str(error):
                raise


def test_the_package_imports_from_another_directory(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import willump, willump.compile.registry; print(willump.__file__)"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert ROOT not in Path(done.stdout.strip()).resolve().parents
