//! Arithmetic that maps frames to inner chunks, staging groups and shards.
//!
//! Axes are split into the *leading* axes (all but the last two; axis 0 is the append
//! axis) and the frame plane `(y, x)`. A frame is a point of the leading axes; an inner
//! chunk covers a box of leading points (a *group* of frames, one frame for shallow
//! chunks) times a `(cy, cx)` tile of the plane.

use crate::dtype::FillPattern;
use crate::error::{Error, OrderError, Result};
use crate::spec::ArraySpec;
use crate::tile::ChunkSource;
use crate::writer::api::order::{self, AcquisitionOrder};

#[derive(Debug, Clone)]
pub(crate) struct Grid {
    /// Extent of each leading axis; axis 0 is `u64::MAX` when unbounded.
    pub extent: Vec<u64>,
    pub chunk_lead: Vec<u64>,
    pub shard_lead: Vec<u64>,
    pub y: usize,
    pub x: usize,
    pub cy: usize,
    pub cx: usize,
    /// Inner chunks per shard along y and x.
    pub cpy: usize,
    pub cpx: usize,
    pub tiles_x: usize,
    pub tiles: usize,
    pub shard_tiles_x: usize,
    pub shard_tiles: usize,
    /// Inner-chunk tiles of a frame that fall in each shard tile of a set.
    pub tiles_per_shard: Vec<usize>,
    /// Box of a whole append-axis row of shards (`shard_lead[0]` steps, every other
    /// leading coordinate), for publication.
    pub row_box: Vec<u64>,
    pub es: usize,
    pub chunk_bytes: usize,
    /// Frames in one full inner chunk (product of the leading chunk sizes).
    pub group_frames: usize,
    pub fill: FillPattern,
    /// Leading axes the store does not have (1 for a single frame, see
    /// [`ArraySpec::hidden`]).
    pub hidden: usize,
    /// The loop order frames arrive in (storage order when appending).
    pub order: Vec<usize>,
    /// Shard sets and staging groups that can be open at once in that order.
    pub open_sets: usize,
    pub open_groups: usize,
}

impl Grid {
    /// The grid of `spec`, with frames arriving in `order` (storage order if `None`).
    pub(crate) fn with_order(spec: &ArraySpec, order: Option<&AcquisitionOrder>) -> Result<Self> {
        let mut grid = Grid::new(spec);
        // A single frame's hidden axis is the writer's: its only order is the empty one.
        if grid.hidden > 0
            && let Some(order) = order
        {
            if !order.axes().is_empty() {
                return Err(Error::Order(OrderError::Rank {
                    got: order.axes().len(),
                    lead: 0,
                }));
            }
            return Ok(grid);
        }
        if let Some(order) = order {
            order::validate(order, &grid.extent)?;
            let open = |size: &[u64]| order::max_open_boxes(&grid.extent, size, order.axes());
            // `validate` put an unbounded axis 0 outermost, where its boxes close in turn.
            let (Some(sets), Some(groups)) = (open(&grid.shard_lead), open(&grid.chunk_lead))
            else {
                return Err(Error::Order(OrderError::UnboundedInside));
            };
            grid.order = order.axes().to_vec();
            grid.open_sets = sets;
            grid.open_groups = groups;
        }
        Ok(grid)
    }

