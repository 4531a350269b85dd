//! zstd: one frame per chunk, content size in the header (numcodecs < 0.16.2 refuses
//! frames without it).

use zstd::zstd_safe::{self, CCtx, CParameter};

use crate::error::Error;
use crate::tile::ChunkSource;

pub(crate) fn bound(raw: usize) -> usize {
    zstd_safe::compress_bound(raw)
}

pub(crate) struct ZstdEncoder {
    ctx: CCtx<'static>,
}

fn err(code: usize) -> Error {
    Error::Codec {
        codec: "zstd",
        message: zstd_safe::get_error_name(code).to_string(),
    }
}

impl ZstdEncoder {
    pub(crate) fn new(level: i32, checksum: bool) -> Result<Self, Error> {
        let mut ctx = CCtx::try_create().ok_or_else(|| err(usize::MAX))?;
        ctx.set_parameter(CParameter::CompressionLevel(level))
            .map_err(err)?;
        ctx.set_parameter(CParameter::ChecksumFlag(checksum))
            .map_err(err)?;
        ctx.set_parameter(CParameter::ContentSizeFlag(true))
            .map_err(err)?;
        Ok(ZstdEncoder { ctx })
    }

    /// Bytes of the compression context (zstd's `ZSTD_sizeof_CCtx`).
    pub(crate) fn held_bytes(&self) -> usize {
        self.ctx.sizeof()
    }

    /// The bytes zstd's context for `level` holds once it has compressed a chunk of
    /// `chunk` bytes: zstd sizes its workspace from the level and the input's size
    /// alone (not its content), so one compression of zeros tells, in zstd's own count.
    /// (zstd's `ZSTD_estimateCCtxSize` is not offered by the safe bindings.)
    pub(crate) fn context_bytes(level: i32, chunk: usize) -> Result<usize, Error> {
        let mut enc = ZstdEncoder::new(level, false)?;
        // Zeroed allocations: the pages zstd only reads stay shared zero pages.
        let input = vec![0u8; chunk];
        let mut out = vec![0u8; bound(chunk)];
        enc.ctx.compress2(&mut out[..], &input).map_err(err)?;
        Ok(enc.held_bytes())
    }

    /// A context for the zstd blocks of a Blosc frame: `level`, and otherwise zstd's
    /// defaults (content size in the header, no checksum), which is what c-blosc's
    /// `ZSTD_compress` call writes.
    pub(crate) fn for_blosc(level: i32) -> Result<Self, Error> {
        let mut ctx = CCtx::try_create().ok_or_else(|| err(usize::MAX))?;
        ctx.set_parameter(CParameter::CompressionLevel(level))
            .map_err(err)?;
        Ok(ZstdEncoder { ctx })
    }

    /// One frame of `src` into `dst`; `None` when it does not fit (or zstd fails).
    pub(crate) fn compress_block(&mut self, src: &[u8], dst: &mut [u8]) -> Option<usize> {
        self.ctx.compress2(dst, src).ok()
    }

    /// zstd compresses from one contiguous input; a strided tile is gathered into
    /// `scratch` first (zstd's streaming mode would copy it into its window anyway).
    pub(crate) fn encode(
        &mut self,
        src: &ChunkSource<'_>,
        scratch: &mut Vec<u8>,
        out: &mut [u8],
    ) -> Result<usize, Error> {
        let input = match src.as_contiguous() {
            Some(all) => all,
            None => {
                super::grow_exact(scratch, src.len());
                src.copy_range(0, src.len(), scratch);
                &scratch[..]
            }
        };
        let bound = bound(input.len());
        self.ctx.compress2(&mut out[..bound], input).map_err(err)
    }
}
