"""A real S3-compatible object store for the object-store tests: one Garage node on
127.0.0.1 with an access key and a bucket, set up as the Rust harness
(``crates/zarrstream-testkit/src/garage/``) sets up its single node.

The binary is ``$ZARRSTREAM_GARAGE``, else ``${ZARRSTREAM_CACHE:-$HOME/.cache/zarrstream}/
garage-VERSION-o1/bin/garage`` (``tools/garage/build``'s rule). ``cargo test -p zarrstream-python``
(``tests/pytest.rs``) makes sure it exists through the harness, building it when missing,
and passes its path in ``ZARRSTREAM_GARAGE``; a plain ``pytest`` run uses what is there.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

#: The release the tests are written against: the one ``tools/garage/build`` builds.
VERSION = (Path(__file__).resolve().parents[4] / "tools" / "garage" / "VERSION").read_text(
    encoding="utf-8").strip()
REGION = "garage"
BUCKET = "zarrstream-test"
#: How long the node may take to come up: the tests share two cores with compilers.
READY_TIMEOUT = 120.0


def binary() -> Path:
    """Where the Garage binary is expected (it may not exist)."""
    named = os.environ.get("ZARRSTREAM_GARAGE")
    if named:
        return Path(named)
    cache = os.environ.get("ZARRSTREAM_CACHE") or os.path.join(
        os.environ.get("HOME", "/tmp"), ".cache", "zarrstream")
    return Path(cache) / f"garage-{VERSION}-o1" / "bin" / "garage"


def in_ci() -> bool:
    """Whether this run is CI (``CI`` set to anything but empty, ``false`` or ``0``)."""
    return os.environ.get("CI", "") not in ("", "false", "0")


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free ports, all probed while every probe socket is still open."""
    probes = [socket.socket() for _ in range(n)]
    try:
        for s in probes:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in probes]
    finally:
        for s in probes:
            s.close()


def dead_endpoint() -> str:
    """An endpoint nobody listens on."""
    return f"http://127.0.0.1:{_free_ports(1)[0]}"


@dataclass
class Garage:
    """A running single-node Garage: its S3 endpoint, a key owning :data:`BUCKET`."""

    bin: Path
    dir: Path
    config: Path
    log: Path
    endpoint: str
    key_id: str
    secret: str
    process: subprocess.Popen[bytes]
    bucket: str = BUCKET
    region: str = REGION

    def store_options(self, **overrides: str) -> dict[str, str]:
        """The ``store_options`` of a writer reaching this node with the owner key."""
        return {
            "aws_endpoint": self.endpoint,
            "aws_region": self.region,
            "aws_access_key_id": self.key_id,
            "aws_secret_access_key": self.secret,
            **overrides,
        }

    def cli(self, *args: str) -> str:
        """``garage -c CONFIG ARGS...``'s stdout; raises with its output and the log."""
        done = subprocess.run([str(self.bin), "-c", str(self.config), *args],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"`garage {' '.join(args)}` failed ({done.returncode}):\n"
                               f"{done.stdout}{done.stderr}\n{self.tail()}")
        return done.stdout

    def tail(self, n: int = 40) -> str:
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        return f"--- end of the node's log ({self.log}):\n" + "\n".join(lines[-n:])

    def wait_for(self, what: str, check: Callable[[], str | None]) -> None:
        """Polls ``check()`` (returning ``None`` when ready, else why not) until ready;
        raises after :data:`READY_TIMEOUT` or when the server has exited."""
        until = time.monotonic() + READY_TIMEOUT
        pause = 0.05
        while True:
            try:
                why = check()
            except Exception as e:  # a CLI failure while the node boots
                why = str(e)
            if why is None:
                return
            code = self.process.poll()
            if code is not None or time.monotonic() > until:
                state = (f"the server exited ({code})" if code is not None
                         else f"not ready within {READY_TIMEOUT:.0f} s")
                raise RuntimeError(f"garage: {what}: {state}; last: {why}\n{self.tail()}")
            time.sleep(pause)
            pause = min(pause * 2, 0.5)

    def stop(self, *, gently: bool = True) -> None:
        """Stops the server as an operator does (SIGTERM, SIGKILL after 10 s), or at
        once (SIGKILL) unless ``gently``; its data stay and :meth:`restart` brings it
        back."""
        if self.process.poll() is None and not gently:
            self.process.kill()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.process.wait()

    def restart(self) -> None:
        """Starts the stopped server again with the same config and data and waits
        until the cluster is healthy and S3 answers."""
        assert self.process.poll() is not None, "the server is running"
        self.process = _spawn(self.bin, self.config, self.log)
        self.wait_for("RPC up (`garage status`)", self._rpc_up)
        self.wait_for("cluster healthy", self._healthy)
        self.wait_for("S3 API answering", self._s3_served)

    def _rpc_up(self) -> str | None:
        self.cli("status")
        return None

    def _healthy(self) -> str | None:
        out = self.cli("json-api", "GetClusterHealth")
        v = json.loads(out)
        ok = (v.get("status") == "healthy" and v.get("storageNodesUp") == 1
              and v.get("partitionsAllOk") == v.get("partitions"))
        return None if ok else out

    def _s3_served(self) -> str | None:
        # An unsigned request gets 403; what matters is that S3 is served.
        host, port = self.endpoint.removeprefix("http://").split(":")
        c = http.client.HTTPConnection(host, int(port), timeout=5)
        try:
            c.request("GET", f"/{self.bucket}")
            status = c.getresponse().status
        finally:
            c.close()
        return None if status < 500 else f"HTTP {status}"


