//! What other readers make of what the writer stores: the interoperability matrix
//! (zarr-python, tensorstore, zarrs-python, fsspec, the CLI's `record`), OME-Zarr images
//! and high-content screening plates, each checked by readers we did not write (the
//! pinned Python environment of `tests/interop/venv.py`, from the testkit).

mod interop;
mod ome;
mod plate;
