#!/usr/bin/env python3
"""Checks a wheel's archive as the binary distribution format specifies it, with the
standard library only (tests/windows_wheel.rs runs it on the Windows wheel).

    check_wheel.py WHEEL OUTDIR

- the archive is a valid zip whose members' CRCs hold, without absolute or ".." names
  or duplicates, with exactly one NAME-VERSION.dist-info holding WHEEL, METADATA, RECORD;
- RECORD lists every member exactly once, and every member but RECORD itself with
  "sha256=" + the urlsafe base64 of its SHA-256 digest without "=" padding and its size
  in bytes, both matching the member.

Extracts every *.pyd member into OUTDIR (for objdump) and prints one JSON object:
{"members": [...], "dist_info": "...", "wheel": {"Key": ["value", ...]}, "recorded": N}.
Exits 1 naming every problem found.
"""

import base64
import csv
import hashlib
import io
import json
import os
import sys
import zipfile


def main():
    wheel, outdir = sys.argv[1], sys.argv[2]
    problems = []
    with zipfile.ZipFile(wheel) as z:
        bad = z.testzip()
        if bad is not None:
            problems.append(f"member {bad} fails its CRC check")
        members = [i.filename for i in z.infolist() if not i.is_dir()]
        if len(set(members)) != len(members):
            problems.append("duplicate member names")
        for m in members:
            if m.startswith("/") or ".." in m.split("/") or "\\" in m:
                problems.append(f"unsafe member name {m!r}")
        dist_infos = sorted({m.split("/")[0] for m in members
                             if m.split("/")[0].endswith(".dist-info")})
        if len(dist_infos) != 1:
            problems.append(f"expected one .dist-info directory, found {dist_infos}")
            print("\n".join(problems), file=sys.stderr)
            return 1
        di = dist_infos[0]
        for f in ("WHEEL", "METADATA", "RECORD"):
            if f"{di}/{f}" not in members:
                problems.append(f"{di}/{f} is missing")
        wheel_meta = {}
        for line in z.read(f"{di}/WHEEL").decode("utf-8").splitlines():
            if ":" in line:
                k, v = line.split(":", 1)
                wheel_meta.setdefault(k.strip(), []).append(v.strip())
        record = f"{di}/RECORD"
        rows = list(csv.reader(io.StringIO(z.read(record).decode("utf-8"))))
        listed = {}
        for row in rows:
            if not row:
                continue
            if len(row) != 3:
                problems.append(f"RECORD row {row!r} does not have 3 fields")
                continue
            path, digest, size = row
            if path in listed:
                problems.append(f"RECORD lists {path} twice")
            listed[path] = (digest, size)
        for m in members:
            if m not in listed:
                problems.append(f"{m} is not in RECORD")
        for path, (digest, size) in listed.items():
            if path not in members:
                problems.append(f"RECORD lists {path}, which the archive lacks")
                continue
            if path == record:
                if digest or size:
                    problems.append("RECORD's own row has a hash or size")
                continue
            data = z.read(path)
            want = "sha256=" + base64.urlsafe_b64encode(
                hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
            if digest != want:
                problems.append(f"{path}: RECORD says {digest}, the member hashes to {want}")
            if size != str(len(data)):
                problems.append(f"{path}: RECORD says {size} bytes, the member has {len(data)}")
        os.makedirs(outdir, exist_ok=True)
        for m in members:
            if m.endswith(".pyd"):
                with open(os.path.join(outdir, os.path.basename(m)), "wb") as f:
                    f.write(z.read(m))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 1
    print(json.dumps({"members": members, "dist_info": di, "wheel": wheel_meta,
                      "recorded": len(listed)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
