//! [`RemoteOptions`]: how an object-store destination is staged and uploaded.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};

/// How a writer with an object-store destination stages and uploads its data; part of
/// [`WriterOptions`](crate::WriterOptions) (`WriterOptions::remote`). Ignored for a
/// local path, except [`part`](Self::part), which needs a URL (`file:///shared/path`
/// for a shared file system).
///
/// ```
/// use std::time::Duration;
/// use zarrstream::remote::RemoteOptions;
/// let r = RemoteOptions::default()
///     .staging_budget(4 << 30)
///     .part_size(16 << 20)
///     .upload_timeout(Duration::from_secs(120));
/// assert_eq!(r.uploads_in_flight, 4);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "remote")]
#[non_exhaustive]
pub struct RemoteOptions {
    /// The local directory shards are finished in before upload (`None`:
    /// `$ZARRSTREAM_STAGING`, else the system's temporary directory, under
    /// `zarrstream-staging/<scheme>/<bucket>/<prefix>[/part-K]`). Put it on the fastest
    /// local disk: the sinks write there at the camera's rate.
    pub staging_dir: Option<PathBuf>,
    /// Bytes of finished shards that may wait for upload (default 2 GiB). Beyond it
    /// `push` blocks or drops, as the back-pressure option says. The shards being
    /// written come on top (at most the writer's unfinished shards).
    pub staging_budget: u64,
    /// Size of each part of a multipart upload (default 8 MiB; S3 wants ≥ 5 MiB). A
    /// shard no larger than one part is one plain PUT.
    pub part_size: usize,
    /// Objects uploaded at once (default 4); each multipart upload keeps at most 2
    /// parts in flight and reads the next, so the uploader holds at most
    /// `3 × uploads_in_flight × part_size` bytes.
    pub uploads_in_flight: usize,
    /// How long uploads may keep failing (each request retried with exponential
    /// backoff, then the whole object again) before `push` reports
    /// [`RemoteError::Upload`](crate::RemoteError::Upload) (default 60 s; in JSON
    /// milliseconds).
    #[serde(rename = "upload_timeout_ms", deserialize_with = "crate::de::millis")]
    #[schemars(schema_with = "crate::de::millis_schema")]
    pub upload_timeout: Duration,
    /// This process records part `K` of the array (the index on axis 1, whose chunk
    /// and shard extent must be 1; the spec's `shape[1]` is the number of parts): it
    /// pushes only camera `K`'s frames and uploads only its own shards and its progress
    /// object. See the [module docs](crate::remote).
    pub part: Option<u64>,
    /// With [`part`](Self::part): this process is also the coordinator, which
    /// publishes the shared `zarr.json` from every part's progress (after each upload
    /// pass and at the end).
    pub coordinate: bool,
    /// Extra `object_store` configuration keys (`aws_endpoint`, `aws_region`,
    /// `aws_allow_http`, `google_service_account`, `azure_storage_account_name`, …),
    /// applied over the environment.
    #[serde(deserialize_with = "crate::de::string_pairs")]
    #[schemars(with = "std::collections::BTreeMap<String, String>")]
    pub store_options: Vec<(String, String)>,
}

impl Default for RemoteOptions {
    fn default() -> Self {
        RemoteOptions {
            staging_dir: None,
            staging_budget: 2 << 30,
            part_size: 8 << 20,
            uploads_in_flight: 4,
            upload_timeout: Duration::from_secs(60),
            part: None,
            coordinate: false,
            store_options: Vec::new(),
        }
    }
}

impl RemoteOptions {
    /// Sets [`staging_dir`](Self::staging_dir).
    #[must_use]
    pub fn staging_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.staging_dir = Some(dir.into());
        self
    }

    /// Sets [`staging_budget`](Self::staging_budget) in bytes.
    #[must_use]
    pub fn staging_budget(mut self, bytes: u64) -> Self {
        self.staging_budget = bytes;
        self
    }

    /// Sets [`part_size`](Self::part_size) in bytes.
    #[must_use]
    pub fn part_size(mut self, bytes: usize) -> Self {
        self.part_size = bytes;
        self
    }

    /// Sets [`uploads_in_flight`](Self::uploads_in_flight).
    #[must_use]
    pub fn uploads_in_flight(mut self, n: usize) -> Self {
        self.uploads_in_flight = n;
        self
    }

    /// Sets [`upload_timeout`](Self::upload_timeout).
    #[must_use]
    pub fn upload_timeout(mut self, timeout: Duration) -> Self {
        self.upload_timeout = timeout;
        self
    }

    /// Sets [`part`](Self::part): this process records part `k` (axis 1) of the array.
    #[must_use]
    pub fn part(mut self, k: u64) -> Self {
        self.part = Some(k);
        self
    }

    /// Sets [`coordinate`](Self::coordinate).
    #[must_use]
    pub fn coordinate(mut self, coordinate: bool) -> Self {
        self.coordinate = coordinate;
        self
    }

    /// Adds an `object_store` configuration key (see
    /// [`store_options`](Self::store_options)).
    #[must_use]
    pub fn store_option(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.store_options.push((key.into(), value.into()));
        self
    }

    pub(crate) fn validate(&self) -> Result<()> {
        const MIB: usize = 1 << 20;
        for (option, value, min, max) in [
            ("part_size", self.part_size, 5 * MIB, 5 << 30),
            ("uploads_in_flight", self.uploads_in_flight, 1, 256),
        ] {
            if value > max {
                return Err(Error::InvalidOption { option, value, max });
            }
            if value < min {
                return Err(Error::ConflictingOptions(
                    option,
                    "a value below its minimum (part_size ≥ 5 MiB, as S3 asks of every part but the last; uploads_in_flight ≥ 1)",
                ));
            }
        }
        if self.coordinate && self.part.is_none() {
            return Err(Error::ConflictingOptions("coordinate", "no part"));
        }
        Ok(())
    }
}
