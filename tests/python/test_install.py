"""pip install . and pip wheel . (CMake underneath, offline, --no-build-isolation) into a
temporary prefix; the README's Python example then runs from outside the tree."""

import glob
import os
import re
import subprocess
import sys

import pytest

import nixl

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def _have(mod):
    return subprocess.run([sys.executable, "-c", f"import {mod}"], capture_output=True).returncode == 0


def _build_dir():
    """The CMake build folder of the nixl package under test (<build>/python/nixl)."""
    d = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(nixl.__file__))))
    return d if os.path.exists(os.path.join(d, "CMakeCache.txt")) else None


def _site(prefix):
    """The folder under `prefix` that holds the installed package (Debian's pip installs into
    <prefix>/local/lib/python3.X/dist-packages, others into .../site-packages)."""
    found = glob.glob(os.path.join(prefix, "**", "nixl", "__init__.py"), recursive=True)
    assert len(found) == 1, f"nixl installed {len(found)} times under {prefix}"
    return os.path.dirname(os.path.dirname(found[0]))


def _readme_code():
    with open(os.path.join(ROOT, "README.md")) as f:
        section = f.read().split("## Python in ten lines", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    return code + ("\nimport numpy, nixl, os\nassert numpy.array_equal(src, dst)\n"
                   "print('NIXL AT', os.path.dirname(nixl.__file__))\n")


def _clean_env(site):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NIXL_PYTHON_PATH")}
    env["PYTHONPATH"] = site
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


@pytest.mark.skipif(not (_have("pip") and _have("setuptools") and _have("wheel")),
                    reason="needs pip, setuptools and wheel (python3-pip, python3-setuptools, "
                           "python3-wheel)")
@pytest.mark.skipif("UCX" not in nixl._bindings._BUILT_BACKENDS, reason="the README uses UCX")
def test_pip_install_and_wheel_then_readme_from_outside(tmp_path):
    build = _build_dir()
    if build is None:
        pytest.skip("the nixl under test is not in a CMake build tree (nothing to reuse)")
    env = dict(os.environ, NIXL_CMAKE_BUILD_DIR=build, NIXL_BUILD_JOBS="1",
               PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    pip = [sys.executable, "-m", "pip"]
    # pip wheel .
    wheels = tmp_path / "wheels"
    r = subprocess.run(pip + ["wheel", "--no-build-isolation", "--no-deps", "-w", str(wheels),
                              ROOT], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=1800)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    whl = glob.glob(str(wheels / "nixl-*.whl"))
    assert len(whl) == 1, os.listdir(wheels)
    import zipfile

    names = zipfile.ZipFile(whl[0]).namelist()
    assert any(re.fullmatch(r"nixl/_bindings.*\.so", n) for n in names), names
    assert {"nixl/__init__.py", "nixl/_api.py", "nixl/logging.py"} <= set(names)
    # pip install . (and the wheel) into temporary prefixes; run from a folder outside the tree
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    for what, src in (("tree", ROOT), ("wheel", whl[0])):
        prefix = tmp_path / f"prefix-{what}"
        r = subprocess.run(pip + ["install", "--no-build-isolation", "--no-deps", "--prefix",
                                  str(prefix), src], cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=1800)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        site = _site(str(prefix))
        assert glob.glob(os.path.join(site, "nixl", "_bindings*.so")), what
        r = subprocess.run([sys.executable, "-c", "import nixl, os; print(nixl.__file__)"],
                           cwd=outside, env=_clean_env(site), capture_output=True, text=True,
                           timeout=120)
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip().startswith(site), (what, r.stdout)
        r = subprocess.run([sys.executable, "-c", _readme_code()], cwd=outside,
                           env=_clean_env(site), capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr[-3000:]
        assert f"NIXL AT {os.path.join(site, 'nixl')}" in r.stdout, (what, r.stdout[-2000:])
