//! Recognising and reading the pre-standard sharding layouts:
//!
//! * **L1** — zarr-python PR 876/947 prototype: a Zarr v2 `.zarray` with `"shards"` and
//!   `"shard_format": "indexed"`; shard objects under v2 keys of the shard grid (`0.0`).
//! * **L2** — zarrita draft: a v3-draft store (`zarr.json` with the
//!   `.../protocol/core/3.0` URI, arrays at `meta/root/<path>.array.json`) whose array
//!   metadata has `"sharding": {"chunks_per_shard", "format": "indexed"}`.
//! * **L3** — the v3-draft sharding storage transformer (zarr-python 2.14–2.18,
//!   acquire-driver-zarr ≤ 0.2.0): the same store with a `storage_transformers` entry
//!   whose extension ends in `sharding/1.0` and whose `type` is `indexed`.
//!
//! L2 and L3 shards live at `data/root/<path>/c<i><sep><j>...`. In all three, a shard
//! is the inner chunks followed by `16 n` index bytes (u64 LE offset, nbytes per inner
//! chunk in C order, both `2^64-1` when empty), with no checksum.

use std::fs;
use std::path::{Path, PathBuf};
use zarrstream::IoError;

use serde_json::{Map, Value};

use super::error::{ConvertError, bad_meta, unsupported};
use super::mapping::{Compressor, DType, Fill, map_fill, parse_dtype};

/// Which legacy layout an array was written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Layout {
    /// zarr-python PR 876/947: `.zarray` with `shards`.
    V2Shards,
    /// zarrita draft: v3-draft metadata with a `sharding` object.
    ZarritaDraft,
    /// The v3-draft sharding storage transformer.
    StorageTransformer,
}

impl Layout {
    /// A human-readable name for summaries.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::V2Shards => "zarr-python PR 876 .zarray shards",
            Self::ZarritaDraft => "zarrita draft sharding",
            Self::StorageTransformer => "v3-draft sharding storage transformer",
        }
    }
}

/// One legacy sharded array, with everything the conversion needs.
#[derive(Debug, Clone)]
pub(super) struct LegacyArray {
    /// Its layout.
    pub layout: Layout,
    /// The legacy metadata document.
    pub meta_path: PathBuf,
    /// Path of the array inside the output (`""`: the output is the array).
    pub out_path: String,
    /// Array shape.
    pub shape: Vec<u64>,
    /// Inner chunk shape.
    pub inner: Vec<u64>,
    /// Inner chunks per shard, per dimension.
    pub cps: Vec<u64>,
    /// Element type and byte order.
    pub dtype: DType,
    /// Elements stored in Fortran order inside each chunk.
    pub fortran: bool,
    /// Inner compressor.
    pub compressor: Compressor,
    /// v3 fill value.
    pub fill: Fill,
    /// User attributes.
    pub attributes: Map<String, Value>,
    /// Directory the shard keys are relative to.
    data_dir: PathBuf,
    /// `""` (L1) or `"c"` (L2/L3), written before the first coordinate.
    key_prefix: &'static str,
    /// Separator between coordinates.
    separator: String,
}

impl LegacyArray {
    /// The legacy file of the shard at shard-grid `coords`.
    pub(super) fn shard_path(&self, coords: &[u64]) -> PathBuf {
        let joined: Vec<String> = coords.iter().map(u64::to_string).collect();
        self.data_dir.join(format!(
            "{}{}",
            self.key_prefix,
            joined.join(&self.separator)
        ))
    }

    /// Shard shape = inner chunk shape × chunks per shard.
    pub(super) fn shard_shape(&self) -> Vec<u64> {
        self.inner
            .iter()
            .zip(&self.cps)
            .map(|(i, c)| i * c)
            .collect()
    }

    /// Inner chunks per shard.
    pub(super) fn chunks_per_shard(&self) -> u64 {
        self.cps.iter().product()
    }

    /// Shards per dimension: `ceil(shape / shard shape)`.
    pub(super) fn shard_grid(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(self.shard_shape())
            .map(|(s, d)| s.div_ceil(d))
            .collect()
    }
}

/// A legacy store: its arrays and (for v3-draft hierarchies) its groups.
#[derive(Debug, Clone)]
pub(super) struct LegacyStore {
    /// The arrays to convert.
    pub arrays: Vec<LegacyArray>,
    /// Groups to create in the output: path (`""` = root) and attributes.
    pub groups: Vec<(String, Map<String, Value>)>,
}

