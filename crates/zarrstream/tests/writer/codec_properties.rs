//! Property tests of the chunk encoders against the reference C libraries: for random
//! inputs, element sizes, levels, shuffles and crc32c settings, every blosc frame (lz4 or
//! zstd inside) that `ChunkEncoder::encode_slice` writes decodes with c-blosc (`blosc-src`,
//! what zarrs links) and with our own reader to the input, and every zstd frame with
//! libzstd. Deterministic cross-checks of the
//! frame layout live in `codec_reference.rs`.

use std::ffi::c_void;

use blosc_src::{blosc_cbuffer_validate, blosc_decompress_ctx, blosc_getitem};
use proptest::prelude::*;
use zarrstream::{BloscShuffle, Checksum, ChunkEncoder, Codec};

/// Input bytes of a few shapes that take different encoder paths: noise (raw streams,
/// memcpyed frames), runs and ramps (compressed streams), and a mix within one input.
fn arb_data() -> impl Strategy<Value = Vec<u8>> {
    let len = prop_oneof![
        4 => 0usize..300,
        4 => 0usize..5000,
        2 => 30_000usize..140_000,
        1 => 200_000usize..330_000,
    ];
    prop_oneof![
        // Small arbitrary inputs that shrink byte by byte.
        2 => proptest::collection::vec(any::<u8>(), 0..600),
        5 => (len, 0u8..5, any::<u64>()).prop_map(|(n, kind, seed)| generate(n, kind, seed)),
    ]
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn generate(n: usize, kind: u8, seed: u64) -> Vec<u8> {
    let noise = |i: usize| splitmix(seed ^ (i as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
    (0..n)
        .map(|i| match kind {
            0 => noise(i) as u8,
            1 => (seed >> (8 * (i / 97 % 8))) as u8,
            2 => ((i as u64 / 2 + seed) as u8) ^ (noise(i) as u8 & 3),
            3 => (i % (1 + seed as usize % 13)) as u8,
            // Alternating compressible and incompressible stretches.
            _ => {
                if (i / 4096) % 2 == 0 {
                    noise(i) as u8
                } else {
                    (i / 64) as u8
                }
            }
        })
        .collect()
}

/// Element sizes: the common ones often, anything in 1..=255 sometimes.
fn arb_typesize() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => prop_oneof![Just(1usize), Just(2), Just(4), Just(8)],
        1 => 1usize..=255,
    ]
}

/// Encodes into a slot of exactly `slot_bound` bytes pre-filled with garbage, and into a
/// much larger one (lz4 streams then go straight into the slot): same bytes both times.
fn encode(enc: &mut ChunkEncoder, data: &[u8]) -> Result<Vec<u8>, TestCaseError> {
    let bound = enc.slot_bound(data.len());
    let mut out = vec![0xA5u8; bound];
    let n = enc
        .encode_slice(data, &mut out)
        .map_err(|e| TestCaseError::fail(format!("encode: {e}")))?;
    prop_assert!(n <= bound, "{} bytes used > slot_bound {}", n, bound);
    out.truncate(n);
    let mut big = vec![0x5Au8; 2 * bound + 4096];
    let m = enc
        .encode_slice(data, &mut big)
        .map_err(|e| TestCaseError::fail(format!("encode (big slot): {e}")))?;
    prop_assert!(big[..m] == out[..], "output depends on the slot size");
    Ok(out)
}

/// Checks and strips the little-endian crc32c suffix.
fn strip_crc(mut framed: Vec<u8>, crc: bool) -> Result<Vec<u8>, TestCaseError> {
    if crc {
        prop_assert!(framed.len() >= 4);
        let at = framed.len() - 4;
        let stored = u32::from_le_bytes(framed[at..].try_into().unwrap());
        prop_assert_eq!(stored, crc32c::crc32c(&framed[..at]), "crc32c suffix");
        framed.truncate(at);
    }
    Ok(framed)
}

fn le_i32(f: &[u8], at: usize) -> i64 {
    i64::from(i32::from_le_bytes(f[at..at + 4].try_into().unwrap()))
}

/// c-blosc's validation and full decode, with a sentinel past `nbytes`.
fn cblosc_decode(f: &[u8]) -> Result<Vec<u8>, TestCaseError> {
    let mut nbytes = usize::MAX;
    // SAFETY: `f` is a live slice of `f.len()` bytes and `nbytes` a valid out-pointer;
    // validate reads at most `f.len()` bytes.
    let rc =
        unsafe { blosc_cbuffer_validate(f.as_ptr().cast::<c_void>(), f.len(), &raw mut nbytes) };
    prop_assert_eq!(rc, 0, "blosc_cbuffer_validate rejected the frame");
    let mut dest = vec![0xC3u8; nbytes + 64];
    // SAFETY: the frame was validated (cbytes <= f.len()); `dest` has `nbytes + 64`
    // writable bytes and destsize = nbytes; the ctx variant uses no global state.
    let n = unsafe {
        blosc_decompress_ctx(
            f.as_ptr().cast::<c_void>(),
            dest.as_mut_ptr().cast::<c_void>(),
            nbytes,
            1,
        )
    };
    prop_assert_eq!(n as i64, nbytes as i64, "blosc_decompress_ctx result");
    prop_assert!(
        dest[nbytes..].iter().all(|&b| b == 0xC3),
        "wrote past destsize"
    );
    dest.truncate(nbytes);
    Ok(dest)
}

/// c-blosc's `blosc_getitem` of `nitems` elements from `start`.
fn cblosc_getitem(
    f: &[u8],
    start: usize,
    nitems: usize,
    ts: usize,
) -> Result<Vec<u8>, TestCaseError> {
    let len = nitems * ts;
    let mut dest = vec![0xC3u8; len + 64];
    // SAFETY: the frame was validated by `cblosc_decode` first; start + nitems is within
    // nbytes / typesize; `dest` holds more than the `nitems * typesize` bytes written.
    let n = unsafe {
        blosc_getitem(
            f.as_ptr().cast::<c_void>(),
            i32::try_from(start).unwrap(),
            i32::try_from(nitems).unwrap(),
            dest.as_mut_ptr().cast::<c_void>(),
        )
    };
    prop_assert_eq!(n as i64, len as i64, "blosc_getitem({}, {})", start, nitems);
    prop_assert!(dest[len..].iter().all(|&b| b == 0xC3), "getitem overran");
    dest.truncate(len);
    Ok(dest)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(160))]

    /// Every blosc frame decodes with c-blosc and with `read::blosc` to the input; the
    /// header says what the frame is (version 2, the compressor, the shuffle, the element
    /// size, nbytes, cbytes = its length, never more than nbytes + 16), and partial
    /// decoding agrees with the full one.
    #[test]
    fn blosc_frames_decode_with_c_blosc(
        data in arb_data(),
        ts in arb_typesize(),
        clevel in 0u8..=9,
        zstd in any::<bool>(),
        shuffle in prop_oneof![
            Just(None),
            Just(Some(BloscShuffle::NoShuffle)),
            Just(Some(BloscShuffle::Shuffle)),
            Just(Some(BloscShuffle::BitShuffle)),
        ],
        crc in any::<bool>(),
        pick in any::<u64>(),
    ) {
        let mut codec = if zstd { Codec::blosc_zstd(clevel) } else { Codec::blosc_lz4(clevel) };
        if let Some(s) = shuffle {
            codec = codec.with_shuffle(s);
        }
        let mut enc = ChunkEncoder::new(codec, ts, Checksum::crc32c_if(crc)).unwrap();
        let f = strip_crc(encode(&mut enc, &data)?, crc)?;
        prop_assert!(f.len() >= 16);
        prop_assert_eq!((f[0], f[1]), (2, 1), "version bytes");
        prop_assert_eq!(f[2] >> 5, if zstd { 4 } else { 1 }, "compressor bits");
        let shuffle_bits = match shuffle {
            Some(BloscShuffle::NoShuffle) => 0,
            Some(BloscShuffle::BitShuffle) => 0x04,
            _ => 0x01,
        };
        prop_assert_eq!(f[2] & 0x05, shuffle_bits, "shuffle bits");
        prop_assert_eq!(f[2] & 0x08, 0, "reserved flag bit");
        prop_assert_eq!(usize::from(f[3]), ts, "typesize byte");
        prop_assert_eq!(le_i32(&f, 4), data.len() as i64, "nbytes");
        prop_assert_eq!(le_i32(&f, 12), f.len() as i64, "cbytes");
        prop_assert!(f.len() <= data.len() + 16, "cbytes {} > nbytes + 16", f.len());
        let bs = le_i32(&f, 8);
        prop_assert!(bs >= 1 && bs as usize <= data.len().max(1), "blocksize {}", bs);
        if f[2] & 0x02 != 0 {
            prop_assert_eq!(&f[16..], &data[..], "memcpyed payload");
        }
        let d = cblosc_decode(&f)?;
        prop_assert!(d == data, "c-blosc decodes to different bytes");
        let ours = zarrstream::read::blosc::decompress(&f, data.len())
            .map_err(|e| TestCaseError::fail(format!("read::blosc: {e}")))?;
        prop_assert!(ours == data, "read::blosc decodes to different bytes");
        let items = data.len() / ts;
        if items > 0 {
            let start = (pick % items as u64) as usize;
            let nitems = 1 + ((pick >> 32) % (items - start) as u64) as usize;
            let got = cblosc_getitem(&f, start, nitems, ts)?;
            prop_assert!(got[..] == data[start * ts..(start + nitems) * ts], "getitem differs");
        }
    }

    /// Every zstd frame decodes with libzstd to the input.
    #[test]
    fn zstd_frames_decode_with_libzstd(
        data in arb_data(),
        level in -5i32..=9,
        checksum in any::<bool>(),
        crc in any::<bool>(),
    ) {
        let mut enc = ChunkEncoder::new(Codec::Zstd { level, checksum }, 2, Checksum::crc32c_if(crc)).unwrap();
        let f = strip_crc(encode(&mut enc, &data)?, crc)?;
        prop_assert!(f.len() <= enc.slot_bound(data.len()));
        let size = zstd::zstd_safe::get_frame_content_size(&f)
            .map_err(|e| TestCaseError::fail(format!("content size: {e:?}")))?;
        prop_assert_eq!(size, Some(data.len() as u64));
        let d = zstd::bulk::decompress(&f, data.len())
            .map_err(|e| TestCaseError::fail(format!("libzstd: {e}")))?;
        prop_assert!(d == data, "libzstd decodes to different bytes");
    }

    /// The `none` codec is the input (plus the crc32c).
    #[test]
    fn none_frames_are_the_input(data in arb_data(), crc in any::<bool>()) {
        let mut enc = ChunkEncoder::new(Codec::None, 1, Checksum::crc32c_if(crc)).unwrap();
        let f = strip_crc(encode(&mut enc, &data)?, crc)?;
        prop_assert!(f == data);
    }
}
