//! [`Session`]: the one handle of both bindings, a writer or a recording, with the
//! poison policy and the frame-size check.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::Instant;

use serde_json::Value;
use zarrstream::config::{Config, RecordingConfig};
use zarrstream::{ArraySpec, FrameMeta, MemoryUsage, PushOutcome, Recording, SinkKind, Writer};

use crate::BindError;

/// One array of a session: its index in a recording, or its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Array<'a> {
    /// The array's place in the recording's `arrays` (0, 1, ...).
    Index(usize),
    /// The array's key.
    Key(&'a str),
}

impl From<usize> for Array<'_> {
    fn from(i: usize) -> Self {
        Array::Index(i)
    }
}

impl<'a> From<&'a str> for Array<'a> {
    fn from(key: &'a str) -> Self {
        Array::Key(key)
    }
}

/// Where an attribute goes: the one convention of both bindings. An array is `None` for
/// a writer (its one array) and names one array of a recording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// The array itself (level 0 of an OME-Zarr image).
    Array(Option<Array<'a>>),
    /// The OME-Zarr image group around the array (refused for a plain array).
    ImageGroup(Option<Array<'a>>),
    /// A recording's root group (refused for a writer, which has none of its own).
    Root,
}

/// What a binding checks a frame against, per array; fixed at creation, so checking a
/// frame takes no lock.
#[derive(Debug, Clone)]
pub struct ArrayInfo {
    /// The array's key in a recording; empty for a writer.
    pub key: String,
    /// Bytes in one frame (one y-x plane).
    pub frame_bytes: usize,
    /// The frame's `[y, x]`.
    pub frame_shape: [usize; 2],
    /// Bytes per element.
    pub item_size: usize,
    /// The specification as the library built it (level 0 of an image).
    pub spec: ArraySpec,
    /// The sink writing the array's shard files.
    pub sink: SinkKind,
}

impl ArrayInfo {
    fn of(key: &str, w: &Writer) -> Self {
        let spec = w.spec();
        let shape = spec.shape();
        let rank = shape.len();
        ArrayInfo {
            key: key.to_string(),
            frame_bytes: spec.frame_bytes(),
            // A spec has rank >= 2 (the builder refuses less), so both exist.
            frame_shape: [shape[rank - 2], shape[rank - 1]].map(|v| v as usize),
            item_size: spec.dtype().size(),
            spec: spec.clone(),
            sink: w.sink(),
        }
    }
}

/// The library object behind a session.
enum Inner {
    /// A writer is used through `&mut`: its own lock serialises the calls.
    Writer(Box<Mutex<Writer>>),
    /// A recording locks each array itself, so calls on different arrays run at once.
    /// (Both boxed: they differ in size, and a session holds one for its whole life.)
    Recording(Box<Recording>),
}

/// An open writer or recording, shared by every thread of the caller.
///
/// Calls on it take `&self`: a read lock on the session (taken for writing only by
/// finish and abort) and the array's own lock, so pushes into different arrays of a
/// recording run in parallel and a push waiting on back-pressure holds only its array.
///
/// **Poison policy.** A panic inside a call marks the session poisoned; every later
/// call but [`abort`](Self::abort) (and dropping it) returns [`BindError::Poisoned`],
/// because the state the panic left cannot be trusted. Finishing a poisoned session
/// drops it (which still publishes what was accepted) and returns that error.
pub struct Session {
    inner: RwLock<Option<Inner>>,
    /// "writer" or "recording", for messages and for [`inject_panic`](crate::inject_panic).
    what: &'static str,
    arrays: Vec<ArrayInfo>,
    /// Set while unwinding from a panic inside a call (by [`PanicFlag`]).
    poisoned: AtomicBool,
    /// Set once finished or aborted: read without the lock, which a push waiting on
    /// back-pressure holds (shared) while other threads run.
    closed: AtomicBool,
}

// A session is used from several threads at once (the Python module with the
// interpreter lock released, a C recording with one pushing thread per camera).
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Session>();
};

/// Sets the flag it holds if it is dropped while its thread unwinds from a panic.
struct PanicFlag<'a>(&'a AtomicBool);

impl Drop for PanicFlag<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::SeqCst);
        }
    }
}

impl Session {
    /// A session over a writer.
    pub fn from_writer(writer: Writer) -> Self {
        let info = ArrayInfo::of("", &writer);
        Session::new(
            "writer",
            Inner::Writer(Box::new(Mutex::new(writer))),
            vec![info],
        )
    }

