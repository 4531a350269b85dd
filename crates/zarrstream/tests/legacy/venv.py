#!/usr/bin/env python3
"""Creates (once) the zarr-python 2.18 environment that writes legacy fixtures.

    python3 tests/legacy/venv.py VENV_DIR

The same machinery as tests/interop/venv.py (marker file with the hash of the
requirements and the base interpreter, rebuild on change, flock on VENV_DIR.lock, the
interpreter's path as the last line of stdout), pointed at requirements.txt beside this
script.
"""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_interop_venv():
    path = os.path.join(HERE, "..", "interop", "venv.py")
    spec = importlib.util.spec_from_file_location("interop_venv", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    mod = load_interop_venv()
    mod.REQUIREMENTS = os.path.join(HERE, "requirements.txt")
    mod.MARKER = ".zarrstream-legacy-ready"
    mod.CHECK = {"zarr": "zarr", "numcodecs": "numcodecs", "numpy": "numpy",
                 "pytest": "pytest"}

    def log(msg):
        print(f"legacy venv: {msg}", file=sys.stderr, flush=True)

    mod.log = log
    mod.main()


if __name__ == "__main__":
    main()
