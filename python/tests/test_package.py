"""The package ships its type information, and it is true."""

import pathlib
import subprocess
import sys

import dynsim


def test_the_package_is_typed():
    folder = pathlib.Path(dynsim.__file__).parent
    assert (folder / "py.typed").exists()
    assert (folder / "_native.pyi").exists()
    assert dynsim.run.__doc__ and dynsim.Simulation.observe.__doc__


def test_the_native_stubs_match_the_module():
    # _native.pyi stubbed NativeSimulation with an __init__ (it has a __new__), not @final,
    # and without the module's __all__: 11 errors.
    out = subprocess.run(
        [sys.executable, "-m", "mypy.stubtest", "dynsim._native"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_package_type_checks_strictly(tmp_path):
    # mypy --strict found 7 gaps: comparisons of numbers.Integral and json.loads's Any returned
    # as a dict. Checked where the package is installed (tmp_path: not the source folder).
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "-p", "dynsim"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stdout + out.stderr
