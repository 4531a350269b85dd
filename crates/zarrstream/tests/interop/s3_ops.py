"""Single S3 operations through botocore (and zarr-python over s3fs), for tests/remote/garage_harness.rs.

Run inside the pinned interop environment (tests/interop/venv.py):

    s3_ops.py put BUCKET KEY FILE               PutObject with FILE's bytes
    s3_ops.py put-multipart BUCKET KEY FILE N   multipart upload in parts of N bytes
    s3_ops.py get BUCKET KEY OUT                GetObject into OUT
    s3_ops.py list BUCKET PREFIX                ListObjectsV2: one key a line
    s3_ops.py zarr-write BUCKET PREFIX OUT.npy  zarr-python writes a small sharded uint16
                                                array at s3://BUCKET/PREFIX and saves the
                                                same values to OUT.npy

The endpoint, region and credentials come from AWS_ENDPOINT_URL, AWS_REGION,
AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; buckets are addressed path-style.
Exit status: 0 on success; 3 when the server refused the request, after a line
`REFUSED <S3 error code> <HTTP status>` on stdout; 1 on any other error.
"""

import os
import sys

import botocore.session
from botocore.config import Config
from botocore.exceptions import ClientError


def client():
    return botocore.session.get_session().create_client(
        "s3",
        endpoint_url=os.environ["AWS_ENDPOINT_URL"],
        region_name=os.environ["AWS_REGION"],
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=os.environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def put(bucket, key, path):
    with open(path, "rb") as f:
        client().put_object(Bucket=bucket, Key=key, Body=f.read())


def put_multipart(bucket, key, path, part_size):
    c = client()
    part_size = int(part_size)
    with open(path, "rb") as f:
        data = f.read()
    upload = c.create_multipart_upload(Bucket=bucket, Key=key)["UploadId"]
    parts = []
    for n, start in enumerate(range(0, len(data), part_size), start=1):
        r = c.upload_part(Bucket=bucket, Key=key, UploadId=upload, PartNumber=n,
                          Body=data[start:start + part_size])
        parts.append({"PartNumber": n, "ETag": r["ETag"]})
    c.complete_multipart_upload(Bucket=bucket, Key=key, UploadId=upload,
                                MultipartUpload={"Parts": parts})
    print(f"{len(parts)} parts")


def get(bucket, key, out):
    body = client().get_object(Bucket=bucket, Key=key)["Body"].read()
    with open(out, "wb") as f:
        f.write(body)


def list_keys(bucket, prefix):
    pages = client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    for page in pages:
        for o in page.get("Contents", []):
            print(o["Key"])


def zarr_write(bucket, prefix, out):
    import numpy as np
    import zarr
    from zarr.storage import FsspecStore

    store = FsspecStore.from_url(
        f"s3://{bucket}/{prefix}",
        storage_options={
            "endpoint_url": os.environ["AWS_ENDPOINT_URL"],
            "key": os.environ["AWS_ACCESS_KEY_ID"],
            "secret": os.environ["AWS_SECRET_ACCESS_KEY"],
            "client_kwargs": {"region_name": os.environ["AWS_REGION"]},
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        },
    )
    values = np.random.default_rng(7).integers(0, 65535, size=(5, 6, 7), dtype=np.uint16)
    # Shards that do not divide the shape (edge shards on axes 0 and 2), zarr-python's
    # default compressor; every element is written, so the store and OUT agree.
    arr = zarr.create_array(store=store, shape=values.shape, shards=(2, 6, 4),
                            chunks=(1, 3, 4), dtype="uint16", fill_value=0)
    arr[...] = values
    np.save(out, values)
    # s3fs leaves its aiohttp session open in asynchronous mode; aiohttp would complain.
    from zarr.core.sync import sync

    sync(store.fs._s3creator.__aexit__(None, None, None))


OPS = {"put": (put, 3), "put-multipart": (put_multipart, 4), "get": (get, 3),
       "list": (list_keys, 2), "zarr-write": (zarr_write, 3)}


def main(argv):
    if not argv or argv[0] not in OPS or len(argv) - 1 != OPS[argv[0]][1]:
        print(__doc__, file=sys.stderr)
        return 1
    try:
        OPS[argv[0]][0](*argv[1:])
    except ClientError as e:
        err = e.response.get("Error", {})
        status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        print(f"REFUSED {err.get('Code')} {status}")
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