    /// The grid of `spec`, with frames arriving in storage order.
    pub(crate) fn new(spec: &ArraySpec) -> Self {
        let r = spec.shape.len();
        let lead = r - 2;
        let mut extent = spec.shape[..lead].to_vec();
        if extent[0] == 0 {
            extent[0] = u64::MAX;
        }
        // The spec builder proved every product here fits in usize.
        let (y, x) = (spec.shape[r - 2] as usize, spec.shape[r - 1] as usize);
        let (cy, cx) = (spec.chunk[r - 2] as usize, spec.chunk[r - 1] as usize);
        let (sy, sx) = (spec.shard[r - 2] as usize, spec.shard[r - 1] as usize);
        let tiles_x = x.div_ceil(cx);
        let shard_tiles_x = x.div_ceil(sx);
        let mut row_box = extent.clone();
        row_box[0] = spec.shard[0];
        let mut grid = Grid {
            chunk_lead: spec.chunk[..lead].to_vec(),
            shard_lead: spec.shard[..lead].to_vec(),
            extent,
            y,
            x,
            cy,
            cx,
            cpy: sy / cy,
            cpx: sx / cx,
            tiles_x,
            tiles: y.div_ceil(cy) * tiles_x,
            shard_tiles_x,
            shard_tiles: y.div_ceil(sy) * shard_tiles_x,
            es: spec.dtype.size(),
            chunk_bytes: spec.chunk_bytes,
            group_frames: spec.chunk[..lead].iter().product::<u64>() as usize,
            fill: spec.fill,
            tiles_per_shard: Vec::new(),
            row_box,
            hidden: spec.hidden(),
            order: (0..lead).collect(),
            open_sets: 1,
            open_groups: 1,
        };
        let storage = |size: &[u64]| {
            order::max_open_boxes(&grid.extent, size, &grid.order).unwrap_or(usize::MAX)
        };
        grid.open_sets = storage(&grid.shard_lead);
        grid.open_groups = storage(&grid.chunk_lead);
        let mut per = vec![0; grid.shard_tiles];
        for t in 0..grid.tiles {
            per[grid.shard_of_tile(t)] += 1;
        }
        grid.tiles_per_shard = per;
        grid
    }

    /// Whether inner chunks span several frames and must be staged.
    pub(crate) fn deep(&self) -> bool {
        self.group_frames > 1
    }

    /// Leading coordinates of frame `k` (C order, axis 0 unbounded).
    pub(crate) fn coords(&self, mut k: u64) -> Vec<u64> {
        let mut c = vec![0; self.extent.len()];
        for i in (1..c.len()).rev() {
            c[i] = k % self.extent[i];
            k /= self.extent[i];
        }
        c[0] = k;
        c
    }

    /// Whether `c` is the last frame (in C order) of the box of size `size` containing it,
    /// clipped to the array: then every frame of that box has arrived.
    pub(crate) fn last_in_box(&self, c: &[u64], size: &[u64]) -> bool {
        c.iter().zip(size).zip(&self.extent).all(|((&ci, &s), &e)| {
            let end = (ci / s).saturating_add(1).saturating_mul(s).min(e);
            ci + 1 == end
        })
    }

    /// Box coordinates of `c` for boxes of `size`.
    pub(crate) fn box_of(c: &[u64], size: &[u64]) -> Vec<u64> {
        c.iter().zip(size).map(|(a, b)| a / b).collect()
    }

    /// Index of frame `c` inside its inner chunk's group (C order over the chunk box).
    pub(crate) fn local_index(&self, c: &[u64]) -> usize {
        Grid::index_in_box(c, &self.chunk_lead)
    }

    /// Index of frame `c` inside the box of `size` holding it (C order over the box).
    pub(crate) fn index_in_box(c: &[u64], size: &[u64]) -> usize {
        c.iter()
            .zip(size)
            .fold(0, |acc, (&ci, &s)| acc * s as usize + (ci % s) as usize)
    }

    /// Which shard of a shard set (one per `(y, x)` shard tile) holds tile `t`.
    pub(crate) fn shard_of_tile(&self, t: usize) -> usize {
        let (ty, tx) = (t / self.tiles_x, t % self.tiles_x);
        (ty / self.cpy) * self.shard_tiles_x + tx / self.cpx
    }

    /// Slot (C-order inner chunk index within the shard) of tile `t` of chunk group `g`.
    pub(crate) fn slot(&self, g: &[u64], t: usize) -> usize {
        let lead = g.iter().zip(&self.shard_lead).zip(&self.chunk_lead).fold(
            0usize,
            |acc, ((&gi, &s), &c)| {
                let per = s / c;
                acc * per as usize + (gi % per) as usize
            },
        );
        let (ty, tx) = (t / self.tiles_x, t % self.tiles_x);
        (lead * self.cpy + ty % self.cpy) * self.cpx + tx % self.cpx
    }

    /// The key of shard tile `s` in the shard set at shard coordinates `sc`.
    pub(crate) fn shard_key(&self, sc: &[u64], s: usize) -> String {
        crate::store::shard_key(sc.iter().copied().skip(self.hidden).chain([
            (s / self.shard_tiles_x) as u64,
            (s % self.shard_tiles_x) as u64,
        ]))
    }