    /// A session over a recording.
    pub fn from_recording(recording: Recording) -> Result<Self, BindError> {
        let keys: Vec<String> = recording.keys().map(str::to_owned).collect();
        let arrays = keys
            .iter()
            .enumerate()
            .map(|(i, key)| Ok(ArrayInfo::of(key, &*recording.array(i)?)))
            .collect::<Result<_, zarrstream::Error>>()?;
        Ok(Session::new(
            "recording",
            Inner::Recording(Box::new(recording)),
            arrays,
        ))
    }

    fn new(what: &'static str, inner: Inner, arrays: Vec<ArrayInfo>) -> Self {
        Session {
            inner: RwLock::new(Some(inner)),
            what,
            arrays,
            poisoned: AtomicBool::new(false),
            closed: AtomicBool::new(false),
        }
    }

    /// Creates the writer that `config_json` (the `zarrstream::config` JSON) describes
    /// at `path`; with the deprecation notice of a configuration in the old flat form,
    /// which each binding shows its own way.
    pub fn create_writer(
        path: &Path,
        config_json: &str,
    ) -> Result<(Session, Option<String>), BindError> {
        let parsed = Config::parse(config_json)?.into_parsed()?;
        let deprecated = parsed.deprecated.clone();
        Ok((Session::from_writer(parsed.create(path)?), deprecated))
    }

    /// Creates the recording that `config_json` (the
    /// `zarrstream::config::RecordingConfig` JSON) describes at `root`, as
    /// [`create_writer`](Self::create_writer).
    pub fn create_recording(
        root: &Path,
        config_json: &str,
    ) -> Result<(Session, Option<String>), BindError> {
        let config = RecordingConfig::parse(config_json)?;
        let deprecated = config.deprecated.clone();
        Ok((Session::from_recording(config.create(root)?)?, deprecated))
    }

    /// Whether this is a recording (several arrays named by [`Array`]).
    pub fn is_recording(&self) -> bool {
        self.what == "recording"
    }

