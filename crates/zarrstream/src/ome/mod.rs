//! OME-Zarr (NGFF) 0.5 image metadata: the store root is a Zarr group whose
//! `zarr.json` carries `attributes.ome` (`version`, one `multiscales` entry, optional
//! `omero`), and each resolution level is a sharded array below it (`0`, `1`, …).
//!
//! Axes follow from the array's rank: time (the append axis), then an optional channel
//! axis, then space (`z`, `y`, `x`). The level arrays' `dimension_names` equal the axis
//! names. Levels `1…L` ([`Ome::levels`]) are 2×2 reductions in y and x built during the
//! acquisition (`crate::pyramid`); each lists its scale and pixel-centre translation.

mod axis;
mod display;
mod omero;
mod plate;
mod units;

use std::time::Duration;

use serde_json::{Value, json};

use crate::error::OmeError;
use crate::pyramid::{Downsample, Levels};
use crate::spec::ArraySpec;

pub use axis::{Axis, AxisKind};
pub(crate) use display::DisplayEstimate;
pub use display::{DISPLAY_HIGH_QUANTILE, DISPLAY_LOW_QUANTILE, DISPLAY_SAMPLE_INTERVAL};
pub use omero::{Omero, OmeroChannel, Window};
pub use plate::{Acquisition, Plate, PlateImage};
pub use units::{SpaceUnit, TimeUnit};

use omero::PALETTE;
pub(crate) use omero::dtype_range;

/// The OME-Zarr version written.
pub const OME_VERSION: &str = "0.5";

/// The path of the full-resolution level array inside the image group.
pub const LEVEL0_PATH: &str = "0";

/// Default LZ4 acceleration of pyramid levels 1…L ([`Ome::level_lz4_acceleration`]).
/// On level 1 of the synthetic camera's frames (2×2 means) blosc-lz4 ran about 7× faster
/// with it than with c-blosc's clevel-1 setting (acceleration 9), for chunks 12 % larger
/// (ratio 1.95 against 2.19), and faster than level 0 with c-blosc's setting
/// (`cargo bench --bench codecs`).
pub const LEVEL_LZ4_ACCELERATION: i32 = 128;