    /// Tile `t` of a frame plane, padded with fill past the array's edge.
    pub(crate) fn tile_source<'a>(&self, frame: &'a [u8], t: usize) -> ChunkSource<'a> {
        let (ty, tx) = (t / self.tiles_x, t % self.tiles_x);
        let (y0, x0) = (ty * self.cy, tx * self.cx);
        let vy = self.cy.min(self.y - y0);
        let vx = self.cx.min(self.x - x0);
        let start = (y0 * self.x + x0) * self.es;
        ChunkSource::strided(
            &frame[start..],
            self.x * self.es,
            self.cy,
            self.cx * self.es,
            vy,
            vx * self.es,
            self.fill,
        )
    }

    /// Bytes of one frame's plane inside a staged chunk.
    pub(crate) fn plane_bytes(&self) -> usize {
        self.cy * self.cx * self.es
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn grid(shape: &[u64], chunk: &[u64], shard: &[u64]) -> Grid {
        let spec = ArraySpec::builder()
            .shape(shape)
            .chunk_shape(chunk)
            .shard_shape(shard)
            .build()
            .unwrap();
        Grid::new(&spec)
    }

    #[test]
    fn coords_unravel_in_c_order() {
        let g = grid(&[0, 2, 3, 8, 8], &[1, 1, 1, 8, 8], &[1, 1, 1, 8, 8]);
        assert_eq!(g.coords(0), vec![0, 0, 0]);
        assert_eq!(g.coords(4), vec![0, 1, 1]);
        assert_eq!(g.coords(13), vec![2, 0, 1]);
    }

    #[test]
    fn last_in_box_clips_to_the_array() {
        let g = grid(&[0, 5, 8, 8], &[2, 2, 4, 4], &[4, 4, 8, 8]);
        assert!(g.last_in_box(&[1, 1], &[2, 2]));
        assert!(!g.last_in_box(&[1, 0], &[2, 2]));
        // Axis 1 has 5 entries: the box [4, 6) is clipped to [4, 5).
        assert!(g.last_in_box(&[1, 4], &[2, 2]));
        assert!(!g.last_in_box(&[0, 4], &[2, 2]));
    }

    #[test]
    fn slots_follow_c_order_inside_the_shard() {
        // shard (4, 8, 8) of chunks (2, 4, 4): cps = (2, 2, 2).
        let g = grid(&[0, 16, 8], &[2, 4, 4], &[4, 8, 8]);
        assert_eq!(g.tiles, 8);
        assert_eq!(g.slot(&[0], 0), 0);
        assert_eq!(g.slot(&[0], 1), 1);
        assert_eq!(g.slot(&[1], 2), 4 + 2);
        assert_eq!(g.slot(&[2], 0), 0, "group 2 starts the next shard");
        // tile 5 = (ty 2, tx 1) lies in the second shard row.
        assert_eq!(g.shard_of_tile(5), 1);
        assert_eq!(g.slot(&[1], 5), 4 + 1);
        assert_eq!(g.shard_key(&[3], 1), "c/3/1/0");
    }

    #[test]
    fn open_boxes_count_the_axes_inside_the_outermost_deep_loop() {
        let g = grid(&[0, 5, 3, 8, 8], &[1, 1, 1, 8, 8], &[4, 2, 1, 8, 8]);
        assert_eq!((g.open_sets, g.open_groups), (3 * 3, 1));
        let g = grid(&[0, 5, 3, 8, 8], &[1, 1, 1, 8, 8], &[1, 2, 1, 8, 8]);
        assert_eq!(g.open_sets, 3);
        let g = grid(&[0, 5, 3, 8, 8], &[1, 1, 2, 8, 8], &[1, 1, 2, 8, 8]);
        assert_eq!((g.open_sets, g.open_groups), (1, 1));
        // Bounded t, acquired z-first: sets 4 deep on t stay open for every c inside z.
        let spec = ArraySpec::builder()
            .shape([8, 5, 3, 8, 8])
            .chunk_shape([1, 1, 1, 8, 8])
            .shard_shape([4, 1, 1, 8, 8])
            .build()
            .unwrap();
        let order = AcquisitionOrder::new([2, 0, 1]);
        let g = Grid::with_order(&spec, Some(&order)).unwrap();
        assert_eq!(
            (g.open_sets, g.open_groups, g.order.clone()),
            (5, 1, vec![2, 0, 1])
        );
    }

    #[test]
    fn local_index_within_group() {
        let g = grid(&[0, 3, 8, 8], &[4, 2, 8, 8], &[4, 2, 8, 8]);
        assert_eq!(g.group_frames, 8);
        assert_eq!(g.local_index(&[5, 1]), 3);
        assert_eq!(g.local_index(&[6, 2]), 4);
    }
}