/// Reads and recognises the legacy store at `root`.
pub(super) fn open(root: &Path) -> Result<LegacyStore, ConvertError> {
    if !root.exists() {
        return Err(ConvertError::NotFound(root.to_path_buf()));
    }
    let not = |why: &str| ConvertError::NotLegacy {
        path: root.to_path_buf(),
        why: why.to_string(),
    };
    if !root.is_dir() {
        return Err(not("not a directory"));
    }
    let zarray = root.join(".zarray");
    if zarray.is_file() {
        let array = open_v2(root, &zarray)?;
        return Ok(LegacyStore {
            arrays: vec![array],
            groups: Vec::new(),
        });
    }
    let entry = root.join("zarr.json");
    if !entry.is_file() {
        return Err(not("no .zarray and no v3-draft zarr.json"));
    }
    let doc = read_json(&entry)?;
    match doc.get("zarr_format") {
        Some(Value::String(s)) if s.ends_with("/protocol/core/3.0") => open_draft(root),
        Some(Value::Number(n)) if n.as_u64() == Some(3) => {
            Err(not("already a standard Zarr v3 store"))
        }
        other => Err(not(&format!(
            "zarr.json has zarr_format {}",
            other.map_or_else(|| "missing".to_string(), Value::to_string)
        ))),
    }
}

/// Reads and parses a JSON document.
fn read_json(path: &Path) -> Result<Value, ConvertError> {
    let text = fs::read(path).map_err(IoError::with("read", path))?;
    serde_json::from_slice(&text).map_err(|e| bad_meta(path, format!("not JSON: {e}")))
}

/// Reads a list of positive integers (`shape` allows zeros).
fn u64_list(
    path: &Path,
    v: Option<&Value>,
    what: &str,
    allow_zero: bool,
) -> Result<Vec<u64>, ConvertError> {
    let bad = || {
        bad_meta(
            path,
            format!(
                "{what} is not a list of {}integers",
                if allow_zero { "" } else { "positive " }
            ),
        )
    };
    let list = v.and_then(Value::as_array).ok_or_else(bad)?;
    list.iter()
        .map(|x| x.as_u64().filter(|&n| allow_zero || n > 0).ok_or_else(bad))
        .collect()
}

/// Checks that shape, inner shape and chunks per shard have the same non-zero rank and
/// that the shard grid stays in a sane range.
fn check_ranks(path: &Path, shape: &[u64], inner: &[u64], cps: &[u64]) -> Result<(), ConvertError> {
    if shape.is_empty() || shape.len() != inner.len() || shape.len() != cps.len() {
        return Err(bad_meta(
            path,
            format!(
                "ranks differ or are zero: shape {shape:?}, chunks {inner:?}, chunks per shard {cps:?}"
            ),
        ));
    }
    let n = cps.iter().try_fold(1u64, |a, &c| a.checked_mul(c));
    if n.is_none_or(|n| n > 1 << 30) {
        return Err(bad_meta(
            path,
            format!("{cps:?} chunks per shard is too many"),
        ));
    }
    let fits = inner
        .iter()
        .zip(cps)
        .all(|(i, c)| i.checked_mul(*c).is_some());
    if !fits {
        return Err(bad_meta(path, "shard shape overflows"));
    }
    Ok(())
}

