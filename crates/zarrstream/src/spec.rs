//! The array specification and its builder: every invalid combination is rejected here,
//! so the rest of the crate can rely on the derived sizes.

use std::fmt;
use std::str::FromStr;

use crate::codec::{Checksum, Codec};
use crate::dtype::{DataType, FillPattern};
use crate::error::{ParseError, SpecError};

/// Where the shard index sits in each shard file.
///
/// Parses from and prints as its `zarr.json` name, `end` or `start`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum IndexLocation {
    /// After the inner chunks (the Zarr default).
    #[default]
    End,
    /// Before the inner chunks.
    Start,
}

impl IndexLocation {
    /// The name used in `zarr.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexLocation::End => "end",
            IndexLocation::Start => "start",
        }
    }
}

impl FromStr for IndexLocation {
    type Err = ParseError;

    /// Parses `end` or `start`.
    fn from_str(s: &str) -> Result<Self, ParseError> {
        match s {
            "end" => Ok(IndexLocation::End),
            "start" => Ok(IndexLocation::Start),
            _ => Err(ParseError::new("shard index location", s, "end, start")),
        }
    }
}

impl fmt::Display for IndexLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// As its `zarr.json` name, so the document types and the text form agree.
impl serde::Serialize for IndexLocation {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for IndexLocation {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Largest number of inner chunks in one shard (tensorstore's limit).
pub const MAX_CHUNKS_PER_SHARD: u64 = 1 << 30;

/// A validated array specification: shape, chunking, element type and codecs.
///
/// Axis 0 is the append axis; frames are 2-D planes over the last two axes and arrive in
/// C order of the leading axes.
///
/// ```
/// use zarrstream::{ArraySpec, Codec, DataType};
/// let spec = ArraySpec::builder()
///     .shape([0, 2048, 2048])
///     .chunk_shape([1, 512, 512])
///     .shard_shape([32, 2048, 2048])
///     .dtype(DataType::UInt16)
///     .codec(Codec::blosc_lz4(1))
///     .dimension_names(["t", "y", "x"])
///     .build()?;
/// assert_eq!(spec.frame_bytes(), 2048 * 2048 * 2);
/// # Ok::<(), zarrstream::SpecError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct ArraySpec {
    pub(crate) shape: Vec<u64>,
    pub(crate) chunk: Vec<u64>,
    pub(crate) shard: Vec<u64>,
    pub(crate) dtype: DataType,
    pub(crate) fill_value: f64,
    pub(crate) fill: FillPattern,
    pub(crate) dimension_names: Option<Vec<String>>,
    /// A single frame (`y, x`): `shape`, `chunk` and `shard` carry a leading axis of 1
    /// that the writer's grid needs and the store does not have (it is left out of
    /// `zarr.json` and of the shard keys).
    pub(crate) planar: bool,
    pub(crate) codec: Codec,
    pub(crate) crc32c: bool,
    pub(crate) index_location: IndexLocation,
    pub(crate) attributes: serde_json::Map<String, serde_json::Value>,
    /// An encoder setting, not part of the format: see [`ChunkEncoder::lz4_acceleration`]
    /// (set for pyramid levels).
    ///
    /// [`ChunkEncoder::lz4_acceleration`]: crate::ChunkEncoder::lz4_acceleration
    pub(crate) lz4_acceleration: Option<i32>,
    // Derived, checked against overflow in `build`.
    pub(crate) chunk_bytes: usize,
    pub(crate) frame_bytes: usize,
    pub(crate) chunks_per_shard: usize,
}

impl ArraySpec {
    /// Starts a builder.
    pub fn builder() -> ArraySpecBuilder {
        ArraySpecBuilder::default()
    }