#[cfg(test)]
mod proptests {
    //! Tiling against an independent model of Zarr's chunk grid: every byte of every
    //! pushed frame lands exactly once, at its C-order position in the inner chunk, in the
    //! slot and shard Zarr's sharding puts that chunk; everything else a tile covers is
    //! the fill value.

    use std::collections::HashMap;

    use proptest::prelude::*;

    use super::*;
    use crate::dtype::DataType;
    use crate::tile::Segment;

    #[derive(Debug, Clone)]
    struct Case {
        spec: ArraySpec,
        frames: u64,
    }

    fn arb_case() -> impl Strategy<Value = Case> {
        (3usize..=5)
            .prop_flat_map(|rank| {
                let lead = rank - 2;
                (
                    // (extent, chunk, chunks per shard) per leading axis; extent 0 on
                    // axis 0 means unbounded
                    proptest::collection::vec((0u64..=4, 1u64..=3, 1u64..=2), lead),
                    // (extent, chunk, chunks per shard) for y and x
                    proptest::collection::vec((1u64..=13, 1u64..=6, 1u64..=3), 2),
                    proptest::sample::select(DataType::ALL.to_vec()),
                    any::<u16>(),
                    1u64..=6,
                    any::<u64>(),
                )
            })
            .prop_map(|(lead, plane, dtype, fill, steps, pick)| {
                let axes: Vec<(u64, u64, u64)> = lead
                    .iter()
                    .enumerate()
                    .map(|(i, &(e, c, p))| (if i == 0 { e } else { e.max(1) }, c, p))
                    .chain(plane)
                    .collect();
                let fill = match dtype {
                    DataType::UInt8 => f64::from(fill % 256),
                    DataType::Int8 => f64::from(fill as u8 as i8),
                    DataType::Int16 => f64::from(fill as i16),
                    _ => f64::from(fill),
                };
                let spec = ArraySpec::builder()
                    .shape(axes.iter().map(|a| a.0).collect::<Vec<_>>())
                    .chunk_shape(axes.iter().map(|a| a.1).collect::<Vec<_>>())
                    .shard_shape(axes.iter().map(|a| a.1 * a.2).collect::<Vec<_>>())
                    .dtype(dtype)
                    .fill_value(fill)
                    .build()
                    .expect("generated spec is valid");
                let per_step = spec.frames_per_step();
                let steps = if spec.shape[0] == 0 {
                    steps
                } else {
                    spec.shape[0]
                };
                // Some prefix of the frames, usually all of them.
                let all = steps * per_step;
                let frames = if pick % 3 == 0 {
                    1 + pick / 3 % all
                } else {
                    all
                };
                Case { spec, frames }
            })
    }

    /// C-order unravel of `k` over `extent` (axis 0 unbounded).
    fn unravel(mut k: u64, extent: &[u64]) -> Vec<u64> {
        let mut c = vec![0; extent.len()];
        for i in (1..extent.len()).rev() {
            c[i] = k % extent[i];
            k /= extent[i];
        }
        c[0] = k;
        c
    }

    /// C-order index of `c` in a box of `size`.
    fn ravel(c: &[u64], size: &[u64]) -> u64 {
        c.iter().zip(size).fold(0, |a, (&x, &s)| a * s + x)
    }

