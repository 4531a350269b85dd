//! Object-store destinations: record to `s3://bucket/prefix` (and `gs://`, `az://`,
//! `file://`) through the [`object_store`] crate.
//!
//! The encoding path does not change. A writer whose path is a URL records into a local
//! **staging directory** with the sinks it always uses; a background **uploader** thread
//! sends each shard to the store once the finisher has renamed it into place, and each
//! `zarr.json` only after every shard it covers is uploaded, so a reader of the bucket,
//! like a reader of a local store, never sees a shape ahead of the data. A shard larger
//! than one part goes up as a multipart upload (parts of [`RemoteOptions::part_size`],
//! a bounded number in flight, aborted on failure: no object is ever half-visible); the
//! local copy is deleted once the store reports the object at its full length. While the
//! finished shards waiting for upload exceed [`RemoteOptions::staging_budget`], `push`
//! waits ([`Backpressure::Block`](crate::Backpressure::Block)) or drops and counts the
//! frame (`Drop`), as it does when the encoders fall behind.
//!
//! Credentials, region and endpoint come from the environment, as with the AWS tools:
//! `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_SESSION_TOKEN` (for GCS `GOOGLE_*`, for Azure `AZURE_*`, as `object_store` reads
//! them), plus [`RemoteOptions::store_options`]. An endpoint that starts with `http://`
//! allows plain HTTP (a store on the local network).
//!
//! Failures are typed ([`RemoteError`](crate::RemoteError)): a bad URL, refused credentials, a missing
//! bucket or an unreachable endpoint fail `create` before the first frame; a store that
//! goes away mid-recording makes `push` and `finish` return [`RemoteError::Upload`](crate::RemoteError::Upload)
//! while every finished shard not yet uploaded stays in staging, and [`upload_staged`]
//! (`zarrstream upload STAGING`) sends it later and republishes the metadata.
//!
//! **Several acquisition PCs, one array** ([`RemoteOptions::part`]): process `K` of `N`
//! records camera `K` into an array of shape `[T, N, Y, X]` whose axis 1 has chunk and
//! shard extent 1, so every shard belongs to exactly one process. Each process uploads
//! only its own shards and its own progress object (`.zarrstream-parts/K.json`), never
//! the shared `zarr.json`; one party writes that from the progress objects: a process
//! with [`RemoteOptions::coordinate`] set, or [`publish_parts`] (`zarrstream publish
//! URL`) run at any time. No object is written by two processes, so this needs no locks
//! and no conditional writes (where the store has them, the publication uses them as a
//! guard against a second coordinator).
//!
//! ```no_run
//! use zarrstream::{ArraySpec, Writer, WriterOptions};
//! use zarrstream::remote::RemoteOptions;
//! let spec = ArraySpec::builder()
//!     .shape([0, 1024, 1024])
//!     .chunk_shape([1, 512, 512])
//!     .shard_shape([16, 1024, 1024])
//!     .build()?;
//! let options = WriterOptions::default()
//!     .remote(RemoteOptions::default().staging_dir("/scratch/staging").staging_budget(8 << 30));
//! // AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, … from the environment.
//! let mut writer = Writer::create("s3://microscope/run-42.zarr", spec, options)?;
//! writer.push(&vec![0u16; 1024 * 1024])?;
//! writer.finish()?; // returns once everything is in the bucket
//! # Ok::<(), zarrstream::Error>(())
//! ```

mod keys;
mod leftover;
mod mirror;
mod options;
mod parts;
mod scan;
mod staging;
mod target;

pub use leftover::upload_staged;
pub use mirror::UploadReport;
pub use options::RemoteOptions;
pub use parts::{PublishReport, publish_parts};
pub use target::is_url;

pub(crate) use mirror::Mirror;
pub(crate) use staging::{Staging, StagingLink};