    /// Array shape; `shape()[0] == 0` means the append axis is unbounded.
    pub fn shape(&self) -> &[u64] {
        &self.shape[self.hidden()..]
    }
    /// Inner chunk shape.
    pub fn chunk_shape(&self) -> &[u64] {
        &self.chunk[self.hidden()..]
    }
    /// Shard shape.
    pub fn shard_shape(&self) -> &[u64] {
        &self.shard[self.hidden()..]
    }
    /// Leading axes the writer adds to the store's: 1 for a single frame (`y, x`).
    pub(crate) fn hidden(&self) -> usize {
        usize::from(self.planar)
    }
    /// The grid coordinates (with the hidden axis) of a shard key's coordinates.
    pub(crate) fn key_coords(&self, mut coords: Vec<u64>) -> Vec<u64> {
        if self.planar {
            coords.insert(0, 0);
        }
        coords
    }
    /// Element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }
    /// Fill value.
    pub fn fill_value(&self) -> f64 {
        self.fill_value
    }
    /// Inner codec.
    pub fn codec(&self) -> Codec {
        self.codec
    }
    /// Whether each inner chunk carries a trailing crc32c.
    pub fn crc32c(&self) -> bool {
        self.crc32c
    }
    /// The checksum each inner chunk carries, for a [`ChunkEncoder`](crate::ChunkEncoder)
    /// of this array.
    pub fn checksum(&self) -> Checksum {
        Checksum::crc32c_if(self.crc32c)
    }
    /// Where the shard index is stored.
    pub fn index_location(&self) -> IndexLocation {
        self.index_location
    }
    /// Dimension names, if set.
    pub fn dimension_names(&self) -> Option<&[String]> {
        self.dimension_names.as_deref()
    }
    /// Array rank (2 for a single frame).
    pub fn rank(&self) -> usize {
        self.shape.len() - self.hidden()
    }
    /// Bytes of one frame (one y×x plane).
    pub fn frame_bytes(&self) -> usize {
        self.frame_bytes
    }
    /// Bytes of one decoded inner chunk.
    pub fn chunk_bytes(&self) -> usize {
        self.chunk_bytes
    }
    /// Inner chunks per shard.
    pub fn chunks_per_shard(&self) -> usize {
        self.chunks_per_shard
    }
    /// Frames per step of the append axis (product of the leading axes after axis 0).
    pub fn frames_per_step(&self) -> u64 {
        self.shape[1..self.shape.len() - 2].iter().product()
    }
}

/// Builder of [`ArraySpec`]; see there for an example.
///
/// It is also the `array` section of a JSON configuration ([`crate::config`]): the keys
/// are the setters' names, and [`build`](Self::build) checks them as it checks the
/// setters' values.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
#[schemars(rename = "array")]
pub struct ArraySpecBuilder {
    /// Array shape (required); axis 0 may be 0 (unbounded append axis).
    shape: Option<Vec<u64>>,
    /// Inner chunk shape (required; same rank; divides the shard shape).
    #[serde(rename = "chunk_shape")]
    chunk: Option<Vec<u64>>,
    /// Shard shape (required; same rank).
    #[serde(rename = "shard_shape")]
    shard: Option<Vec<u64>>,
    /// Element type (default `"uint16"`): `"int8"` … `"uint64"`, `"float32"`,
    /// `"float64"`.
    #[serde(deserialize_with = "crate::de::from_str")]
    #[schemars(with = "String")]
    dtype: DataType,
    /// Fill value (default 0); must be representable in the data type.
    #[serde(deserialize_with = "crate::de::fill_value")]
    #[schemars(schema_with = "crate::de::fill_value_schema")]
    fill_value: f64,
    /// Dimension names, one per axis, distinct.
    dimension_names: Option<Vec<String>>,
    /// Inner codec (default `"blosc-lz4:1"`): `none`, `zstd[:LEVEL]`,
    /// `blosc-lz4[:CLEVEL[:SHUFFLE]]` (alias `lz4[…]`), `blosc-zstd[:CLEVEL[:SHUFFLE]]`;
    /// SHUFFLE `shuffle` (default), `bitshuffle`, `noshuffle`.
    #[serde(deserialize_with = "crate::de::from_str")]
    #[schemars(with = "String")]
    codec: Codec,
    /// Per-chunk crc32c (default on).
    crc32c: bool,
    /// Shard index location: `"end"` (default) or `"start"`.
    #[serde(deserialize_with = "crate::de::from_str")]
    #[schemars(with = "String", extend("enum" = ["end", "start"]))]
    index_location: IndexLocation,
    /// User attributes merged into `zarr.json` `attributes`.
    attributes: serde_json::Map<String, serde_json::Value>,
}

impl Default for ArraySpecBuilder {
    fn default() -> Self {
        ArraySpecBuilder {
            shape: None,
            chunk: None,
            shard: None,
            dtype: DataType::UInt16,
            fill_value: 0.0,
            dimension_names: None,
            codec: Codec::blosc_lz4(1),
            crc32c: true,
            index_location: IndexLocation::End,
            attributes: serde_json::Map::new(),
        }
    }
}

impl ArraySpecBuilder {
    /// Array shape; axis 0 may be 0 (unbounded append axis).
    pub fn shape(mut self, shape: impl AsRef<[u64]>) -> Self {
        self.shape = Some(shape.as_ref().to_vec());
        self
    }
    /// Inner chunk shape (same rank; divides the shard shape).
    pub fn chunk_shape(mut self, chunk: impl AsRef<[u64]>) -> Self {
        self.chunk = Some(chunk.as_ref().to_vec());
        self
    }
    /// Shard shape (same rank).
    pub fn shard_shape(mut self, shard: impl AsRef<[u64]>) -> Self {
        self.shard = Some(shard.as_ref().to_vec());
        self
    }
    /// Element type (default `uint16`).
    pub fn dtype(mut self, dtype: DataType) -> Self {
        self.dtype = dtype;
        self
    }
    /// Fill value (default 0); must be representable in the data type.
    pub fn fill_value(mut self, value: f64) -> Self {
        self.fill_value = value;
        self
    }
    /// Dimension names, one per axis, distinct.
    pub fn dimension_names<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.dimension_names = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// Inner codec (default [`Codec::blosc_lz4(1)`](Codec::blosc_lz4)).
    pub fn codec(mut self, codec: Codec) -> Self {
        self.codec = codec;
        self
    }
    /// Per-chunk crc32c (default on).
    pub fn crc32c(mut self, on: bool) -> Self {
        self.crc32c = on;
        self
    }
    /// Shard index location (default end).
    pub fn index_location(mut self, location: IndexLocation) -> Self {
        self.index_location = location;
        self
    }
    /// User attributes merged into `zarr.json` `attributes` (the writer adds its own
    /// `zarrstream` key for progress).
    pub fn attributes(mut self, attributes: serde_json::Map<String, serde_json::Value>) -> Self {
        self.attributes = attributes;
        self
    }

