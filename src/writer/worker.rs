//! Worker threads: encode one inner chunk per job straight into its shard slot.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use hdrhistogram::Histogram;

use super::shared::{FinisherMsg, Job, Shared};
use crate::codec::ChunkEncoder;

pub(crate) struct WorkerReport {
    pub frame_latency_ns: Histogram<u64>,
}

pub(crate) fn run(
    shared: Arc<Shared>,
    jobs: Receiver<Job>,
    finisher: Sender<FinisherMsg>,
    core: Option<core_affinity::CoreId>,
    nice: u8,
) -> WorkerReport {
    if let Some(core) = core {
        core_affinity::set_for_current(core);
    }
    super::priority::lower_priority(nice);
    let mut latency = crate::stats::histogram();
    let spec = &shared.spec;
    let mut encoder = match ChunkEncoder::new(spec.codec, spec.dtype.size(), spec.crc32c) {
        Ok(e) => Some(match spec.lz4_acceleration {
            Some(a) => e.lz4_acceleration(a),
            None => e,
        }),
        Err(e) => {
            shared.fail(e);
            None
        }
    };
    let mut scratch = Vec::new();
    for job in jobs {
        let mut level1 = (job.batch.reduction.as_ref())
            .filter(|_| !shared.failed())
            .map(|r| r.tile(&shared, &job.batch.buf, job.tile));
        if let (Some(enc), false) = (encoder.as_mut(), shared.failed()) {
            let src = job.batch.source(&shared.grid, job.tile);
            let sink = &job.shard.sink;
            // An uncompressed staged chunk is written from the staging buffer itself, one
            // copy less than gathering it into the scratch (strided frame tiles are still
            // gathered: writing their rows directly, under the file's lock, was slower).
            let direct = enc.raw_contiguous(&src).and_then(|(data, crc)| {
                sink.write_encoded(job.slot, data, crc.as_ref().map_or(&[][..], |c| &c[..]))
            });
            let written = match direct {
                Some(r) => r,
                None => sink.write_chunk(job.slot, &mut scratch, &mut |out| {
                    // Pyramid level 1 is reduced from the rows the encoder just read.
                    enc.encode_observed(&src, out, &mut |read| {
                        if let Some(l) = level1.as_mut() {
                            l.read_to(read.end);
                        }
                    })
                }),
            };
            match written {
                Ok((offset, n)) => job.shard.entries.set(job.slot, offset, n),
                Err(e) => shared.fail(e),
            }
        }
        if let Some(mut l) = level1 {
            l.finish();
        }
        if job.batch.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(r) = &job.batch.reduction {
                r.finished();
            }
            if !shared.failed() {
                let n = job.batch.times.len() as u64;
                shared.frames_encoded.fetch_add(n, Ordering::Release);
            }
            let now = Instant::now();
            for t in &job.batch.times {
                let ns = now.saturating_duration_since(*t).as_nanos();
                let _ = latency.record(u64::try_from(ns).unwrap_or(u64::MAX));
            }
        }
        let Job { batch, shard, .. } = job;
        drop(batch);
        shard.release(&finisher);
    }
    WorkerReport {
        frame_latency_ns: latency,
    }
}
