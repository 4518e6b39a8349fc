"""sanpath/_sanpath.pyi declares exactly what the compiled module defines, and
the package exports what __all__ lists."""
import ast
import os

import sanpath
from sanpath import _sanpath


def stub_names():
    path = os.path.join(os.path.dirname(sanpath.__file__), "_sanpath.pyi")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return {n for n in names if not n.startswith("_")}


def test_stubs_match_the_module():
    defined = {n for n in dir(_sanpath) if not n.startswith("_")}
    assert stub_names() == defined


def test_all_is_exported():
    missing = [n for n in sanpath.__all__ if not hasattr(sanpath, n)]
    assert missing == []