    /// Validates and builds the specification.
    pub fn build(self) -> Result<ArraySpec, SpecError> {
        let shape = self.shape.ok_or(SpecError::Missing("shape"))?;
        let chunk = self.chunk.ok_or(SpecError::Missing("chunk_shape"))?;
        let shard = self.shard.ok_or(SpecError::Missing("shard_shape"))?;
        check_ranks(&shape, &chunk, &shard, self.dimension_names.as_deref())?;
        check_extents(&shape, &chunk, &shard)?;
        // A single frame gets the leading axis of one frame the writer's grid works on.
        let planar = shape.len() == 2;
        let lead = |v: Vec<u64>| if planar { [vec![1], v].concat() } else { v };
        let (shape, chunk, shard) = (lead(shape), lead(chunk), lead(shard));
        let sizes = Sizes::of(&shape, &chunk, &shard, self.dtype)?;
        if let Codec::Blosc { .. } = self.codec
            && sizes.chunk_bytes > crate::codec::blosc::MAX_NBYTES as u64
        {
            return Err(SpecError::ChunkTooLargeForBlosc(sizes.chunk_bytes));
        }
        self.codec.validate(self.dtype)?;
        let fill = self.dtype.fill_bytes(self.fill_value)?;
        let to_usize = |v: u64, what| usize::try_from(v).map_err(|_| SpecError::Overflow(what));
        let spec = ArraySpec {
            chunk_bytes: to_usize(sizes.chunk_bytes, "inner chunk size")?,
            frame_bytes: to_usize(sizes.frame_bytes, "frame size")?,
            chunks_per_shard: to_usize(sizes.chunks_per_shard, "inner chunks per shard")?,
            lz4_acceleration: None,
            shape,
            chunk,
            shard,
            dtype: self.dtype,
            fill_value: self.fill_value,
            fill,
            dimension_names: self.dimension_names,
            planar,
            codec: self.codec,
            crc32c: self.crc32c,
            index_location: self.index_location,
            attributes: self.attributes,
        };
        // The worst-case shard file must be addressable with u64 offsets.
        crate::shard::ShardLayout::new(&spec)
            .map_err(|_| SpecError::Overflow("worst-case shard size"))?;
        Ok(spec)
    }
}

/// The rank is in 2..=31, and the chunk and shard shapes and the dimension names (which
/// must be distinct) have one entry per axis.
fn check_ranks(
    shape: &[u64],
    chunk: &[u64],
    shard: &[u64],
    dimension_names: Option<&[String]>,
) -> Result<(), SpecError> {
    let rank = shape.len();
    if rank < 2 {
        return Err(SpecError::RankTooSmall(rank));
    }
    if rank > 31 {
        return Err(SpecError::RankTooLarge(rank));
    }
    for (what, v) in [("chunk_shape", chunk), ("shard_shape", shard)] {
        if v.len() != rank {
            return Err(SpecError::RankMismatch {
                what,
                got: v.len(),
                rank,
            });
        }
    }
    if let Some(names) = dimension_names {
        if names.len() != rank {
            return Err(SpecError::RankMismatch {
                what: "dimension_names",
                got: names.len(),
                rank,
            });
        }
        for (i, n) in names.iter().enumerate() {
            if names[..i].contains(n) {
                return Err(SpecError::DuplicateDimensionName(n.clone()));
            }
        }
    }
    Ok(())
}

/// Only the append axis may be unbounded, chunk and shard edges are at least 1, and
/// inner chunks tile the shard exactly (the sharding codec requires it). The shapes have
/// equal ranks ([`check_ranks`]).
fn check_extents(shape: &[u64], chunk: &[u64], shard: &[u64]) -> Result<(), SpecError> {
    // A single frame (`y, x`) has no append axis.
    let first = usize::from(shape.len() > 2);
    if let Some(axis) = (first..shape.len()).find(|&a| shape[a] == 0) {
        return Err(SpecError::ZeroExtent { axis });
    }
    for axis in 0..shape.len() {
        for (what, v) in [("chunk_shape", chunk), ("shard_shape", shard)] {
            if v[axis] == 0 {
                return Err(SpecError::ZeroChunk { what, axis });
            }
        }
        if !shard[axis].is_multiple_of(chunk[axis]) {
            return Err(SpecError::ChunkNotDividingShard {
                axis,
                chunk: chunk[axis],
                shard: shard[axis],
            });
        }
    }
    Ok(())
}

/// The byte sizes derived from the shapes, each checked against overflow.
struct Sizes {
    chunk_bytes: u64,
    frame_bytes: u64,
    chunks_per_shard: u64,
}

impl Sizes {
    /// Shapes already checked by [`check_ranks`] and [`check_extents`].
    fn of(shape: &[u64], chunk: &[u64], shard: &[u64], dtype: DataType) -> Result<Self, SpecError> {
        fn product(v: impl IntoIterator<Item = u64>, what: &'static str) -> Result<u64, SpecError> {
            v.into_iter()
                .try_fold(1u64, |a, b| a.checked_mul(b))
                .ok_or(SpecError::Overflow(what))
        }
        let rank = shape.len();
        let es = dtype.size() as u64;
        let chunks_per_shard = product(
            chunk.iter().zip(shard).map(|(c, s)| s / c),
            "inner chunks per shard",
        )?;
        if chunks_per_shard > MAX_CHUNKS_PER_SHARD {
            return Err(SpecError::TooManyChunksPerShard(chunks_per_shard));
        }
        let chunk_bytes = product(chunk.iter().copied().chain([es]), "inner chunk size")?;
        let frame_bytes = product(shape[rank - 2..].iter().copied().chain([es]), "frame size")?;
        // The whole array (append axis aside) must be addressable too.
        product(shape[1..].iter().copied().chain([es]), "array size")?;
        Ok(Sizes {
            chunk_bytes,
            frame_bytes,
            chunks_per_shard,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> ArraySpecBuilder {
        ArraySpec::builder()
            .shape([0, 64, 64])
            .chunk_shape([1, 32, 32])
            .shard_shape([4, 64, 64])
    }

    #[test]
    fn a_single_frame_is_a_spec_of_rank_2() {
        let s = ArraySpec::builder()
            .shape([40, 64])
            .chunk_shape([16, 32])
            .shard_shape([48, 64])
            .dimension_names(["y", "x"])
            .build()
            .unwrap();
        assert_eq!(
            (s.rank(), s.shape(), s.chunk_shape()),
            (2, &[40, 64][..], &[16, 32][..])
        );
        assert_eq!(s.shard_shape(), [48, 64]);
        assert_eq!((s.frame_bytes(), s.frames_per_step()), (40 * 64 * 2, 1));
        assert_eq!(s.chunks_per_shard(), 3 * 2);
        assert_eq!(s.key_coords(vec![1, 0]), vec![0, 1, 0]);
    }

    #[test]
    fn valid_spec_derives_sizes() {
        let s = base().build().unwrap();
        assert_eq!(s.frame_bytes(), 64 * 64 * 2);
        assert_eq!(s.chunk_bytes(), 32 * 32 * 2);
        assert_eq!(s.chunks_per_shard(), 16);
        assert_eq!(s.frames_per_step(), 1);
    }

    #[test]
    fn writer_and_pyramid_option_names_round_trip() {
        use crate::{Downsample, Packing};
        for p in [Packing::Compact, Packing::Sparse] {
            assert_eq!(p.to_string().parse::<Packing>(), Ok(p));
        }
        use Downsample::*;
        for d in [Mean, Decimate, Min, Max] {
            assert_eq!(d.to_string().parse::<Downsample>(), Ok(d));
            assert_eq!(d.to_string(), d.as_str());
        }
        let e = "dense".parse::<Packing>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"dense\" is not a packing (compact, sparse)"
        );
        let e = "median".parse::<Downsample>().unwrap_err();
        assert_eq!(
            (e.what, e.input.as_str(), e.expected),
            ("downsampling method", "median", "mean, decimate, min, max")
        );
    }

    #[test]
    fn index_locations_round_trip() {
        for l in [IndexLocation::End, IndexLocation::Start] {
            assert_eq!(l.to_string().parse::<IndexLocation>(), Ok(l));
        }
        let e = "middle".parse::<IndexLocation>().unwrap_err();
        assert_eq!(e.input, "middle");
        assert_eq!(
            e.to_string(),
            "\"middle\" is not a shard index location (end, start)"
        );
    }

    #[test]
    fn every_invalid_combination_has_its_error() {
        use SpecError::*;
        let cases: Vec<(ArraySpecBuilder, SpecError)> = vec![
            (
                ArraySpec::builder()
                    .shape([4])
                    .chunk_shape([4])
                    .shard_shape([4]),
                RankTooSmall(1),
            ),
            (
                // A single frame has no append axis to leave unbounded.
                ArraySpec::builder()
                    .shape([0, 4])
                    .chunk_shape([1, 4])
                    .shard_shape([1, 4]),
                ZeroExtent { axis: 0 },
            ),
            (
                ArraySpec::builder()
                    .chunk_shape([1, 1, 1])
                    .shard_shape([1, 1, 1]),
                Missing("shape"),
            ),
            (
                base().chunk_shape([1, 32]),
                RankMismatch {
                    what: "chunk_shape",
                    got: 2,
                    rank: 3,
                },
            ),
            (
                base().shard_shape([1, 64, 64, 1]),
                RankMismatch {
                    what: "shard_shape",
                    got: 4,
                    rank: 3,
                },
            ),
            (base().shape([0, 0, 64]), ZeroExtent { axis: 1 }),
            (
                base().chunk_shape([1, 0, 32]),
                ZeroChunk {
                    what: "chunk_shape",
                    axis: 1,
                },
            ),
            (
                base().chunk_shape([1, 24, 32]),
                ChunkNotDividingShard {
                    axis: 1,
                    chunk: 24,
                    shard: 64,
                },
            ),
            (
                base()
                    .chunk_shape([1, 1, 1])
                    .shard_shape([1 << 10, 1 << 10, 1 << 11]),
                TooManyChunksPerShard(1 << 31),
            ),
            (base().shape([0, u64::MAX, 2]), Overflow("frame size")),
            (
                base().codec(Codec::zstd(23)),
                LevelOutOfRange {
                    codec: "zstd",
                    level: 23,
                    min: -131072,
                    max: 22,
                },
            ),
            (
                base().codec(Codec::blosc_lz4(10)),
                LevelOutOfRange {
                    codec: "blosc",
                    level: 10,
                    min: 0,
                    max: 9,
                },
            ),
            (
                base().dimension_names(["t", "y"]),
                RankMismatch {
                    what: "dimension_names",
                    got: 2,
                    rank: 3,
                },
            ),
            (
                base().dimension_names(["t", "y", "y"]),
                DuplicateDimensionName("y".into()),
            ),
            (
                base().fill_value(70000.0),
                FillValue {
                    value: 70000.0,
                    dtype: DataType::UInt16,
                },
            ),
            (
                base()
                    .chunk_shape([1, 1 << 15, 1 << 15])
                    .shard_shape([1, 1 << 15, 1 << 15])
                    .shape([0, 1 << 15, 1 << 15]),
                ChunkTooLargeForBlosc(1 << 31),
            ),
        ];
        for (b, want) in cases {
            assert_eq!(b.build().unwrap_err(), want);
        }
    }
}
