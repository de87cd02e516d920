"""The package ships its type information."""

import pathlib

import dynsim


def test_the_package_is_typed():
    folder = pathlib.Path(dynsim.__file__).parent
    assert (folder / "py.typed").exists()
    assert (folder / "_native.pyi").exists()
    assert dynsim.run.__doc__ and dynsim.Simulation.observe.__doc__
