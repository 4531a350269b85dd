//! [`upload_staged`]: what a failed or crashed recording left in its staging
//! directory, recovered where a crash left temporary shards, then sent.

use std::path::Path;

use super::mirror::{Mirror, UploadReport, Uploads};
use super::options::RemoteOptions;
use super::scan::{Marker, crashed_arrays};
use super::staging::Staging;
use super::target::Target;
use crate::error::{Error, RemoteError, Result};

/// Uploads what a recording left in its staging directory `staging` (after the store
/// went away, or a crash), then republishes every document, and removes the staging
/// directory once everything is in the store. After a crash, every array that still
/// has temporary shards is recovered first (as `zarrstream recover` does: each chunk
/// whose crc32c verifies is kept), so what the killed writer had encoded goes up too. The destination comes from the directory's marker;
/// `options` gives the credentials' overrides and limits.
///
/// ```no_run
/// use zarrstream::remote::{RemoteOptions, upload_staged};
/// let report = upload_staged("/scratch/staging/s3/microscope/run-42.zarr", &RemoteOptions::default())?;
/// println!("{} shards ({} bytes) uploaded to {}", report.shards, report.bytes, report.url);
/// # Ok::<(), zarrstream::Error>(())
/// ```
pub fn upload_staged(staging: impl AsRef<Path>, options: &RemoteOptions) -> Result<UploadReport> {
    let staging = staging.as_ref();
    let marker = Marker::read(staging)?;
    for array in crashed_arrays(staging)? {
        crate::recover::recover_store(&array).map_err(|e| {
            Error::Remote(RemoteError::Staging {
                path: array.clone(),
                reason: format!("recovering its temporary shards failed: {e}"),
            })
        })?;
    }
    let target = Target::open(&marker.url, options)?;
    let gate = std::sync::Arc::new(Staging::new(u64::MAX));
    let mut uploads = Uploads::new(target, staging.to_path_buf(), &marker, options, gate, true);
    let report = super::target::block_on(uploads.run_to_end(options.upload_timeout))??;
    Mirror::clean(staging);
    Ok(UploadReport {
        url: marker.url,
        ..report
    })
}