/// L1: a v2 `.zarray` with `shards`.
fn open_v2(root: &Path, zarray: &Path) -> Result<LegacyArray, ConvertError> {
    let doc = read_json(zarray)?;
    let m = doc
        .as_object()
        .ok_or_else(|| bad_meta(zarray, "not a JSON object"))?;
    if m.get("zarr_format").and_then(Value::as_u64) != Some(2) {
        return Err(bad_meta(zarray, "zarr_format is not 2"));
    }
    if !m.contains_key("shards") {
        return Err(ConvertError::NotLegacy {
            path: root.to_path_buf(),
            why: "a Zarr v2 array without \"shards\": nothing to convert".into(),
        });
    }
    match m.get("shard_format").and_then(Value::as_str) {
        Some("indexed") => {}
        other => {
            return Err(unsupported(
                zarray,
                format!("shard_format {other:?} (only \"indexed\")"),
            ));
        }
    }
    if !matches!(m.get("filters"), None | Some(Value::Null))
        && m.get("filters") != Some(&Value::Array(vec![]))
    {
        return Err(unsupported(
            zarray,
            "filters (only a compressor can be mapped)",
        ));
    }
    let shape = u64_list(zarray, m.get("shape"), "shape", true)?;
    let inner = u64_list(zarray, m.get("chunks"), "chunks", false)?;
    let cps = u64_list(zarray, m.get("shards"), "shards", false)?;
    check_ranks(zarray, &shape, &inner, &cps)?;
    let dtype = parse_dtype(zarray, m.get("dtype").unwrap_or(&Value::Null))?;
    let compressor =
        Compressor::from_v2(zarray, m.get("compressor").unwrap_or(&Value::Null), &dtype)?;
    let fill = map_fill(zarray, m.get("fill_value").unwrap_or(&Value::Null), &dtype)?;
    let fortran = order_is_f(zarray, m.get("order"))?;
    let separator = match m.get("dimension_separator") {
        None | Some(Value::Null) => ".".to_string(),
        Some(Value::String(s)) if s == "." || s == "/" => s.clone(),
        Some(other) => return Err(bad_meta(zarray, format!("dimension_separator {other}"))),
    };
    let attributes = match root.join(".zattrs") {
        p if p.is_file() => match read_json(&p)? {
            Value::Object(a) => a,
            _ => return Err(bad_meta(&p, "not a JSON object")),
        },
        _ => Map::new(),
    };
    Ok(LegacyArray {
        layout: Layout::V2Shards,
        meta_path: zarray.to_path_buf(),
        out_path: String::new(),
        shape,
        inner,
        cps,
        dtype,
        fortran,
        compressor,
        fill,
        attributes,
        data_dir: root.to_path_buf(),
        key_prefix: "",
        separator,
    })
}

/// `order` / `chunk_memory_layout`: `"C"` (default) or `"F"`.
fn order_is_f(path: &Path, v: Option<&Value>) -> Result<bool, ConvertError> {
    match v.and_then(Value::as_str) {
        None | Some("C") => Ok(false),
        Some("F") => Ok(true),
        Some(other) => Err(bad_meta(path, format!("memory order {other:?}"))),
    }
}

/// L2/L3: a v3-draft hierarchy. Every `*.array.json` under `meta/` is converted;
/// every group document and every ancestor of an array becomes a v3 group.
fn open_draft(root: &Path) -> Result<LegacyStore, ConvertError> {
    let meta = root.join("meta");
    let mut docs = Vec::new();
    for name in ["root.array.json", "root.group.json"] {
        if meta.join(name).is_file() {
            docs.push((String::new(), meta.join(name)));
        }
    }
    walk_meta(&meta.join("root"), "", &mut docs)?;
    let mut arrays = Vec::new();
    let mut groups: Vec<(String, Map<String, Value>)> = Vec::new();
    for (path, file) in &docs {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".array.json") {
            arrays.push(open_draft_array(root, path, file)?);
        } else {
            let doc = read_json(file)?;
            let attrs = doc
                .get("attributes")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            groups.push((path.clone(), attrs));
        }
    }
    if arrays.is_empty() {
        return Err(ConvertError::NotLegacy {
            path: root.to_path_buf(),
            why: "a v3-draft store without any array metadata under meta/".into(),
        });
    }
    add_ancestor_groups(&arrays, &mut groups);
    Ok(LegacyStore { arrays, groups })
}

/// Collects `(node path, document)` for every `<name>.array.json` / `<name>.group.json`
/// below `dir` (the node path of `dir` is `prefix`).
fn walk_meta(
    dir: &Path,
    prefix: &str,
    out: &mut Vec<(String, PathBuf)>,
) -> Result<(), ConvertError> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    let mut entries: Vec<_> = entries
        .collect::<Result<_, _>>()
        .map_err(IoError::with("list", dir))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let node = |stem: &str| {
            if prefix.is_empty() {
                stem.to_string()
            } else {
                format!("{prefix}/{stem}")
            }
        };
        let path = e.path();
        if path.is_dir() {
            walk_meta(&path, &node(&name), out)?;
        } else if let Some(stem) = name
            .strip_suffix(".array.json")
            .or_else(|| name.strip_suffix(".group.json"))
        {
            out.push((node(stem), path));
        }
    }
    Ok(())
}

/// Adds the root and every ancestor of an array that has no group document yet.
fn add_ancestor_groups(arrays: &[LegacyArray], groups: &mut Vec<(String, Map<String, Value>)>) {
    let mut wanted = Vec::new();
    for a in arrays.iter().filter(|a| !a.out_path.is_empty()) {
        wanted.push(String::new());
        let parts: Vec<&str> = a.out_path.split('/').collect();
        for i in 1..parts.len() {
            wanted.push(parts[..i].join("/"));
        }
    }
    for w in wanted {
        if !groups.iter().any(|(p, _)| *p == w) {
            groups.push((w, Map::new()));
        }
    }
    groups.sort_by(|a, b| a.0.cmp(&b.0));
}

