//! The destination: a URL turned into an `object_store` client and a key prefix, the
//! checks made before the first frame, and the typed form of the store's errors.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::gcp::GoogleCloudStorageBuilder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{
    BackoffConfig, ClientOptions, ObjectStore, ObjectStoreExt, ObjectStoreScheme, PutPayload,
    RetryConfig,
};

use super::options::RemoteOptions;
use crate::error::RemoteError;

/// Whether `destination` names an object store (`s3://`, `gs://`, `az://`, `abfs://`,
/// `file://`, …) rather than a local path.
///
/// ```
/// assert!(zarrstream::remote::is_url("s3://bucket/run.zarr"));
/// assert!(!zarrstream::remote::is_url("/data/run.zarr"));
/// ```
pub fn is_url(destination: &str) -> bool {
    destination.split_once("://").is_some_and(|(scheme, _)| {
        !scheme.is_empty()
            && scheme
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+')
    })
}

/// What to do with an array or group already at the prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Existing {
    /// [`Error::Exists`](crate::Error::Exists).
    Refuse,
    /// Delete every object below the prefix (`overwrite`).
    Replace,
    /// Leave it: one part of a several-process array, whose other parts are there.
    Keep,
}

/// An object store and the prefix the array (or recording) lives under.
#[derive(Clone)]
pub(crate) struct Target {
    /// The destination as given (no credentials: those come from the environment).
    pub(crate) url: String,
    pub(crate) store: Arc<dyn ObjectStore>,
    pub(crate) prefix: ObjectPath,
    /// Where the default staging directory goes below its base: scheme, bucket, prefix.
    pub(crate) staging_name: std::path::PathBuf,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target").field("url", &self.url).finish()
    }
}

/// How often and how long one request is retried inside `object_store` (exponential
/// backoff from 100 ms); the uploader retries whole objects on top until
/// `upload_timeout`.
fn retry(timeout: Duration) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            base: 2.0,
        },
        max_retries: 4,
        retry_timeout: timeout.min(Duration::from_secs(60)),
    }
}

impl Target {
    /// Parses `url` and builds its client from the environment and `options`; nothing
    /// is sent yet.
    pub(crate) fn open(url: &str, options: &RemoteOptions) -> Result<Self, RemoteError> {
        let bad = |reason: String| RemoteError::Url {
            url: url.to_string(),
            reason,
        };
        let parsed = url::Url::parse(url).map_err(|e| bad(e.to_string()))?;
        let (scheme, prefix) = ObjectStoreScheme::parse(&parsed)
            .map_err(|e| bad(format!("not an object store URL: {e}")))?;
        let client = ClientOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_timeout(Duration::from_secs(120));
        let retry = retry(options.upload_timeout);
        let opt = |e: object_store::Error| bad(e.to_string());
        let store: Arc<dyn ObjectStore> = match scheme {
            ObjectStoreScheme::AmazonS3 => {
                let mut b = AmazonS3Builder::from_env().with_url(url);
                for (k, v) in &options.store_options {
                    b = b.with_config(k.parse().map_err(opt)?, v);
                }
                // A plain-http endpoint (a store on the local network) is allowed when
                // the endpoint itself says so, as the AWS tools do.
                let http = b
                    .get_config_value(&object_store::aws::AmazonS3ConfigKey::Endpoint)
                    .is_some_and(|e| e.starts_with("http://"));
                let client = if http {
                    client.with_allow_http(true)
                } else {
                    client
                };
                Arc::new(
                    b.with_client_options(client)
                        .with_retry(retry)
                        .build()
                        .map_err(opt)?,
                )
            }
            ObjectStoreScheme::GoogleCloudStorage => {
                let mut b = GoogleCloudStorageBuilder::from_env().with_url(url);
                for (k, v) in &options.store_options {
                    b = b.with_config(k.parse().map_err(opt)?, v);
                }
                Arc::new(
                    b.with_client_options(client)
                        .with_retry(retry)
                        .build()
                        .map_err(opt)?,
                )
            }
            ObjectStoreScheme::MicrosoftAzure => {
                let mut b = MicrosoftAzureBuilder::from_env().with_url(url);
                for (k, v) in &options.store_options {
                    b = b.with_config(k.parse().map_err(opt)?, v);
                }
                Arc::new(
                    b.with_client_options(client)
                        .with_retry(retry)
                        .build()
                        .map_err(opt)?,
                )
            }
            ObjectStoreScheme::Local => {
                // The whole path is the prefix below the file system's root.
                std::fs::create_dir_all(parsed.path())
                    .map_err(|e| bad(format!("create {}: {e}", parsed.path())))?;
                Arc::new(LocalFileSystem::new().with_automatic_cleanup(true))
            }
            _ => {
                return Err(bad(
                    "only s3://, gs://, az:// (abfs://) and file:// are supported".into(),
                ));
            }
        };
        let mut staging_name = std::path::PathBuf::from(parsed.scheme());
        if let Some(host) = parsed.host_str() {
            staging_name.push(host);
        }
        staging_name.extend(prefix.parts().map(|p| p.as_ref().to_string()));
        Ok(Target {
            url: url.to_string(),
            store,
            prefix,
            staging_name,
        })
    }

    /// The object at `key` below the prefix (`key` uses `/`).
    pub(crate) fn path(&self, key: &str) -> ObjectPath {
        key.split('/')
            .filter(|s| !s.is_empty())
            .fold(self.prefix.clone(), ObjectPath::join)
    }

    /// The store's error as a [`RemoteError`] about object `key`.
    pub(crate) fn error(&self, key: &str, e: &object_store::Error) -> RemoteError {
        classify(&self.url, key, e)
    }

