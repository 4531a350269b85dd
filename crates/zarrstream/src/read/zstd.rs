//! Bounded decoding of one zstd frame (the `zstd` codec of Zarr v3).

use zstd::zstd_safe;

use super::ReadError;

const CODEC: &str = "zstd";
const MAGIC: [u8; 4] = 0xFD2F_B528u32.to_le_bytes();

/// Decodes `frame`, which must be exactly one zstd frame that declares its content size
/// (our writer always sets it), of at most `max_nbytes` decoded bytes. The size is read
/// from the frame header and checked against the limit before anything is allocated;
/// the decoder then never writes past it. A frame carrying zstd's content checksum is
/// verified by the decode.
pub fn decompress(frame: &[u8], max_nbytes: usize) -> Result<Vec<u8>, ReadError> {
    if frame.len() < 4 {
        return Err(ReadError::Truncated {
            codec: CODEC,
            what: "shorter than the magic number",
        });
    }
    if frame[..4] != MAGIC {
        return Err(ReadError::InvalidHeader {
            codec: CODEC,
            what: "not a zstd frame (magic number)",
        });
    }
    let nbytes = match zstd_safe::get_frame_content_size(frame) {
        Ok(Some(n)) => n,
        Ok(None) => {
            return Err(ReadError::Unsupported {
                codec: CODEC,
                what: "frame without a content size",
            });
        }
        Err(_) => {
            return Err(ReadError::InvalidHeader {
                codec: CODEC,
                what: "unreadable frame header",
            });
        }
    };
    let limit = max_nbytes as u64;
    let size = usize::try_from(nbytes)
        .ok()
        .filter(|&n| n <= max_nbytes)
        .ok_or(ReadError::TooLarge {
            codec: CODEC,
            nbytes,
            limit,
        })?;
    match zstd_safe::find_frame_compressed_size(frame) {
        Ok(n) if n == frame.len() => {}
        Ok(_) => {
            return Err(ReadError::Corrupt {
                codec: CODEC,
                what: "bytes after the end of the frame".into(),
            });
        }
        Err(code) => {
            return Err(ReadError::Corrupt {
                codec: CODEC,
                what: zstd_safe::get_error_name(code).to_string(),
            });
        }
    }
    let mut out = Vec::with_capacity(size);
    match zstd_safe::decompress(&mut out, frame) {
        Ok(n) if n == size => Ok(out),
        Ok(n) => Err(ReadError::Corrupt {
            codec: CODEC,
            what: format!("decoded {n} bytes, the header declares {size}"),
        }),
        Err(code) => Err(ReadError::Corrupt {
            codec: CODEC,
            what: zstd_safe::get_error_name(code).to_string(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{ChunkEncoder, Codec};

    fn encode(data: &[u8], checksum: bool) -> Vec<u8> {
        let codec = Codec::Zstd { level: 1, checksum };
        let mut enc = ChunkEncoder::new(codec, 2, crate::Checksum::None).unwrap();
        let mut out = vec![0u8; enc.slot_bound(data.len())];
        let n = enc.encode_slice(data, &mut out).unwrap();
        out.truncate(n);
        out
    }

    fn data() -> Vec<u8> {
        (0..300_000u32).map(|i| ((i / 5) ^ (i % 7)) as u8).collect()
    }

    #[test]
    fn round_trip_and_limit() {
        let d = data();
        let f = encode(&d, false);
        assert_eq!(decompress(&f, d.len()).unwrap(), d);
        assert_eq!(
            decompress(&f, d.len() - 1),
            Err(ReadError::TooLarge {
                codec: "zstd",
                nbytes: d.len() as u64,
                limit: d.len() as u64 - 1
            })
        );
    }

    #[test]
    fn truncated_trailing_and_damaged_frames_fail() {
        let d = data();
        let f = encode(&d, true);
        for n in [0, 3, 4, 10, f.len() / 2, f.len() - 1] {
            assert!(decompress(&f[..n], d.len()).is_err(), "length {n}");
        }
        let mut long = f.clone();
        long.push(0);
        assert!(matches!(
            decompress(&long, d.len()),
            Err(ReadError::Corrupt { .. })
        ));
        // With zstd's checksum every damaged byte in the body is caught.
        let mut bad = f.clone();
        let i = f.len() / 2;
        bad[i] ^= 0x10;
        assert!(decompress(&bad, d.len()).is_err());
        let mut wrong_magic = f.clone();
        wrong_magic[0] = 0;
        assert!(matches!(
            decompress(&wrong_magic, d.len()),
            Err(ReadError::InvalidHeader { .. })
        ));
    }

    #[test]
    fn frame_without_content_size_is_refused() {
        let d = vec![1u8; 1000];
        let mut c = zstd_safe::CCtx::create();
        c.set_parameter(zstd_safe::CParameter::ContentSizeFlag(false))
            .unwrap();
        let mut out = Vec::with_capacity(2000);
        // Streaming compression leaves the size out.
        let mut o = zstd_safe::OutBuffer::around(&mut out);
        let mut i = zstd_safe::InBuffer::around(&d);
        c.compress_stream2(
            &mut o,
            &mut i,
            zstd_safe::zstd_sys::ZSTD_EndDirective::ZSTD_e_end,
        )
        .unwrap();
        assert!(matches!(
            decompress(&out, 1000),
            Err(ReadError::Unsupported { .. })
        ));
    }
}