    /// Where Zarr puts byte `b` of element (frame coords `c`, `y`, `x`): shard key, slot
    /// (C order of the inner chunk within the shard), byte offset in the inner chunk.
    fn zarr_place(spec: &ArraySpec, c: &[u64], y: u64, x: u64, b: usize) -> (String, u64, usize) {
        let es = spec.dtype.size();
        let coord: Vec<u64> = c.iter().copied().chain([y, x]).collect();
        let shard: Vec<u64> = coord.iter().zip(&spec.shard).map(|(a, s)| a / s).collect();
        let per: Vec<u64> = spec
            .shard
            .iter()
            .zip(&spec.chunk)
            .map(|(s, c)| s / c)
            .collect();
        let in_shard: Vec<u64> = coord
            .iter()
            .zip(&spec.chunk)
            .zip(&per)
            .map(|((a, c), p)| a / c % p)
            .collect();
        let in_chunk: Vec<u64> = coord.iter().zip(&spec.chunk).map(|(a, c)| a % c).collect();
        let key = shard
            .iter()
            .fold(String::from("c"), |k, s| format!("{k}/{s}"));
        let pos = ravel(&in_chunk, &spec.chunk) as usize * es + b;
        (key, ravel(&in_shard, &per), pos)
    }

    /// The last frame (C order) of the box of `size` containing `c`, clipped to `extent`.
    fn box_corner(c: &[u64], size: &[u64], extent: &[u64]) -> Vec<u64> {
        c.iter()
            .zip(size)
            .zip(extent)
            .map(|((&a, &s), &e)| ((a / s + 1).saturating_mul(s)).min(e) - 1)
            .collect()
    }

    struct Chunk {
        group: Vec<u64>,
        /// 0 = not written, 1 = frame data, 2 = fill.
        state: Vec<u8>,
        bytes: Vec<u8>,
    }