    /// Whether the session was finished or aborted.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether a call panicked, so every call but abort is refused.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned.load(Ordering::SeqCst)
    }

    /// Every array's key and frame geometry, in index order (one for a writer).
    pub fn arrays(&self) -> &[ArrayInfo] {
        &self.arrays
    }

    /// The index of `array`: `None` is a writer's one array, which a recording's calls
    /// must name instead.
    pub fn index(&self, array: Option<Array<'_>>) -> Result<usize, BindError> {
        let unknown = |key: String| BindError::Library(zarrstream::Error::UnknownArray { key });
        match (self.is_recording(), array) {
            (false, None) => Ok(0),
            (false, Some(_)) => Err(BindError::Argument(
                "a writer has one array: name no array".into(),
            )),
            (true, None) => Err(BindError::Argument(
                "a recording has several arrays: name one".into(),
            )),
            (true, Some(Array::Index(i))) if i < self.arrays.len() => Ok(i),
            (true, Some(Array::Index(i))) => Err(unknown(i.to_string())),
            (true, Some(Array::Key(key))) => self
                .arrays
                .iter()
                .position(|a| a.key == key)
                .ok_or_else(|| unknown(key.to_string())),
        }
    }

    /// The start of every call but finish and abort: refused once poisoned; the guard
    /// it returns poisons the session if the call panics.
    fn enter(&self) -> Result<PanicFlag<'_>, BindError> {
        if self.is_poisoned() {
            return Err(BindError::Poisoned(self.what));
        }
        let flag = PanicFlag(&self.poisoned);
        crate::inject_panic(self.what);
        Ok(flag)
    }

    /// The live library object (shared), or [`BindError::Closed`].
    fn live(&self) -> Result<RwLockReadGuard<'_, Option<Inner>>, BindError> {
        // The lock is only poisoned by a panic, which `enter` has refused already.
        let guard = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        if guard.is_none() {
            return Err(BindError::Closed(self.what));
        }
        Ok(guard)
    }

    /// Runs `f` on the writer of `array` (a writer's own, or a recording's array), under
    /// the poison policy: every array-level call of both bindings goes through here, so
    /// a recording gets every [`Writer`] method (`push_at`, the zero-copy buffers, frame
    /// metadata) with no code of its own.
    pub fn with_array<T, E: From<BindError>>(
        &self,
        array: Option<Array<'_>>,
        f: impl FnOnce(&mut Writer) -> Result<T, E>,
    ) -> Result<T, E> {
        let _flag = self.enter()?;
        let i = self.index(array)?;
        let guard = self.live()?;
        match guard.as_ref() {
            Some(Inner::Writer(w)) => f(&mut w.lock().unwrap_or_else(PoisonError::into_inner)),
            Some(Inner::Recording(r)) => {
                let mut view = r.array(i).map_err(BindError::from)?;
                f(&mut view)
            }
            None => Err(BindError::Closed(self.what).into()),
        }
    }

    /// Runs `f` on the recording, under the poison policy; a writer is refused.
    pub fn with_recording<T, E: From<BindError>>(
        &self,
        f: impl FnOnce(&Recording) -> Result<T, E>,
    ) -> Result<T, E> {
        let _flag = self.enter()?;
        let guard = self.live()?;
        match guard.as_ref() {
            Some(Inner::Recording(r)) => f(r),
            _ => Err(BindError::Argument("a writer is not a recording".into()).into()),
        }
    }

    /// The error for a frame of `len` bytes for `array`, if that is not its frame size.
    /// A binding calls this before it forms a slice of `len` bytes from memory it was
    /// handed, which it must not do for a length the caller may not own (the C API's
    /// `unsafe` contract rests on it).
    pub fn check_len(&self, array: Option<Array<'_>>, len: usize) -> Result<(), BindError> {
        let i = self.index(array)?;
        let expected = self.arrays[i].frame_bytes;
        if len == expected {
            return Ok(());
        }
        let frame = self.frames_pushed(array)?;
        Err(zarrstream::Error::FrameSize {
            frame,
            expected,
            got: len,
        }
        .into())
    }

    /// Pushes one frame of raw little-endian bytes into `array`, with its metadata if
    /// any ([`PushOutcome::Dropped`] if back-pressure dropped it).
    pub fn push(
        &self,
        array: Option<Array<'_>>,
        frame: &[u8],
        meta: Option<&FrameMeta>,
    ) -> Result<PushOutcome, BindError> {
        self.check_len(array, frame.len())?;
        let now = Instant::now();
        self.with_array(array, |w| {
            Ok(match meta {
                Some(meta) => w.push_with(frame, now, meta)?,
                None => w.push_bytes(frame, now)?,
            })
        })
    }

    /// Writes one frame of raw bytes into `array` at `index`, its coordinates on the
    /// leading axes ([`Writer::write_frame_bytes`]).
    pub fn push_at(
        &self,
        array: Option<Array<'_>>,
        index: &[u64],
        frame: &[u8],
    ) -> Result<PushOutcome, BindError> {
        self.check_len(array, frame.len())?;
        let now = Instant::now();
        self.with_array(array, |w| Ok(w.write_frame_bytes(index, frame, now)?))
    }

    /// Marks the frame of `array` at `index` as one that will not come
    /// ([`Writer::skip_frame`]).
    pub fn skip_frame(&self, array: Option<Array<'_>>, index: &[u64]) -> Result<(), BindError> {
        self.with_array(array, |w| Ok(w.skip_frame(index)?))
    }

    /// Counts `n` frames of `array` the caller could not push as dropped, keeping their
    /// places ([`Writer::skip`]).
    pub fn skip(&self, array: Option<Array<'_>>, n: u64) -> Result<(), BindError> {
        self.with_array(array, |w| {
            for _ in 0..n {
                w.skip()?;
            }
            Ok(())
        })
    }

    /// Frames offered to `array` so far (written and dropped, skipped included).
    pub fn frames_pushed(&self, array: Option<Array<'_>>) -> Result<u64, BindError> {
        self.with_array(array, |w| Ok(w.frames_pushed()))
    }

    /// Frames of `array` whose chunks are all encoded so far.
    pub fn frames_encoded(&self, array: Option<Array<'_>>) -> Result<u64, BindError> {
        self.with_array(array, |w| Ok(w.frames_encoded()))
    }

    /// The specification of `array` (level 0 of an image) as the library built it, and
    /// its sink. Fixed at creation, so read from the session's own copy: no call on the
    /// writer, and answered even once closed or poisoned.
    pub fn spec(&self, array: Option<Array<'_>>) -> Result<(&ArraySpec, SinkKind), BindError> {
        let a = &self.arrays[self.index(array)?];
        Ok((&a.spec, a.sink))
    }

    /// Sets (`value` given) or removes (`None`) the attribute `name` of `target`; the
    /// node's `zarr.json` is republished at once.
    pub fn set_attribute(
        &self,
        target: Target<'_>,
        name: &str,
        value: Option<Value>,
    ) -> Result<(), BindError> {
        match target {
            Target::Array(array) => self.with_array(array, |w| {
                match value {
                    Some(v) => w.set_attribute(name, v)?,
                    None => w.remove_attribute(name)?,
                }
                Ok(())
            }),
            Target::ImageGroup(array) => self.with_array(array, |w| {
                match value {
                    Some(v) => w.set_group_attribute(name, v)?,
                    None => w.remove_group_attribute(name)?,
                }
                Ok(())
            }),
            Target::Root => self.with_recording(|r| {
                match value {
                    Some(v) => r.set_root_attribute(name, v)?,
                    None => r.remove_root_attribute(name)?,
                }
                Ok(())
            }),
        }
    }

    /// The bytes the session's own buffers hold now and at most so far (a recording's:
    /// every array's and the shared workers').
    pub fn memory_in_use(&self) -> Result<MemoryUsage, BindError> {
        let _flag = self.enter()?;
        let guard = self.live()?;
        match guard.as_ref() {
            Some(Inner::Writer(w)) => Ok(w
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .memory_in_use()),
            Some(Inner::Recording(r)) => Ok(r.memory_in_use()),
            None => Err(BindError::Closed(self.what)),
        }
    }

    /// Takes the library object out, closing the session (waits for calls in progress).
    fn take(&self) -> Result<Inner, BindError> {
        let inner = self
            .inner
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .ok_or(BindError::Closed(self.what))?;
        self.closed.store(true, Ordering::Release);
        Ok(inner)
    }

    /// Finishes the writer or every array of the recording (every accepted frame
    /// written, zarr.json published as finished); the statistics as JSON
    /// ([`json::stats`](crate::json::stats) or
    /// [`json::recording_stats`](crate::json::recording_stats)). A poisoned session is
    /// dropped instead (which still publishes what was accepted) and refused.
    pub fn finish(&self) -> Result<String, BindError> {
        let inner = self.take()?;
        if self.is_poisoned() {
            drop(inner);
            return Err(BindError::Poisoned(self.what));
        }
        match inner {
            Inner::Writer(w) => crate::json::stats(
                &(*w)
                    .into_inner()
                    .unwrap_or_else(PoisonError::into_inner)
                    .finish()?,
            ),
            Inner::Recording(r) => crate::json::recording_stats(&(*r).finish()?),
        }
    }

    /// Stops at once, keeping every frame accepted so far; `zarr.json` records the
    /// state "aborted" and `reason`. Allowed on a poisoned session, which is only
    /// dropped (what was accepted is still published).
    pub fn abort(&self, reason: String) -> Result<(), BindError> {
        let inner = self.take()?;
        if self.is_poisoned() {
            drop(inner);
            return Ok(());
        }
        match inner {
            Inner::Writer(w) => (*w)
                .into_inner()
                .unwrap_or_else(PoisonError::into_inner)
                .abort(reason)?,
            Inner::Recording(r) => (*r).abort(reason)?,
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{AssertUnwindSafe, catch_unwind};
    use zarrstream::ErrorKind;

    const ARRAY: &str = r#"{"shape": [0, 8, 8], "chunk_shape": [1, 8, 8],
        "shard_shape": [2, 8, 8], "dtype": "uint8"}"#;

    fn writer(dir: &Path) -> Session {
        let config = format!(r#"{{"array": {ARRAY}, "writer": {{"threads": 1}}}}"#);
        Session::create_writer(&dir.join("w.zarr"), &config)
            .unwrap()
            .0
    }

    fn recording(dir: &Path) -> Session {
        let config = format!(
            r#"{{"writer": {{"threads": 1}}, "arrays": [{{"key": "a", "array": {ARRAY}}},
                {{"key": "b", "array": {ARRAY}}}]}}"#
        );
        Session::create_recording(&dir.join("r.zarr"), &config)
            .unwrap()
            .0
    }

    /// A panic inside a call poisons the session: the next push (on any array) is
    /// refused as closed, finish is refused, and abort still frees it.
    fn poisoned_after_a_panic(session: &Session, array: Option<Array<'_>>) {
        assert!(session.push(array, &[1; 64], None).unwrap().is_accepted());
        let panicked = catch_unwind(AssertUnwindSafe(|| {
            session.with_array(array, |_| -> Result<(), BindError> { panic!("a bug") })
        }));
        assert!(panicked.is_err(), "the call panicked");
        assert!(session.is_poisoned());
        let err = session.push(array, &[1; 64], None).unwrap_err();
        assert!(matches!(err, BindError::Poisoned(_)), "{err}");
        assert_eq!(err.kind(), ErrorKind::Closed);
        assert!(
            err.to_string().contains("failed with an internal error"),
            "{err}"
        );
        // Every other call too, a wrong size included.
        let err = session.frames_pushed(array).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        let err = session.push(array, &[1; 3], None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        let err = session.memory_in_use().unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        let err = session.finish().unwrap_err();
        assert!(matches!(err, BindError::Poisoned(_)), "{err}");
        assert!(session.is_closed());
    }

    #[test]
    fn a_panic_poisons_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        poisoned_after_a_panic(&writer(dir.path()), None);
    }

    #[test]
    fn a_panic_poisons_a_recording() {
        let dir = tempfile::tempdir().unwrap();
        let rec = recording(dir.path());
        poisoned_after_a_panic(&rec, Some(Array::Key("a")));
        // And abort frees a poisoned session without an error.
        let rec = recording(&dir.path().join("again"));
        let _ = catch_unwind(AssertUnwindSafe(|| {
            rec.with_recording(|_| -> Result<(), BindError> { panic!("a bug") })
        }));
        let err = rec.push(Some(Array::Index(1)), &[1; 64], None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::Closed, "{err}");
        rec.abort("after a panic".into()).unwrap();
        assert!(rec.is_closed());
    }

    #[test]
    fn the_size_is_checked_before_anything_is_pushed() {
        let dir = tempfile::tempdir().unwrap();
        let w = writer(dir.path());
        w.check_len(None, 64).unwrap();
        assert!(w.push(None, &[1; 64], None).unwrap().is_accepted());
        let err = w.check_len(None, 63).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidFrame, "{err}");
        let msg = err.to_string();
        assert!(msg.contains("64") && msg.contains("63"), "{msg}");
        assert!(w.push(None, &[1; 65], None).is_err());
        // A wrong size leaves the writer usable and pushes nothing.
        assert_eq!(w.frames_pushed(None).unwrap(), 1);
        assert!(!w.is_poisoned());
        // Arrays are named for a recording only, and must exist.
        let err = w.check_len(Some(Array::Index(0)), 64).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let rec = recording(dir.path());
        let err = rec.check_len(None, 64).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let err = rec.check_len(Some(Array::Index(2)), 64).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnknownArray, "{err}");
        let err = rec.check_len(Some(Array::Key("c")), 64).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::UnknownArray, "{err}");
        let err = rec.push(Some(Array::Key("b")), &[1; 8], None).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidFrame, "{err}");
        assert_eq!(rec.frames_pushed(Some(Array::Key("b"))).unwrap(), 0);
        rec.finish().unwrap();
        w.finish().unwrap();
        // Closed: every call says so.
        let err = w.push(None, &[1; 64], None).unwrap_err();
        assert!(matches!(err, BindError::Closed("writer")), "{err}");
        assert!(matches!(w.finish(), Err(BindError::Closed(_))));
    }

    /// A recording's array view gets every writer call: push_at and skip included.
    #[test]
    fn a_recording_array_gets_the_writer_calls() {
        let dir = tempfile::tempdir().unwrap();
        let rec = recording(dir.path());
        let b = Some(Array::Key("b"));
        assert!(rec.push(b, &[2; 64], None).unwrap().is_accepted());
        rec.skip(b, 2).unwrap();
        assert_eq!(rec.frames_pushed(b).unwrap(), 3);
        assert_eq!(rec.frames_pushed(Some(Array::Index(0))).unwrap(), 0);
        rec.set_attribute(Target::Array(b), "gain", Some(Value::from(3)))
            .unwrap();
        rec.set_attribute(Target::Root, "operator", Some(Value::from("ada")))
            .unwrap();
        let err = rec
            .set_attribute(Target::ImageGroup(b), "x", Some(Value::from(1)))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let root = std::fs::read_to_string(dir.path().join("r.zarr/zarr.json")).unwrap();
        assert!(root.contains("\"operator\""), "{root}");
        let array = std::fs::read_to_string(dir.path().join("r.zarr/b/zarr.json")).unwrap();
        assert!(array.contains("\"gain\""), "{array}");
        assert!(rec.memory_in_use().unwrap().peak > 0);
        let w = writer(dir.path());
        let err = w
            .set_attribute(Target::Root, "x", Some(Value::from(1)))
            .unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        let stats: Value = serde_json::from_str(&rec.finish().unwrap()).unwrap();
        assert_eq!(stats["arrays"]["b"]["frames_dropped"], 2, "{stats}");
        w.abort("done".into()).unwrap();
    }
}