    /// Checks before the first frame, each a typed error: the credentials and the
    /// bucket (a probe object is written and deleted, which also proves write access),
    /// and what is at the prefix (see [`Existing`]).
    pub(crate) fn check(&self, existing: Existing) -> Result<(), crate::Error> {
        block_on(async {
            let key = probe_key();
            let probe = self.path(&key);
            self.store
                .put(&probe, PutPayload::from_static(b"zarrstream"))
                .await
                .map_err(|e| self.error(&key, &e))?;
            self.store
                .delete(&probe)
                .await
                .map_err(|e| self.error(&key, &e))?;
            let doc = self.path(crate::store::METADATA_FILE);
            if existing == Existing::Keep {
                return Ok(());
            }
            match self.store.head(&doc).await {
                Ok(_) if existing == Existing::Refuse => Err(crate::Error::Exists {
                    path: self.url.clone().into(),
                }),
                Ok(_) => self.delete_all().await,
                Err(object_store::Error::NotFound { .. }) => Ok(()),
                Err(e) => Err(self.error(crate::store::METADATA_FILE, &e).into()),
            }
        })?
    }

    /// Deletes every object below the prefix (`overwrite`).
    async fn delete_all(&self) -> Result<(), crate::Error> {
        use futures::TryStreamExt;
        let listed: Vec<_> = self
            .store
            .list(Some(&self.prefix))
            .map_ok(|m| m.location)
            .try_collect()
            .await
            .map_err(|e| self.error("", &e))?;
        for p in listed {
            match self.store.delete(&p).await {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {}
                Err(e) => return Err(self.error(p.as_ref(), &e).into()),
            }
        }
        Ok(())
    }
}

/// The store's error as a [`RemoteError`]: refused credentials, a missing bucket (a PUT
/// answered 404 can only mean that), an endpoint that does not answer, or a failed
/// upload. `object_store` reports some statuses only in its message (its retry error
/// type is private), so those are read from the text.
pub(crate) fn classify(url: &str, key: &str, e: &object_store::Error) -> RemoteError {
    let message = chain(e);
    let url = url.to_string();
    match e {
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => RemoteError::Credentials { url, message },
        object_store::Error::NotFound { .. } => RemoteError::NoBucket { url, message },
        object_store::Error::AlreadyExists { .. } | object_store::Error::Precondition { .. } => {
            RemoteError::Conflict {
                url,
                key: key.to_string(),
                message,
            }
        }
        _ => {
            let m = message.to_ascii_lowercase();
            if m.contains("403 forbidden")
                || m.contains("accessdenied")
                || m.contains("invalidaccesskeyid")
                || m.contains("signaturedoesnotmatch")
            {
                RemoteError::Credentials { url, message }
            } else if m.contains("nosuchbucket") {
                RemoteError::NoBucket { url, message }
            } else if m.contains("connect")
                || m.contains("timed out")
                || m.contains("dns")
                || m.contains("connection")
            {
                RemoteError::Unreachable { url, message }
            } else {
                RemoteError::Upload {
                    url,
                    key: key.to_string(),
                    message,
                    staging: std::path::PathBuf::new(),
                }
            }
        }
    }
}

/// The error and its sources, one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        let c = cause.to_string();
        if !s.contains(&c) {
            s.push_str(": ");
            s.push_str(&c);
        }
        next = cause.source();
    }
    s
}

/// Runs `f` on a runtime of its own (the writer has no async runtime; these calls
/// happen once per writer, before the first frame or at the end).
pub(crate) fn block_on<F: Future>(f: F) -> Result<F::Output, crate::Error> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| crate::Error::Internal(format!("start an async runtime: {e}")))?;
    Ok(rt.block_on(f))
}

/// The probe object's key, different for every check: the parts of one array write to
/// one prefix at once (`--part-of`, from several PCs), and with a shared name one part
/// deleted the probe another had just written, which then failed its own delete with
/// "not found". `RandomState` is seeded from the OS's randomness, so keys differ across
/// processes and machines without reading the clock.
fn probe_key() -> String {
    use std::hash::{BuildHasher, Hasher};
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    format!(
        ".zarrstream-probe-{}-{:016x}",
        std::process::id(),
        h.finish()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(url: &str, keys: &[(&str, &str)]) -> Result<Target, RemoteError> {
        let mut o = RemoteOptions::default();
        for (k, v) in keys {
            o = o.store_option(*k, *v);
        }
        Target::open(url, &o)
    }

    #[test]
    fn urls_name_a_store_a_prefix_and_a_staging_place() {
        let t = open("s3://bucket/a/run.zarr", &[("aws_region", "garage")]).unwrap();
        assert_eq!(t.prefix.as_ref(), "a/run.zarr");
        assert_eq!(t.path("c/0/1").as_ref(), "a/run.zarr/c/0/1");
        assert_eq!(t.staging_name, std::path::Path::new("s3/bucket/a/run.zarr"));
        // GCS and Azure are built the same way (credentials are asked for lazily).
        assert!(open("gs://bucket/run.zarr", &[]).is_ok());
        let az = open(
            "az://container/run.zarr",
            &[("azure_storage_account_name", "acct")],
        );
        assert!(az.is_ok(), "{az:?}");
        for bad in ["s3:///run.zarr", "ftp://host/run.zarr", "s3://bucket/x"] {
            let r = if bad.ends_with("/x") {
                open(bad, &[("no_such_key", "1")])
            } else {
                open(bad, &[])
            };
            assert!(matches!(r, Err(RemoteError::Url { .. })), "{bad}: {r:?}");
        }
        assert!(is_url("file:///mnt/shared/run.zarr"));
        assert!(!is_url("run.zarr") && !is_url("/data/s3:/x") && !is_url("://x"));
    }
}