    fn check(case: &Case) -> Result<(), TestCaseError> {
        let spec = &case.spec;
        let g = Grid::new(spec);
        let es = spec.dtype.size();
        let (yy, xx) = (g.y as u64, g.x as u64);
        let row = g.x * es;
        let plane = g.plane_bytes();
        prop_assert_eq!(plane * g.group_frames, spec.chunk_bytes);
        prop_assert_eq!(g.chunk_bytes, spec.chunk_bytes);
        let fill: Vec<u8> = (0..es).map(|j| spec.fill.byte(j)).collect();
        let mut chunks: HashMap<(String, usize), Chunk> = HashMap::new();
        for k in 0..case.frames {
            // Frame bytes: anything; where they land is traced through the borrowed
            // slices, and the copied bytes are compared too.
            let frame: Vec<u8> = (0..spec.frame_bytes)
                .map(|i| (k as usize * 131 + i * 7 + 3) as u8)
                .collect();
            let c = g.coords(k);
            prop_assert_eq!(&c, &unravel(k, &g.extent), "coords of frame {}", k);
            for size in [&g.chunk_lead, &g.shard_lead, &g.row_box] {
                let last = box_corner(&c, size, &g.extent) == c;
                prop_assert_eq!(g.last_in_box(&c, size), last, "frame {} box {:?}", k, size);
            }
            let gc = Grid::box_of(&c, &g.chunk_lead);
            let sc = Grid::box_of(&c, &g.shard_lead);
            let local = g.local_index(&c);
            let in_group: Vec<u64> = c.iter().zip(&g.chunk_lead).map(|(a, s)| a % s).collect();
            prop_assert_eq!(local as u64, ravel(&in_group, &g.chunk_lead));
            let mut seen = vec![0u8; frame.len()];
            for t in 0..g.tiles {
                let key = g.shard_key(&sc, g.shard_of_tile(t));
                let slot = g.slot(&gc, t);
                let src = g.tile_source(&frame, t);
                prop_assert_eq!(src.len(), plane);
                let mut copied = vec![0u8; plane];
                src.copy_range(0, plane, &mut copied);
                let chunk = chunks.entry((key.clone(), slot)).or_insert_with(|| Chunk {
                    group: gc.clone(),
                    state: vec![0; spec.chunk_bytes],
                    bytes: vec![0; spec.chunk_bytes],
                });
                prop_assert_eq!(&chunk.group, &gc, "{} slot {} holds two groups", key, slot);
                let base = frame.as_ptr() as usize;
                let mut p = 0;
                let mut marks: Vec<(usize, u8, u8)> = Vec::new();
                let mut bad: Option<String> = None;
                src.segments(0, plane, |seg| match seg {
                    Segment::Data(d) => {
                        let off = d.as_ptr() as usize - base;
                        for (i, &v) in d.iter().enumerate() {
                            let fb = off + i;
                            let (y, x, b) = ((fb / row) as u64, (fb % row / es) as u64, fb % es);
                            let want = zarr_place(spec, &c, y, x, b);
                            let got = (key.clone(), slot as u64, local * plane + p + i);
                            if want != got && bad.is_none() {
                                bad = Some(format!(
                                    "frame {k} byte {fb}: at {got:?}, Zarr says {want:?}"
                                ));
                            }
                            seen[fb] += 1;
                            marks.push((local * plane + p + i, 1, v));
                        }
                        p += d.len();
                    }
                    Segment::Fill(n) => {
                        for i in p..p + n {
                            // Fill only past the array's edge in y or x.
                            let (ty, tx) = (t / g.tiles_x, t % g.tiles_x);
                            let (py, px) = (i / es / g.cx, i / es % g.cx);
                            let (y, x) = (ty * g.cy + py, tx * g.cx + px);
                            if y < g.y && x < g.x && bad.is_none() {
                                bad = Some(format!(
                                    "frame {k} tile {t}: fill at ({y}, {x}) inside the frame"
                                ));
                            }
                            marks.push((local * plane + i, 2, fill[i % es]));
                        }
                        p += n;
                    }
                });
                if let Some(msg) = bad {
                    return Err(TestCaseError::fail(msg));
                }
                prop_assert_eq!(p, plane);
                for (pos, state, v) in marks {
                    prop_assert_eq!(
                        chunk.state[pos],
                        0,
                        "{} slot {} byte {} written twice",
                        key,
                        slot,
                        pos
                    );
                    chunk.state[pos] = state;
                    chunk.bytes[pos] = v;
                    prop_assert_eq!(
                        copied[pos - local * plane],
                        v,
                        "copied byte {} of tile {}",
                        pos,
                        t
                    );
                }
            }
            if let Some(i) = seen.iter().position(|&n| n != 1) {
                return Err(TestCaseError::fail(format!(
                    "frame {k} byte {i} landed {} times",
                    seen[i]
                )));
            }
            // Spot-check one element's copied bytes through the model directly.
            let (y, x) = (k % yy, (k * 7) % xx);
            let (key, slot, pos) = zarr_place(spec, &c, y, x, 0);
            let chunk = &chunks[&(key, slot as usize)];
            let at = ((y * xx + x) as usize) * es;
            prop_assert_eq!(&chunk.bytes[pos..pos + es], &frame[at..at + es]);
        }
        // A chunk's frame planes are written exactly for the frames that were pushed:
        // the rest (past the array's leading extents or the end of the stream) are left
        // for the writer to fill when it dispatches the group.
        for ((key, slot), chunk) in &chunks {
            for l in 0..g.group_frames {
                // (l < group_frames, so axis 0 of the unravel stays inside the box.)
                let inner = unravel(l as u64, &g.chunk_lead);
                let fc: Vec<u64> = chunk
                    .group
                    .iter()
                    .zip(&g.chunk_lead)
                    .zip(&inner)
                    .map(|((gi, s), i)| gi * s + i)
                    .collect();
                let inside = fc.iter().zip(&g.extent).all(|(a, e)| a < e)
                    && ravel(&fc, &g.extent) < case.frames;
                let part = &chunk.state[l * plane..(l + 1) * plane];
                if inside {
                    prop_assert!(
                        part.iter().all(|&s| s != 0),
                        "{} slot {} frame {} incomplete",
                        key,
                        slot,
                        l
                    );
                } else {
                    prop_assert!(
                        part.iter().all(|&s| s == 0),
                        "{} slot {} frame {} written",
                        key,
                        slot,
                        l
                    );
                }
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn every_pushed_byte_lands_once_where_zarr_expects_it(case in arb_case()) {
            check(&case)?;
        }
    }
}
