"""Builds the Python package `sanpath` (python/) with the project's CMake.

    /usr/bin/python3 -m venv --system-site-packages /tmp/v
    /tmp/v/bin/pip install --no-build-isolation --no-index .

Offline: setuptools and wheel from Debian, pybind11 from pybind11-dev, the
library's own dependencies as for the CLI. The extension sanpath._sanpath is
the CMake target `_sanpath` (SANPATH_BUILD_PYTHON=ON); set
SANPATH_CMAKE_BUILD_DIR to reuse an existing CMake build tree (only the
extension and what it needs are built there). There is no build for one CPU:
the double products choose the instruction set at run time.
"""
import os
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        out = os.path.dirname(os.path.abspath(self.get_ext_fullpath(ext.name)))
        build = os.environ.get("SANPATH_CMAKE_BUILD_DIR") or os.path.join(os.path.abspath(self.build_temp), "cmake")
        args = ["-DSANPATH_BUILD_PYTHON=ON", "-DSANPATH_PYTHON_OUTPUT_DIR=" + out,
                # the interpreter itself, not a venv link that may be gone by the next build
                "-DPython_EXECUTABLE=" + os.path.realpath(sys.executable)]
        if os.environ.get("SANPATH_NATIVE"):
            print("setup.py: SANPATH_NATIVE is gone and ignored: the double products choose the CPU's "
                  "instruction set at run time", file=sys.stderr)
        if not os.environ.get("SANPATH_CMAKE_BUILD_DIR"):
            args += ["-DSANPATH_BUILD_TESTS=OFF", "-DSANPATH_BUILD_CLI=OFF", "-DCMAKE_BUILD_TYPE=Release"]
            if shutil.which("ccache"):
                args.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
        subprocess.check_call(["cmake", "-S", ROOT, "-B", build] + args, stdout=subprocess.DEVNULL)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        subprocess.check_call(["cmake", "--build", build, "--target", "_sanpath", "-j", jobs])
        # The output folder is this build's only: the next plain CMake build writes to <build>/python/sanpath.
        subprocess.check_call(["cmake", "-U", "SANPATH_PYTHON_OUTPUT_DIR", build], stdout=subprocess.DEVNULL)


setup(
    packages=["sanpath"],
    package_dir={"": "python"},
    package_data={"sanpath": ["py.typed", "*.pyi"]},
    ext_modules=[CMakeExtension("sanpath._sanpath")],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-python"}, "egg_info": {"egg_base": "build-python"}},
    zip_safe=False,
)
