"""Runs ome-writers' own test suite with zarrstream registered as a backend.

    python crates/zarrstream-python/tests/ome_writers_suite.py TARGET_DIR [--json OUT]

Downloads the ome-writers sdist (``pip download --no-binary :all:``) into
``TARGET_DIR/ome-writers-suite/`` (reused when present), extracts it, and runs pytest
over its ``tests/`` in this interpreter with the plugin ``zarrstream_ow_plugin`` (which
calls ``zarrstream.ome_writers.register()`` before ome-writers' conftest parametrises its
backend fixtures), so every backend-parametrised test runs as ``[zarrstream]`` beside
``[acquire-zarr]``, ``[tensorstore]``, …

Then counts, per backend and for the tests without a backend parameter, how many ran,
passed, failed and were skipped, prints a table, and exits non-zero when

- a ``[zarrstream]`` test fails while its ``[acquire-zarr]`` twin does not, unless the
  failure is one of the justified ones listed in ``JUSTIFIED`` (each with its reason);
- a test without a backend parameter fails (they run with zarrstream registered, first
  for ``"auto"``), or a test module fails to import because of zarrstream;
- no ``[zarrstream]`` test ran at all (the plugin did not register the backend).

Exit status 3: the sdist could not be downloaded (no network); 2: no report, or an
ome-writers other than the one the suite is for is installed.

ome-writers' pyproject (``filterwarnings = ["error", …]``) applies, as in its own CI.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.metadata
import json
import os
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

OME_WRITERS_VERSION = "0.3.2"
PLUGIN_DIR = Path(__file__).resolve().parent / "python"
PLUGIN = "zarrstream_ow_plugin"
OURS = "zarrstream"
PEER = "acquire-zarr"
#: Exit status when the sdist cannot be downloaded (no network, say).
DOWNLOAD_FAILED = 3
BACKENDS = (OURS, "acquire-zarr", "tensorstore", "zarrs-python", "zarr-python",
            "tifffile", "scratch")


@dataclasses.dataclass(frozen=True)
class Justified:
    """A ``[zarrstream]`` failure that is expected, and why."""

    #: Matched against the test id (``path::name[params]``).
    test: str
    #: Matched against the failure message and text ("" matches anything).
    message: str
    reason: str


#: Failures of ``[zarrstream]`` tests that pass for acquire-zarr, with the reason each is
#: accepted: a deliberate refusal (``is_incompatible``, which lets ``"auto"`` fall
#: through to the next backend) or a difference in what a test asserts. None today:
#: frames are written by index in any acquisition order (no refusal of a moved append
#: axis), single frames (rank 2) are arrays, and ``compression="none"`` writes no codec
#: but ``bytes``.
JUSTIFIED: tuple[Justified, ...] = ()


@dataclasses.dataclass
class Case:
    """One test case from the JUnit report."""

    id: str
    outcome: str  # passed, failed, skipped
    message: str = ""

    @property
    def params(self) -> str:
        m = re.search(r"\[(.*)\]$", self.id)
        return m.group(1) if m else ""

    @property
    def backend(self) -> str | None:
        """The backend parameter in the test id, if any."""
        params = self.params
        for name in BACKENDS:
            if re.search(rf"(^|-){re.escape(name)}(-|$)", params):
                return name
        return None


def fetch_suite(cache: Path) -> Path:
    """The extracted sdist directory, downloading and extracting it if needed."""
    cache.mkdir(parents=True, exist_ok=True)
    root = cache / f"ome_writers-{OME_WRITERS_VERSION}"
    if (root / "tests" / "conftest.py").is_file() and (root / "pyproject.toml").is_file():
        return root
    sdists = sorted(cache.glob(f"ome_writers-{OME_WRITERS_VERSION}.tar.gz"))
    if not sdists:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--no-binary", ":all:", f"ome-writers=={OME_WRITERS_VERSION}",
             "--dest", str(cache)],
            check=False)
        sdists = sorted(cache.glob(f"ome_writers-{OME_WRITERS_VERSION}.tar.gz"))
        if done.returncode != 0 or not sdists:
            print(f"could not download the ome-writers {OME_WRITERS_VERSION} sdist "
                  f"(pip exit status {done.returncode}) into {cache}")
            raise SystemExit(DOWNLOAD_FAILED)
    with tarfile.open(sdists[0]) as tar:
        tar.extractall(cache, filter="data")
    if not (root / "tests" / "conftest.py").is_file():
        raise SystemExit(f"the sdist has no tests/ ({root})")
    return root


def run_pytest(root: Path, junit: Path, log: Path, extra: list[str]) -> int:
    """Runs ome-writers' tests with the plugin; returns pytest's exit status."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(PLUGIN_DIR), env.get("PYTHONPATH", "")) if p)
    cmd = [sys.executable, "-m", "pytest", "-p", PLUGIN, "-p", "no:cacheprovider",
           "-q", "-rfE", "--continue-on-collection-errors", f"--junitxml={junit}",
           "tests", *extra]
    print("running:", " ".join(cmd), f"(in {root}; log {log})", flush=True)
    with log.open("w") as out:
        return subprocess.run(cmd, cwd=root, env=env, stdout=out,
                              stderr=subprocess.STDOUT, check=False).returncode


