//! Where a writer records: a local path, or an object store through a staging directory
//! and its uploader ([`crate::remote`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::remote::{self, Mirror, StagingLink};
use crate::spec::ArraySpec;
use crate::writer::api::options::WriterOptions;

/// The local directory to record into and, for an object store, its uploader.
pub(in crate::writer) struct Destination {
    pub(in crate::writer) dir: PathBuf,
    pub(in crate::writer) mirror: Option<Mirror>,
}

impl Destination {
    /// Resolves `path`: a URL opens and checks the store (before anything local is
    /// made), prepares the staging directory and starts the uploader, whose gate is set
    /// in `options`. With [`RemoteOptions::part`](crate::remote::RemoteOptions::part),
    /// `spec` becomes the part's own array (axis 1 of extent 1); `part_spec` is `None`
    /// for destinations that cannot be parts (images, recordings).
    pub(in crate::writer) fn open(
        path: &Path,
        options: &mut WriterOptions,
        part_spec: Option<&mut ArraySpec>,
    ) -> Result<Self> {
        let url = path.to_str().filter(|s| remote::is_url(s));
        let Some(url) = url else {
            if options.remote.part.is_some() {
                return Err(Error::ConflictingOptions(
                    "part",
                    "a local path (use a file:// URL for a shared file system)",
                ));
            }
            return Ok(Destination {
                dir: path.to_path_buf(),
                mirror: None,
            });
        };
        if options.resume {
            return Err(Error::ResumeUnsupported("an object-store destination"));
        }
        let part = match (options.remote.part, part_spec) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(Error::ConflictingOptions(
                    "part",
                    "an OME-Zarr image or a recording (parts are plain arrays)",
                ));
            }
            (Some(k), Some(spec)) => Some((k, part_of(spec, k, options)?)),
        };
        let mirror = Mirror::start(url, &options.remote, options.overwrite, part)?;
        options.staging = StagingLink(Some(Arc::clone(mirror.gate())));
        Ok(Destination {
            dir: mirror.staging().to_path_buf(),
            mirror: Some(mirror),
        })
    }

    /// After the writer created its store in the staging directory: names the
    /// destination there. On an error the uploader is stopped.
    pub(in crate::writer) fn started(&self) -> Result<()> {
        self.mirror.as_ref().map_or(Ok(()), Mirror::mark)
    }
}

/// Checks that `spec` can be recorded in parts along axis 1 and makes it part `k`'s
/// own array (axis 1 of extent 1); returns the number of parts.
fn part_of(spec: &mut ArraySpec, k: u64, options: &WriterOptions) -> Result<u64> {
    let rank = spec.shape.len();
    if rank < 4 || spec.chunk[1] != 1 || spec.shard[1] != 1 {
        return Err(Error::ConflictingOptions(
            "part",
            "this array: parts need rank ≥ 4 (axis 1 outside the frame) with chunk and shard extent 1 on axis 1",
        ));
    }
    let n = spec.shape[1];
    if k >= n {
        return Err(Error::InvalidOption {
            option: "part",
            value: usize::try_from(k).unwrap_or(usize::MAX),
            max: usize::try_from(n - 1).unwrap_or(usize::MAX),
        });
    }
    if options.frame_meta.is_some() {
        return Err(Error::ConflictingOptions("part", "frame_meta"));
    }
    // Replacing what is there would delete the other parts' shards.
    if options.overwrite {
        return Err(Error::ConflictingOptions("part", "overwrite"));
    }
    spec.shape[1] = 1;
    Ok(n)
}
