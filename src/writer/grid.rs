//! Arithmetic that maps frames to inner chunks, staging groups and shards.
//!
//! Axes are split into the *leading* axes (all but the last two; axis 0 is the append
//! axis) and the frame plane `(y, x)`. A frame is a point of the leading axes; an inner
//! chunk covers a box of leading points (a *group* of frames, one frame for shallow
//! chunks) times a `(cy, cx)` tile of the plane.

use crate::dtype::FillPattern;
use crate::spec::ArraySpec;
use crate::tile::ChunkSource;

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
    pub es: usize,
    pub chunk_bytes: usize,
    /// Frames in one full inner chunk (product of the leading chunk sizes).
    pub group_frames: usize,
    pub fill: FillPattern,
}

impl Grid {
    pub(crate) fn new(spec: &ArraySpec) -> Self {
        let r = spec.rank();
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
        Grid {
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
        }
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

    /// Box size of a whole append-axis step of shards (for publication).
    pub(crate) fn row_box(&self) -> Vec<u64> {
        let mut b = self.extent.clone();
        b[0] = self.shard_lead[0];
        b
    }

    /// Index of frame `c` inside its inner chunk's group (C order over the chunk box).
    pub(crate) fn local_index(&self, c: &[u64]) -> usize {
        c.iter()
            .zip(&self.chunk_lead)
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
        let mut key = String::from("c");
        for v in sc.iter().copied().chain([
            (s / self.shard_tiles_x) as u64,
            (s % self.shard_tiles_x) as u64,
        ]) {
            key.push('/');
            key.push_str(&v.to_string());
        }
        key
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
mod tests {
    use super::*;

    fn grid(shape: &[u64], chunk: &[u64], shard: &[u64]) -> Grid {
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
    fn local_index_within_group() {
        let g = grid(&[0, 3, 8, 8], &[4, 2, 8, 8], &[4, 2, 8, 8]);
        assert_eq!(g.group_frames, 8);
        assert_eq!(g.local_index(&[5, 1]), 3);
        assert_eq!(g.local_index(&[6, 2]), 4);
    }
}