/// Options of an OME-Zarr 0.5 image; pass to
/// [`Writer::create_ome`](crate::Writer::create_ome).
///
/// Every option is optional: an axis without a physical size gets no unit and scale 1.
/// Values are checked when the image is created ([`OmeError`]).
///
/// ```
/// use std::time::Duration;
/// use zarrstream::{ArraySpec, Ome, SpaceUnit};
/// let spec = ArraySpec::builder()
///     .shape([0, 2, 512, 512])
///     .chunk_shape([1, 1, 256, 256])
///     .shard_shape([16, 1, 512, 512])
///     .dimension_names(["t", "c", "y", "x"])
///     .build()?;
/// let ome = Ome::new()
///     .pixel_size(0.65, 0.65)
///     .space_unit(SpaceUnit::Micrometer)
///     .frame_interval(Duration::from_millis(50))
///     .channels(["GFP", "mCherry"]);
/// let attrs = ome.attributes(&spec)?;
/// let ms = &attrs["ome"]["multiscales"][0];
/// assert_eq!(ms["axes"][1]["type"], "channel");
/// let scale = &ms["datasets"][0]["coordinateTransformations"][0]["scale"];
/// assert_eq!(scale, &serde_json::json!([50.0, 1.0, 0.65, 0.65]));
/// # Ok::<(), zarrstream::Error>(())
/// ```
///
/// It is also the `ome` section of a JSON configuration ([`crate::config`]): the keys
/// are the setters' names (`frame_interval_ms` in milliseconds, `pixel_size` as
/// `[y, x]`), each checked as the setter's value is.
#[derive(Debug, Clone, PartialEq, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[derive(schemars::JsonSchema)]
#[schemars(rename = "ome")]
pub struct Ome {
    /// Name of the multiscale image (default `"image"`).
    name: Option<String>,
    /// Physical pixel size `[y, x]`, in the space unit; each positive.
    #[schemars(with = "Option<[f64; 2]>")]
    pixel_size: Option<(f64, f64)>,
    /// Distance between z planes, in the space unit; positive.
    z_step: Option<f64>,
    /// Time between frames along the time axis, in milliseconds; positive.
    #[serde(
        rename = "frame_interval_ms",
        deserialize_with = "crate::de::frame_interval"
    )]
    #[schemars(with = "Option<f64>")]
    frame_interval: Option<Duration>,
    /// Unit of the pixel size and z step (default `"micrometer"`).
    #[serde(deserialize_with = "crate::de::from_str")]
    #[schemars(with = "String")]
    space_unit: SpaceUnit,
    /// Unit the frame interval is written in (default `"millisecond"`).
    #[serde(deserialize_with = "crate::de::from_str")]
    #[schemars(with = "String")]
    time_unit: TimeUnit,
    /// Channel names, one per entry of the channel axis.
    channels: Option<Vec<String>>,
    /// `omero` rendering metadata: `"auto"`, `{"window": {…}}` (every channel over
    /// that window) or `{"channels": [{"label", "color", "window", "active"}]}`.
    omero: Option<Omero>,
    /// Resolution levels, level 0 included (default 1): a count, or `"auto"` (until a
    /// level's frame fits one inner chunk).
    #[serde(deserialize_with = "crate::de::levels")]
    #[schemars(schema_with = "crate::de::levels_schema")]
    levels: Levels,
    /// How each level is reduced from the one above: `"mean"` (default), `"decimate"`,
    /// `"min"`, `"max"`.
    #[serde(deserialize_with = "crate::de::downsample")]
    #[schemars(with = "String", extend("enum" = ["mean", "decimate", "min", "max"]))]
    downsample: Downsample,
    /// Whether levels halve z too (needs a z axis).
    downsample_z: bool,
    /// LZ4 acceleration of the `lz4` chunks of levels 1…L (default 128; at least 1).
    #[serde(deserialize_with = "crate::de::acceleration")]
    level_lz4_acceleration: Option<i32>,
}