def read_junit(junit: Path) -> tuple[list[Case], list[Case]]:
    """The test cases, and the modules that failed to import (collection errors)."""
    cases: list[Case] = []
    collection: list[Case] = []
    for tc in ET.parse(junit).getroot().iter("testcase"):
        classname, name = tc.get("classname", ""), tc.get("name", "")
        parts = classname.split(".")
        # classname "tests.test_x" or "tests.test_x.TestClass"
        module = "/".join(parts[:2]) + ".py" if len(parts) >= 2 else classname
        rest = "::".join(parts[2:] + [name])
        test_id = f"{module}::{rest}" if classname else name
        outcome, message = "passed", ""
        for child in tc:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = f"{child.get('message', '')}\n{child.text or ''}"
                break
            if child.tag == "skipped":
                outcome = "skipped"
                message = child.get("message", "")
        case = Case(test_id, outcome, message)
        if not classname and outcome == "failed":
            collection.append(case)
        else:
            cases.append(case)
    return cases, collection


def justify(case: Case) -> Justified | None:
    for j in JUSTIFIED:
        if re.fullmatch(j.test, case.id) and (
                not j.message or re.search(j.message, case.message)):
            return j
    return None


def summarise(cases: list[Case], collection: list[Case]) -> dict[str, object]:
    """Counts per backend and the verdict on every [zarrstream] failure."""
    counts: dict[str, dict[str, int]] = {}
    for c in cases:
        key = c.backend or "unparametrised"
        row = counts.setdefault(key, {"ran": 0, "passed": 0, "failed": 0, "skipped": 0})
        row[c.outcome] += 1
        if c.outcome != "skipped":
            row["ran"] += 1
    by_id = {c.id: c for c in cases}
    accepted: list[dict[str, str]] = []
    problems: list[dict[str, str]] = []
    for c in cases:
        if c.outcome != "failed":
            continue
        first = c.message.strip().splitlines()[0][:300] if c.message.strip() else ""
        if c.backend is None:
            problems.append({"test": c.id, "why": "a test without a backend parameter "
                             "failed with zarrstream registered", "message": first})
            continue
        if c.backend != OURS:
            continue
        twin = by_id.get(re.sub(rf"(\[|-){OURS}(-|\])", rf"\g<1>{PEER}\g<2>", c.id))
        if twin is not None and twin.outcome == "failed":
            accepted.append({"test": c.id, "reason": f"fails for {PEER} too",
                             "message": first})
        elif (j := justify(c)) is not None:
            accepted.append({"test": c.id, "reason": j.reason, "message": first})
        else:
            problems.append({"test": c.id, "why": "fails for zarrstream only",
                             "message": first})
    for c in collection:
        if OURS in c.message:
            problems.append({"test": c.id, "why": "module import failed because of "
                             "zarrstream", "message": c.message.strip()[:300]})
    if counts.get(OURS, {}).get("ran", 0) == 0:
        problems.append({"test": "-", "why": "no [zarrstream] test ran: the plugin did "
                         "not register the backend", "message": ""})
    return {
        "ome_writers": OME_WRITERS_VERSION,
        "counts": counts,
        "collection_errors": [
            {"module": c.id, "message": c.message.strip().splitlines()[-1][:300]
             if c.message.strip() else ""} for c in collection],
        "accepted_failures": accepted,
        "problems": problems,
    }


def print_summary(summary: dict[str, object]) -> None:
    counts = summary["counts"]
    assert isinstance(counts, dict)
    order = [b for b in (*BACKENDS, "unparametrised") if b in counts]
    print(f"\nome-writers {OME_WRITERS_VERSION} test suite, per backend:")
    print(f"{'backend':<16}{'ran':>6}{'passed':>8}{'failed':>8}{'skipped':>9}")
    for b in order:
        r = counts[b]
        print(f"{b:<16}{r['ran']:>6}{r['passed']:>8}{r['failed']:>8}{r['skipped']:>9}")
    for e in summary["collection_errors"]:  # type: ignore[attr-defined]
        print(f"collection error (not run): {e['module']}: {e['message']}")
    accepted = summary["accepted_failures"]
    assert isinstance(accepted, list)
    if accepted:
        reasons: dict[str, list[str]] = {}
        for a in accepted:
            reasons.setdefault(a["reason"], []).append(a["test"])
        print(f"\n{len(accepted)} [zarrstream] failures accepted:")
        for reason, tests in reasons.items():
            print(f"- {len(tests)} x {reason}")
            for t in tests:
                print(f"    {t}")
    problems = summary["problems"]
    assert isinstance(problems, list)
    if problems:
        print(f"\n{len(problems)} PROBLEMS:")
        for p in problems:
            print(f"- {p['test']}: {p['why']}\n    {p['message']}")
    else:
        print("\nno unjustified failures")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target_dir", type=Path,
                        help="where the sdist is cached and the reports go")
    parser.add_argument("--json", type=Path, default=None,
                        help="also write the summary as JSON here")
    parser.add_argument("pytest_args", nargs="*",
                        help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    installed = importlib.metadata.version("ome-writers")
    if installed != OME_WRITERS_VERSION:
        print(f"this interpreter has ome-writers {installed}; the suite and its list of "
              f"justified failures are for {OME_WRITERS_VERSION}")
        return 2
    cache = args.target_dir.resolve() / "ome-writers-suite"
    root = fetch_suite(cache)
    junit = cache / "junit.xml"
    junit.unlink(missing_ok=True)
    status = run_pytest(root, junit, cache / "pytest.log", args.pytest_args)
    if not junit.is_file():
        print((cache / "pytest.log").read_text()[-5000:])
        print(f"pytest wrote no report (exit status {status})")
        return 2
    cases, collection = read_junit(junit)
    summary = summarise(cases, collection)
    summary["pytest_exit_status"] = status
    print_summary(summary)
    if args.json is not None:
        args.json.write_text(json.dumps(summary, indent=2))
    return 1 if summary["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
