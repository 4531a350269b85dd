"""The type stubs match the runtime: mypy's stubtest compares every stub (the native
module's `_native.pyi` and the package's inline annotations) with the installed module,
and mypy --strict checks the package against them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import zarrstream


def test_stubs_match_the_runtime() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy.stubtest", "zarrstream"],
                          capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success" in done.stdout


def test_package_is_typed_and_strict_clean(tmp_path: Path) -> None:
    package = Path(zarrstream.__file__).parent
    assert (package / "py.typed").exists()
    assert (package / "_native.pyi").exists()
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(tmp_path), "-p",
         "zarrstream"], capture_output=True, text=True, timeout=540)
    assert done.returncode == 0, done.stdout + done.stderr


def test_stubtest_notices_drift(tmp_path: Path) -> None:
    """The check can fail: a stub naming a method the runtime lacks is reported."""
    package = Path(zarrstream.__file__).parent
    stub = (package / "_native.pyi").read_text()
    fake = tmp_path / "zarrstream"
    fake.mkdir()
    for f in package.iterdir():
        if f.is_file():
            (fake / f.name).write_bytes(f.read_bytes())
    (fake / "_native.pyi").write_text(
        stub.replace("    def skip(self, key: str | None, n: int) -> None: ...",
                     "    def skip(self, key: str | None, n: int) -> None: ...\n"
                     "    def rewind(self) -> None: ..."))
    done = subprocess.run([sys.executable, "-m", "mypy.stubtest", "zarrstream"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=540,
                          env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0
    assert "rewind" in done.stdout