impl Ome {
    /// Options with nothing set.
    pub fn new() -> Self {
        Self::default()
    }
    /// Name of the multiscale image (default `"image"`).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }
    /// Physical pixel size along y and x, in the space unit; must be positive.
    pub fn pixel_size(mut self, y: f64, x: f64) -> Self {
        self.pixel_size = Some((y, x));
        self
    }
    /// Distance between z planes, in the space unit; must be positive.
    pub fn z_step(mut self, step: f64) -> Self {
        self.z_step = Some(step);
        self
    }
    /// Time between frames along the time axis; must be positive.
    pub fn frame_interval(mut self, interval: Duration) -> Self {
        self.frame_interval = Some(interval);
        self
    }
    /// Unit of the pixel size and z step (default micrometer).
    pub fn space_unit(mut self, unit: SpaceUnit) -> Self {
        self.space_unit = unit;
        self
    }
    /// Unit the frame interval is written in (default millisecond).
    pub fn time_unit(mut self, unit: TimeUnit) -> Self {
        self.time_unit = unit;
        self
    }
    /// Channel names, one per entry of the channel axis. For a rank-4 array without
    /// dimension names, giving channels makes axis 1 the channel axis (`t, c, y, x`).
    pub fn channels<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.channels = Some(names.into_iter().map(Into::into).collect());
        self
    }
    /// Writes `omero` rendering metadata.
    pub fn omero(mut self, omero: Omero) -> Self {
        self.omero = Some(omero);
        self
    }
    /// Resolution levels, level 0 included (default 1: no pyramid). Level `k` is stored
    /// at path `k` and is level `k - 1` reduced 2×2 in y and x, built while frames are
    /// pushed (see [`Downsample`] for the rounding and odd sizes). A frame dropped at
    /// level 0 (back-pressure or [`Writer::skip`](crate::Writer::skip)) is dropped at
    /// every level, so it reads as the fill value everywhere.
    pub fn levels(mut self, levels: Levels) -> Self {
        self.levels = levels;
        self
    }
    /// How each level is reduced from the one above (default [`Downsample::Mean`]).
    pub fn downsample(mut self, method: Downsample) -> Self {
        self.downsample = method;
        self
    }
    /// Also halve the z axis at each level (2×2×2 blocks of two consecutive z planes;
    /// default off: z planes are kept). Needs a z axis. An odd number of planes leaves
    /// the last plane of a stack without a partner: it is reduced alone (2×2), as odd
    /// rows and columns are. The writer holds one unpaired plane per level. A dropped
    /// plane is left out of its pair's blocks; a level plane both of whose planes were
    /// dropped is dropped too.
    pub fn downsample_z(mut self, yes: bool) -> Self {
        self.downsample_z = yes;
        self
    }
    /// Whether levels halve z too.
    pub fn halves_z(&self) -> bool {
        self.downsample_z
    }
    /// Index of the z axis when levels halve it ([`downsample_z`](Self::downsample_z)).
    pub(crate) fn z_axis(&self, spec: &ArraySpec) -> Result<Option<usize>, OmeError> {
        if !self.downsample_z {
            return Ok(None);
        }
        let axes = self.axes(spec)?;
        let rank = axes.len();
        match axes.get(rank - 3) {
            Some(a) if rank >= 4 && a.kind == AxisKind::Space => Ok(Some(rank - 3)),
            _ => Err(OmeError::NoAxis {
                field: "downsample_z",
                axis: "z",
            }),
        }
    }
    /// LZ4 acceleration for the `lz4` (blosc) chunks of levels 1…L (default
    /// [`LEVEL_LZ4_ACCELERATION`]; level 0 always compresses as c-blosc does at its
    /// `clevel`). The codec metadata is the same on every level, and readers decode
    /// these chunks like any other Blosc1 frame.
    ///
    /// Why not c-blosc's setting: averaging 2×2 blocks removes most of the camera noise
    /// that lets LZ4 skip through level 0 quickly; at c-blosc's clevel-1 acceleration
    /// (9) LZ4 ran 4.6× slower per byte on level 1 than on level 0, for 12 % better
    /// compression, so the levels took more encoding time than level 0 itself
    /// (`cargo bench --bench codecs`). Pass `9` to get c-blosc's frames.
    pub fn level_lz4_acceleration(mut self, accel: i32) -> Self {
        self.level_lz4_acceleration = Some(accel.max(1));
        self
    }
    pub(crate) fn level_acceleration(&self) -> i32 {
        self.level_lz4_acceleration
            .unwrap_or(LEVEL_LZ4_ACCELERATION)
    }
    /// The number of levels for an image whose level 0 is `spec`.
    pub fn level_count(&self, spec: &ArraySpec) -> Result<usize, OmeError> {
        crate::pyramid::level_count(spec, self.levels)
    }
    /// The downsampling method.
    pub fn downsample_method(&self) -> Downsample {
        self.downsample
    }

    /// The axes of an image stored as `spec`, with level-0 scales.
    ///
    /// Axis 0 is time and the last two are space (`y`, `x`). Rank 5 is `t, c, z, y, x`;
    /// for rank 4 axis 1 is the channel axis when it is named `c` (or, without dimension
    /// names, when channels are given), otherwise space (`z`). Names are the array's
    /// dimension names, or these defaults when it has none.
    pub fn axes(&self, spec: &ArraySpec) -> Result<Vec<Axis>, OmeError> {
        let rank = spec.rank();
        let names: Vec<String> = match spec.dimension_names() {
            Some(n) => n.to_vec(),
            None => {
                let d: &[&str] = match rank {
                    3 => &["t", "y", "x"],
                    4 if self.channels.is_some() => &["t", "c", "y", "x"],
                    4 => &["t", "z", "y", "x"],
                    5 => &["t", "c", "z", "y", "x"],
                    _ => return Err(OmeError::Rank(rank)),
                };
                d.iter().map(|s| s.to_string()).collect()
            }
        };
        let kinds: &[AxisKind] = {
            use AxisKind::*;
            match rank {
                3 => &[Time, Space, Space],
                4 if names[1] == "c" => &[Time, Channel, Space, Space],
                4 => &[Time, Space, Space, Space],
                5 => &[Time, Channel, Space, Space, Space],
                _ => return Err(OmeError::Rank(rank)),
            }
        };
        self.validate(spec, kinds)?;
        let space = self.space_unit.as_str();
        let axes = names
            .into_iter()
            .zip(kinds)
            .enumerate()
            .map(|(i, (name, &kind))| {
                let physical = match kind {
                    AxisKind::Time => self
                        .frame_interval
                        .map(|d| (self.time_unit.of(d), self.time_unit.as_str())),
                    AxisKind::Channel => None,
                    AxisKind::Space if i == rank - 2 => self.pixel_size.map(|p| (p.0, space)),
                    AxisKind::Space if i == rank - 1 => self.pixel_size.map(|p| (p.1, space)),
                    AxisKind::Space => self.z_step.map(|z| (z, space)),
                };
                Axis {
                    name,
                    kind,
                    unit: physical.map(|p| p.1),
                    scale: physical.map_or(1.0, |p| p.0),
                }
            })
            .collect();
        Ok(axes)
    }

    fn validate(&self, spec: &ArraySpec, kinds: &[AxisKind]) -> Result<(), OmeError> {
        let valid = |w: Window| {
            [w.min, w.max, w.start, w.end].iter().all(|v| v.is_finite())
                && w.min <= w.max
                && w.start <= w.end
        };
        let positive = |field: &'static str, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(OmeError::NotPositive { field, value })
            }
        };
        if let Some((y, x)) = self.pixel_size {
            positive("pixel_size (y)", y)?;
            positive("pixel_size (x)", x)?;
        }
        if let Some(z) = self.z_step {
            positive("z_step", z)?;
            if kinds.iter().filter(|k| **k == AxisKind::Space).count() < 3 {
                return Err(OmeError::NoAxis {
                    field: "z_step",
                    axis: "z",
                });
            }
        }
        if let Some(d) = self.frame_interval {
            positive("frame_interval", d.as_secs_f64())?;
        }
        let channel_axis = kinds.iter().position(|k| *k == AxisKind::Channel);
        let n_channels = channel_axis.map_or(1, |a| spec.shape()[a]);
        if let Some(names) = &self.channels {
            let Some(axis) = channel_axis else {
                return Err(OmeError::NoAxis {
                    field: "channels",
                    axis: "c",
                });
            };
            if names.len() as u64 != spec.shape()[axis] {
                return Err(OmeError::ChannelCount {
                    field: "channels",
                    got: names.len(),
                    axis_size: spec.shape()[axis],
                });
            }
        }
        if let Some(Omero::Channels(chs)) = &self.omero {
            if chs.len() as u64 != n_channels {
                return Err(OmeError::ChannelCount {
                    field: "omero",
                    got: chs.len(),
                    axis_size: n_channels,
                });
            }
            for (i, c) in chs.iter().enumerate() {
                if c.color.len() != 6 || !c.color.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Err(OmeError::Color {
                        channel: i,
                        color: c.color.clone(),
                    });
                }
                if c.window.is_some_and(|w| !valid(w)) {
                    return Err(OmeError::Window { channel: i });
                }
            }
        }
        if let Some(Omero::AutoWindow(w)) = &self.omero
            && !valid(*w)
        {
            return Err(OmeError::Window { channel: 0 });
        }
        Ok(())
    }

    /// The root group's `attributes` (`{"ome": {...}}`) for an image whose level 0 is
    /// stored as `spec`, listing every level ([`levels`](Self::levels)).
    pub fn attributes(&self, spec: &ArraySpec) -> Result<Value, OmeError> {
        self.z_axis(spec)?;
        let n = self.level_count(spec)?;
        let factors: Vec<u64> = (0..n).map(|k| 1u64 << k).collect();
        self.attributes_for_levels(spec, &factors)
    }

    /// The attributes for levels downsampled in y and x (and z with
    /// [`downsample_z`](Self::downsample_z)) by `factors` (`factors[0]` = 1 for level 0;
    /// level `l` is stored at path `l`). A level downsampled by `f` with
    /// block means (or min, max) has pixels `f` times larger whose centres sit
    /// `(f - 1) / 2` level-0 pixels further along: its `scale` is `f` times level 0's
    /// and its `translation` is that shift. Decimated levels keep the block's first
    /// pixel, so they have no translation.
    pub(crate) fn attributes_for_levels(
        &self,
        spec: &ArraySpec,
        factors: &[u64],
    ) -> Result<Value, OmeError> {
        let axes = self.axes(spec)?;
        let rank = axes.len();
        let z = self.z_axis(spec)?;
        let datasets: Vec<Value> = factors
            .iter()
            .enumerate()
            .map(|(level, &f)| {
                let f = f as f64;
                let yx = |i: usize| i + 2 >= rank || Some(i) == z;
                let scale: Vec<f64> = (axes.iter().enumerate())
                    .map(|(i, a)| if yx(i) { a.scale * f } else { a.scale })
                    .collect();
                let mut transforms = vec![json!({"type": "scale", "scale": scale})];
                if f > 1.0 && self.downsample.centred() {
                    let shift: Vec<f64> = (axes.iter().enumerate())
                        .map(|(i, a)| {
                            if yx(i) {
                                a.scale * (f - 1.0) / 2.0
                            } else {
                                0.0
                            }
                        })
                        .collect();
                    transforms.push(json!({"type": "translation", "translation": shift}));
                }
                json!({"path": level.to_string(), "coordinateTransformations": transforms})
            })
            .collect();
        let axes_json: Vec<Value> = axes
            .iter()
            .map(|a| {
                let mut v = json!({"name": a.name, "type": a.kind.as_str()});
                if let Some(u) = a.unit {
                    v["unit"] = json!(u);
                }
                v
            })
            .collect();
        let multiscale = json!({
            "name": self.name.as_deref().unwrap_or("image"),
            "type": self.downsample.as_str(),
            "metadata": {
                "method": format!("{} block {} over {}, level k from level k-1 (zarrstream)",
                    if z.is_some() { "2x2x2" } else { "2x2" },
                    self.downsample.as_str(),
                    if z.is_some() { "z, y and x" } else { "y and x" }),
                "version": env!("CARGO_PKG_VERSION"),
            },
            "axes": axes_json,
            "datasets": datasets,
        });
        let mut ome = json!({"version": OME_VERSION, "multiscales": [multiscale]});
        if self.omero.is_some() {
            ome["omero"] = self.omero_json(spec);
        }
        Ok(json!({ "ome": ome }))
    }

    /// The `omero` channels written for an image stored as `spec`: those given, or one
    /// per channel-axis entry for [`Omero::Auto`]/[`Omero::AutoWindow`]. A channel's
    /// `window` is `None` where it follows the frames recorded. `None` without `omero`.
    pub(crate) fn omero_channels(&self, spec: &ArraySpec) -> Option<Vec<OmeroChannel>> {
        let window = match self.omero.as_ref()? {
            Omero::Channels(chs) => return Some(chs.clone()),
            Omero::Auto => None,
            Omero::AutoWindow(w) => Some(*w),
        };
        let n = self
            .axes(spec)
            .ok()?
            .iter()
            .position(|a| a.kind == AxisKind::Channel)
            .map_or(1, |i| spec.shape()[i]) as usize;
        let channels = (0..n).map(|i| OmeroChannel {
            label: (self.channels.as_ref())
                .and_then(|c| c.get(i).cloned())
                .unwrap_or_else(|| i.to_string()),
            color: if n == 1 {
                "FFFFFF".into()
            } else {
                PALETTE[i % PALETTE.len()].into()
            },
            window,
            active: true,
        });
        Some(channels.collect())
    }

    /// The position of the channel axis among `spec`'s axes, if it has one.
    pub(crate) fn channel_axis(&self, spec: &ArraySpec) -> Result<Option<usize>, OmeError> {
        let axes = self.axes(spec)?;
        Ok(axes.iter().position(|a| a.kind == AxisKind::Channel))
    }

    fn omero_json(&self, spec: &ArraySpec) -> Value {
        let (min, max) = dtype_range(spec.dtype());
        // Until frames are sampled, a window that follows the data spans the type.
        let unknown = Window {
            min,
            max,
            start: min,
            end: max,
        };
        let channels: Vec<Value> = (self.omero_channels(spec).unwrap_or_default().iter())
            .map(|c| {
                json!({
                    "label": c.label,
                    "color": c.color,
                    "active": c.active,
                    "window": c.window.unwrap_or(unknown).json(),
                })
            })
            .collect();
        json!({"channels": channels, "rdefs": {"model": "color"}})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DataType;

    fn spec(shape: &[u64], names: Option<&[&str]>) -> ArraySpec {
        let rank = shape.len();
        let mut chunk = vec![1; rank];
        chunk[rank - 2] = 8;
        chunk[rank - 1] = 8;
        let mut b = ArraySpec::builder()
            .shape(shape)
            .chunk_shape(&chunk)
            .shard_shape(&chunk);
        if let Some(n) = names {
            b = b.dimension_names(n.iter().copied());
        }
        b.build().unwrap()
    }

    #[test]
    fn axes_follow_rank_and_names() {
        let kinds = |s: &ArraySpec, o: &Ome| -> Vec<(String, AxisKind)> {
            o.axes(s)
                .unwrap()
                .into_iter()
                .map(|a| (a.name, a.kind))
                .collect()
        };
        use AxisKind::*;
        let o = Ome::new();
        assert_eq!(
            kinds(&spec(&[0, 8, 8], None), &o),
            [("t".into(), Time), ("y".into(), Space), ("x".into(), Space)]
        );
        let k = kinds(&spec(&[0, 3, 8, 8], None), &o);
        assert_eq!(k[1], ("z".into(), Space));
        let k = kinds(&spec(&[0, 2, 8, 8], None), &o.clone().channels(["a", "b"]));
        assert_eq!(k[1], ("c".into(), Channel));
        let k = kinds(&spec(&[0, 2, 8, 8], Some(&["t", "c", "y", "x"])), &o);
        assert_eq!(k[1], ("c".into(), Channel));
        let k = kinds(&spec(&[0, 2, 3, 8, 8], None), &o);
        assert_eq!(
            k.iter().map(|a| a.1).collect::<Vec<_>>(),
            [Time, Channel, Space, Space, Space]
        );
    }

    #[test]
    fn scales_units_and_translations() {
        let o = Ome::new()
            .pixel_size(0.5, 0.25)
            .z_step(2.0)
            .frame_interval(Duration::from_millis(100));
        let a = o
            .attributes_for_levels(&spec(&[0, 2, 3, 8, 8], None), &[1, 2])
            .unwrap();
        let ms = &a["ome"]["multiscales"][0];
        assert_eq!(a["ome"]["version"], "0.5");
        assert_eq!(
            ms["axes"][0],
            json!({"name": "t", "type": "time", "unit": "millisecond"})
        );
        assert_eq!(ms["axes"][1], json!({"name": "c", "type": "channel"}));
        assert_eq!(ms["axes"][2]["unit"], "micrometer");
        let d = &ms["datasets"];
        assert_eq!(
            d[0],
            json!({"path": "0", "coordinateTransformations": [
                {"type": "scale", "scale": [100.0, 1.0, 2.0, 0.5, 0.25]}]})
        );
        assert_eq!(
            d[1]["coordinateTransformations"],
            json!([{"type": "scale", "scale": [100.0, 1.0, 2.0, 1.0, 0.5]},
                   {"type": "translation", "translation": [0.0, 0.0, 0.0, 0.25, 0.125]}])
        );
        // Without physical sizes: no units, scale 1.
        let a = Ome::new().attributes(&spec(&[0, 8, 8], None)).unwrap();
        let ms = &a["ome"]["multiscales"][0];
        assert_eq!(ms["axes"][1], json!({"name": "y", "type": "space"}));
        assert_eq!(
            ms["datasets"][0]["coordinateTransformations"][0]["scale"],
            json!([1.0, 1.0, 1.0])
        );
    }

    #[test]
    fn invalid_options_name_the_field() {
        let s5 = spec(&[0, 2, 3, 8, 8], None);
        let s3 = spec(&[0, 8, 8], None);
        let cases: Vec<(Ome, &ArraySpec, OmeError)> = vec![
            (
                Ome::new().pixel_size(0.0, 1.0),
                &s5,
                OmeError::NotPositive {
                    field: "pixel_size (y)",
                    value: 0.0,
                },
            ),
            (
                Ome::new().z_step(-1.0),
                &s5,
                OmeError::NotPositive {
                    field: "z_step",
                    value: -1.0,
                },
            ),
            (
                Ome::new().frame_interval(Duration::ZERO),
                &s5,
                OmeError::NotPositive {
                    field: "frame_interval",
                    value: 0.0,
                },
            ),
            (
                Ome::new().channels(["a"]),
                &s5,
                OmeError::ChannelCount {
                    field: "channels",
                    got: 1,
                    axis_size: 2,
                },
            ),
            (
                Ome::new().channels(["a"]),
                &s3,
                OmeError::NoAxis {
                    field: "channels",
                    axis: "c",
                },
            ),
            (
                Ome::new().z_step(1.0),
                &s3,
                OmeError::NoAxis {
                    field: "z_step",
                    axis: "z",
                },
            ),
            (
                Ome::new().omero(Omero::Channels(vec![OmeroChannel {
                    label: "a".into(),
                    color: "GG0000".into(),
                    window: Some(Window {
                        min: 0.0,
                        max: 1.0,
                        start: 0.0,
                        end: 1.0,
                    }),
                    active: true,
                }])),
                &s3,
                OmeError::Color {
                    channel: 0,
                    color: "GG0000".into(),
                },
            ),
            (
                Ome::new().omero(Omero::AutoWindow(Window::of_type(
                    DataType::UInt16,
                    9.0,
                    1.0,
                ))),
                &s3,
                OmeError::Window { channel: 0 },
            ),
            (
                Ome::new().omero(Omero::Channels(vec![OmeroChannel::new(
                    "a",
                    "00FF00",
                    Window::of_type(DataType::UInt16, f64::NAN, 1.0),
                )])),
                &s3,
                OmeError::Window { channel: 0 },
            ),
        ];
        for (o, s, want) in cases {
            assert_eq!(o.attributes(s).unwrap_err(), want);
        }
        let s6 = ArraySpec::builder()
            .shape([0, 1, 1, 1, 8, 8])
            .chunk_shape([1, 1, 1, 1, 8, 8])
            .shard_shape([1, 1, 1, 1, 8, 8])
            .build()
            .unwrap();
        assert_eq!(Ome::new().attributes(&s6).unwrap_err(), OmeError::Rank(6));
    }

    #[test]
    fn auto_omero_labels_and_colours() {
        let o = Ome::new().channels(["GFP", "RFP"]).omero(Omero::Auto);
        let a = o.attributes(&spec(&[0, 2, 8, 8], None)).unwrap();
        let ch = &a["ome"]["omero"]["channels"];
        assert_eq!(ch[0]["label"], "GFP");
        assert_eq!(ch[1]["color"], "FF00FF");
        assert_eq!(ch[0]["window"]["max"], 65535.0);
        // Before any frame, a window that follows the data spans the type's range.
        assert_eq!(ch[1]["window"]["start"], 0.0);
        assert_eq!(ch[1]["window"]["end"], 65535.0);
        let given = Window::of_type(DataType::UInt16, 90.0, 2500.0);
        let o = Ome::new()
            .channels(["GFP", "RFP"])
            .omero(Omero::AutoWindow(given));
        let a = o.attributes(&spec(&[0, 2, 8, 8], None)).unwrap();
        let w = &a["ome"]["omero"]["channels"][1]["window"];
        assert_eq!(
            (w["start"].as_f64(), w["end"].as_f64()),
            (Some(90.0), Some(2500.0))
        );
        assert_eq!(a["ome"]["omero"]["channels"][1]["color"], "FF00FF");
    }
}
