"""Builds the `nixl` Python package with CMake: `pip install --no-build-isolation .`.

CMake configures this tree with the Python module on (and tests, examples, benchmarks off),
builds the target `nixl_python` and the extension `nixl._bindings` is taken from its build
tree; the pure-Python modules come from python/nixl. Environment:
  NIXL_CMAKE_ARGS       extra configure arguments (e.g. "-DNIXL_UCX_ROOT=/usr -DNIXL_WITH_CUDA=OFF")
  NIXL_CMAKE_BUILD_DIR  a CMake build folder to use (configured already or not) instead of a
                        fresh one under build/
  NIXL_BUILD_JOBS       parallel build jobs (default: all CPUs)
"""

import glob
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    with open(os.path.join(HERE, "CMakeLists.txt")) as f:
        m = re.search(r"project\(nixl VERSION ([0-9.]+)", f.read())
    return m.group(1) if m else "0.0.0"


class _CMakeExtension(Extension):
    def __init__(self):
        super().__init__("nixl._bindings", sources=[])


class _CMakeBuild(build_ext):
    def build_extension(self, ext):
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("building nixl needs cmake (Debian: apt install cmake)")
        build = os.environ.get("NIXL_CMAKE_BUILD_DIR") or os.path.join(
            os.path.abspath(self.build_temp), "cmake")
        build = os.path.abspath(build)
        if not os.path.exists(os.path.join(build, "CMakeCache.txt")):
            args = [cmake, "-S", HERE, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                    "-DNIXL_BUILD_PYTHON=ON", "-DNIXL_BUILD_TESTS=OFF",
                    "-DNIXL_BUILD_EXAMPLES=OFF", "-DNIXL_BUILD_BENCH=OFF",
                    f"-DPython_EXECUTABLE={sys.executable}"]
            if shutil.which("ninja"):
                args += ["-G", "Ninja"]
            args += shlex.split(os.environ.get("NIXL_CMAKE_ARGS", ""))
            subprocess.check_call(args)
        jobs = os.environ.get("NIXL_BUILD_JOBS") or str(os.cpu_count() or 1)
        subprocess.check_call([cmake, "--build", build, "--target", "nixl_python", "-j", jobs])
        built = glob.glob(os.path.join(build, "python", "nixl", "_bindings*.so"))
        if len(built) != 1:
            raise RuntimeError(f"nixl: expected one _bindings extension under {build}/python/nixl, "
                               f"found {built}")
        dest = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copyfile(built[0], dest)


setup(
    name="nixl",
    version=_version(),
    description="NIXL-compatible transfer library (C++20) and NIXL's Python API",
    python_requires=">=3.8",
    install_requires=["numpy"],
    packages=["nixl"],
    package_dir={"nixl": "python/nixl"},
    ext_modules=[_CMakeExtension()],
    cmdclass={"build_ext": _CMakeBuild},
    zip_safe=False,
)
