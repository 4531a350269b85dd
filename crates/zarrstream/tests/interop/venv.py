#!/usr/bin/env python3
"""Creates (once) the Python environment of the interoperability suite.

    python3 tests/interop/venv.py VENV_DIR [REQUIREMENTS]

Builds a virtual environment at VENV_DIR with the exact versions pinned in REQUIREMENTS
(default: requirements.txt beside this script; the Python package's tests pass their
own) and prints its interpreter's path as the last line of stdout. Idempotent and fast when the environment is already there: a marker file
records the hash of the requirements and the base interpreter; any change rebuilds.
Concurrent callers serialise on VENV_DIR.lock (fcntl.flock), so parallel tests never
race. Exit status 0 on success; 1 with the reason on stderr otherwise.
"""

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REQUIREMENTS = os.path.join(HERE, "requirements.txt")  # main() may replace it
MARKER = ".zarrstream-interop-ready"
# Import name -> distribution name, checked against the pins after installing.
CHECK = {"zarr": "zarr", "numcodecs": "numcodecs", "tensorstore": "tensorstore",
         "zarrs": "zarrs", "numpy": "numpy", "fsspec": "fsspec",
         "fastparquet": "fastparquet", "pandas": "pandas",
         "ome_zarr_models": "ome-zarr-models", "ome_zarr": "ome-zarr"}


def log(msg):
    print(f"interop venv: {msg}", file=sys.stderr, flush=True)


def fail(msg):
    log(f"ERROR: {msg}")
    sys.exit(1)


def pins():
    out = {}
    with open(REQUIREMENTS, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, version = line.partition("==")
                name = name.split("[", 1)[0]  # "yaozarrs[io]" pins the distribution yaozarrs
                out[name.strip().lower().replace("_", "-")] = version.strip()
    return out


def fingerprint():
    h = hashlib.sha256()
    with open(REQUIREMENTS, "rb") as f:
        h.update(f.read())
    h.update(sys.version.encode())
    h.update(os.path.realpath(sys.executable).encode())
    return h.hexdigest()


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def run(cmd, what):
    log(f"{what}: {' '.join(cmd)}")
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        fail(f"{what} failed (exit {p.returncode}):\n{p.stdout}")
    return p.stdout


def verify(py):
    """Imports every reader in the environment and compares versions with the pins."""
    # The interop readers are imported; any other set has its pins' versions compared.
    check = CHECK if REQUIREMENTS == os.path.join(HERE, "requirements.txt") else {}
    names = list(check.values()) or list(pins())
    code = ("import importlib.metadata as m, json, sys\n"
            f"names = {names!r}\n"
            f"mods = {list(check.keys())!r}\n"
            "for mod in mods: __import__(mod)\n"
            "print(json.dumps({n: m.version(n) for n in names}))\n")
    p = subprocess.run([py, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if p.returncode != 0:
        return f"importing the readers failed:\n{p.stderr}"
    import json
    got = json.loads(p.stdout.strip().splitlines()[-1])
    want = pins()
    bad = [f"{n} {got[n]} (pinned {want.get(n)})" for n in got if want.get(n) != got[n]]
    return f"version mismatch: {', '.join(bad)}" if bad else None


def build(venv):
    if os.path.exists(venv):
        shutil.rmtree(venv)
    py = venv_python(venv)
    pip_args = ["install", "--no-input", "--disable-pip-version-check",
                "--progress-bar", "off", "-r", REQUIREMENTS]
    made = subprocess.run([sys.executable, "-m", "venv", venv], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    if made.returncode == 0:
        run([py, "-m", "pip"] + pip_args, "pip install")
    else:
        # No ensurepip (e.g. Debian without python3-venv): an environment without pip,
        # filled by the base interpreter's pip (pip >= 22.3 has --python).
        log(f"'python -m venv' failed ({made.stdout.strip()}); trying --without-pip")
        if os.path.exists(venv):
            shutil.rmtree(venv)
        run([sys.executable, "-m", "venv", "--without-pip", venv], "venv --without-pip")
        run([sys.executable, "-m", "pip", "--python", py] + pip_args,
            "pip install (base interpreter's pip)")
    problem = verify(py)
    if problem:
        fail(problem)
    with open(os.path.join(venv, MARKER), "w", encoding="utf-8") as f:
        f.write(fingerprint())


def main():
    global REQUIREMENTS
    if len(sys.argv) not in (2, 3):
        fail("usage: venv.py VENV_DIR [REQUIREMENTS]")
    if len(sys.argv) == 3:
        REQUIREMENTS = os.path.abspath(sys.argv[2])
    if sys.version_info < (3, 11):
        fail(f"Python >= 3.11 is needed (zarr 3.1), this is {sys.version.split()[0]} "
             f"at {sys.executable}; set ZARRSTREAM_PYTHON to a newer interpreter")
    venv = os.path.abspath(sys.argv[1])
    os.makedirs(os.path.dirname(venv), exist_ok=True)
    with open(venv + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        marker = os.path.join(venv, MARKER)
        ready = False
        if os.path.exists(marker) and os.path.exists(venv_python(venv)):
            with open(marker, encoding="utf-8") as f:
                ready = f.read().strip() == fingerprint()
        if not ready:
            log(f"creating {venv} from {REQUIREMENTS} with {sys.executable} "
                f"(Python {sys.version.split()[0]})")
            build(venv)
            log("ready")
    print(venv_python(venv))


if __name__ == "__main__":
    main()