def _spawn(bin: Path, config: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(
            [str(bin), "-c", str(config), "server"], stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RUST_LOG": "garage=info", "NO_COLOR": "1"})


def start(bin: Path, dir: Path) -> Garage:
    """Starts one node under ``dir`` (replication factor 1), applies its layout, creates
    the key and :data:`BUCKET`, and waits until S3 answers."""
    dir.mkdir(parents=True, exist_ok=True)
    rpc_port, s3_port, admin_port = _free_ports(3)
    config = dir / "garage.toml"
    config.write_text(
        f'metadata_dir = "{dir / "meta"}"\n'
        f'data_dir = "{dir / "data"}"\n'
        'db_engine = "sqlite"\n'
        "replication_factor = 1\n"
        f'rpc_bind_addr = "127.0.0.1:{rpc_port}"\n'
        f'rpc_public_addr = "127.0.0.1:{rpc_port}"\n'
        f'rpc_secret = "{secrets.token_hex(32)}"\n'
        "\n[s3_api]\n"
        f's3_region = "{REGION}"\n'
        f'api_bind_addr = "127.0.0.1:{s3_port}"\n'
        "\n[admin]\n"
        f'api_bind_addr = "127.0.0.1:{admin_port}"\n')
    log = dir / "garage.log"
    started = time.monotonic()
    g = Garage(bin=bin, dir=dir, config=config, log=log,
               endpoint=f"http://127.0.0.1:{s3_port}", key_id="", secret="",
               process=_spawn(bin, config, log))
    try:
        g.wait_for("RPC up (`garage status`)", g._rpc_up)
        node = g.cli("node", "id", "-q").strip().split("@")[0]
        g.cli("layout", "assign", "-z", "dc1", "-c", "1G", node)
        g.cli("layout", "apply", "--version", "1")
        g.wait_for("cluster healthy", g._healthy)
        key = json.loads(g.cli("json-api", "CreateKey", json.dumps({"name": "zarrstream-test"})))
        g.key_id, g.secret = key["accessKeyId"], key["secretAccessKey"]
        g.cli("bucket", "create", BUCKET)
        g.cli("bucket", "allow", "--read", "--write", "--owner", BUCKET, "--key", g.key_id)
        g.wait_for("S3 API answering", g._s3_served)
    except BaseException:
        g.stop()
        raise
    print(f"garage: 1 node ready in {time.monotonic() - started:.1f} s under {dir}")
    return g
