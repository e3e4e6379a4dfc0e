"""GDS and GDS_MT through NIXL's Python API, against the project's fake libcufile: create_backend
with NIXL's parameters, nixl_agent_config's num_threads, the error without libcufile, and one of
GDS and GDS_MT per agent. Their transfers, path mode and queries are test_files.py's, over every
file backend."""

import os

import pytest

import nixl
from nixl._api import nixl_agent, nixl_agent_config

from test_files import FAKE, needs_gds

pytestmark = needs_gds


@pytest.fixture(autouse=True)
def fake_cufile(monkeypatch):
    monkeypatch.setenv("NIXL_CUFILE_PATH", FAKE)


def test_create_backends_with_nixl_parameters(unique_name):
    a = nixl_agent(unique_name("gds"), nixl_agent_config(backends=[]))
    a.create_backend("GDS")
    p = a.get_backend_params("GDS")
    assert (p["batch_pool_size"], p["batch_limit"], p["max_request_size"]) == ("16", "128", str(16 << 20))
    b = nixl_agent(unique_name("gdsmt"), nixl_agent_config(backends=[]))
    b.create_backend("GDS_MT", {"thread_count": "8"})
    assert b.get_backend_params("GDS_MT")["thread_count"] == "8"
    assert set(a.get_plugin_mem_types("GDS")) >= {"DRAM_SEG", "VRAM_SEG", "FILE_SEG"}


def test_num_threads_becomes_thread_count(unique_name):
    a = nixl_agent(unique_name("cfg"), nixl_agent_config(backends=["GDS_MT"], num_threads=3))
    assert "GDS_MT" in a.backends
    assert a.get_backend_params("GDS_MT")["thread_count"] == "3"


def test_without_libcufile_the_backend_does_not_start(unique_name, monkeypatch):
    monkeypatch.setenv("NIXL_CUFILE_PATH", "/nonexistent/libcufile.so.0")
    a = nixl_agent(unique_name("nolib"), nixl_agent_config(backends=[]))
    with pytest.raises(nixl.nixlBackendError, match="libcufile not found"):
        a.create_backend("GDS")
    with pytest.raises(nixl.nixlBackendError, match="libcufile not found"):
        a.create_backend("GDS_MT")


def test_gds_and_gds_mt_not_in_one_agent(unique_name):
    """NIXL refuses the second of GDS and GDS_MT in one agent with NOT_ALLOWED; another agent may."""
    a = nixl_agent(unique_name("both"), nixl_agent_config(backends=["GDS"]))
    with pytest.raises(nixl.nixlNotAllowedError, match="only one of GDS and GDS_MT"):
        a.create_backend("GDS_MT")
    assert "GDS_MT" not in a.backends
    b = nixl_agent(unique_name("other"), nixl_agent_config(backends=["GDS_MT"]))
    assert "GDS_MT" in b.backends


def _bindings_file():
    import nixl._bindings as b

    return b.__file__


def test_the_module_exports_only_its_entry_point():
    """Symbols the extension exported (its C++ library's template instances among them) bound
    into libcufile loaded later, which then freed this module's copy of a string's static empty
    representation: `create_backend("GDS")` aborted in a bare process. Only PyInit__bindings
    leaves the module now."""
    import shutil
    import subprocess

    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm (binutils) is not installed")
    out = subprocess.run([nm, "-D", "--defined-only", _bindings_file()], check=True,
                         capture_output=True, text=True).stdout.split()
    defined = [w for w in out if not all(c in "0123456789abcdef" for c in w) and len(w) > 1]
    assert defined == ["PyInit__bindings"]


@pytest.mark.parametrize("backend", ["GDS", "GDS_MT"])
def test_created_in_a_bare_process(backend, monkeypatch):
    """A fresh interpreter that imports nothing but nixl creates the backend and exits cleanly
    (with the real libcufile on a GPU machine, else with the project's fake)."""
    import subprocess
    import sys

    if os.environ.get("NIXL_TEST_REAL_CUFILE") == "1":
        monkeypatch.delenv("NIXL_CUFILE_PATH", raising=False)
    prog = (
        "from nixl._api import nixl_agent, nixl_agent_config\n"
        "a = nixl_agent('bare', nixl_agent_config(backends=[]))\n"
        f"a.create_backend('{backend}')\n"
        f"assert '{backend}' in a.backends\n"
    )
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "invalid pointer" not in r.stderr