/// One v3-draft array document (L2 or L3).
fn open_draft_array(root: &Path, node: &str, file: &Path) -> Result<LegacyArray, ConvertError> {
    let doc = read_json(file)?;
    let m = doc
        .as_object()
        .ok_or_else(|| bad_meta(file, "not a JSON object"))?;
    if let Some(ext) = m
        .get("extensions")
        .and_then(Value::as_array)
        .filter(|e| !e.is_empty())
    {
        return Err(unsupported(
            file,
            format!("extensions {}", Value::Array(ext.clone())),
        ));
    }
    let (layout, cps) = draft_sharding(file, m)?;
    let grid = m
        .get("chunk_grid")
        .and_then(Value::as_object)
        .ok_or_else(|| bad_meta(file, "no chunk_grid"))?;
    if grid.get("type").and_then(Value::as_str) != Some("regular") {
        return Err(unsupported(
            file,
            format!(
                "chunk_grid type {}",
                grid.get("type").unwrap_or(&Value::Null)
            ),
        ));
    }
    let separator = match grid.get("separator").and_then(Value::as_str) {
        None => "/".to_string(),
        Some(s @ ("/" | ".")) => s.to_string(),
        Some(other) => return Err(bad_meta(file, format!("chunk_grid separator {other:?}"))),
    };
    let shape = u64_list(file, m.get("shape"), "shape", true)?;
    let inner = u64_list(
        file,
        grid.get("chunk_shape"),
        "chunk_grid.chunk_shape",
        false,
    )?;
    check_ranks(file, &shape, &inner, &cps)?;
    let dtype = parse_dtype(file, m.get("data_type").unwrap_or(&Value::Null))?;
    let compressor = Compressor::from_draft(file, m.get("compressor"), &dtype)?;
    let fill = map_fill(file, m.get("fill_value").unwrap_or(&Value::Null), &dtype)?;
    let fortran = order_is_f(file, m.get("chunk_memory_layout"))?;
    let attributes = m
        .get("attributes")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let data_dir = if node.is_empty() {
        root.join("data/root")
    } else {
        root.join("data/root").join(node)
    };
    Ok(LegacyArray {
        layout,
        meta_path: file.to_path_buf(),
        out_path: node.to_string(),
        shape,
        inner,
        cps,
        dtype,
        fortran,
        compressor,
        fill,
        attributes,
        data_dir,
        key_prefix: "c",
        separator,
    })
}

/// Finds the sharding description of a v3-draft array: a `storage_transformers` entry
/// (L3) or a `sharding` object (L2). Returns the layout and chunks per shard.
fn draft_sharding(file: &Path, m: &Map<String, Value>) -> Result<(Layout, Vec<u64>), ConvertError> {
    let transformers = m
        .get("storage_transformers")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(t) = transformers.first() {
        if transformers.len() > 1 {
            return Err(unsupported(file, "more than one storage transformer"));
        }
        let ext = t
            .get("extension")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !ext.trim_end_matches('/').ends_with("sharding/1.0") {
            return Err(unsupported(file, format!("storage transformer {ext:?}")));
        }
        let kind = t.get("type").and_then(Value::as_str);
        if kind != Some("indexed") {
            return Err(unsupported(
                file,
                format!("sharding type {kind:?} (only \"indexed\")"),
            ));
        }
        let conf = t.get("configuration");
        let cps = u64_list(
            file,
            conf.and_then(|c| c.get("chunks_per_shard")),
            "chunks_per_shard",
            false,
        )?;
        return Ok((Layout::StorageTransformer, cps));
    }
    if let Some(s) = m.get("sharding") {
        let format = s.get("format").and_then(Value::as_str);
        if format != Some("indexed") {
            return Err(unsupported(
                file,
                format!("sharding format {format:?} (only \"indexed\")"),
            ));
        }
        let cps = u64_list(
            file,
            s.get("chunks_per_shard"),
            "sharding.chunks_per_shard",
            false,
        )?;
        return Ok((Layout::ZarritaDraft, cps));
    }
    Err(unsupported(
        file,
        "v3-draft array without sharding (nothing to convert)",
    ))
}
