//! The pwrite sink: workers encode into a per-thread buffer and write it at the slot.

use std::os::unix::fs::FileExt;
use std::sync::Mutex;

use super::{SlotSink, TempShard};
use crate::error::{Error, Result};
use crate::shard::{FinalLayout, encode_index, entry_bytes};

pub(crate) struct PwriteSink {
    temp: TempShard,
    /// Serialises the workers' writes to this file (see `write_chunk`).
    writing: Mutex<()>,
}

impl PwriteSink {
    pub(crate) fn new(temp: TempShard) -> Self {
        PwriteSink {
            temp,
            writing: Mutex::new(()),
        }
    }

    fn write_at(&self, buf: &[u8], at: u64) -> Result<()> {
        self.temp
            .file
            .write_all_at(buf, at)
            .map_err(|e| Error::io("write", &self.temp.path, e, buf.len() as u64))
    }
}

impl SlotSink for PwriteSink {
    fn write_chunk(
        &self,
        i: usize,
        scratch: &mut Vec<u8>,
        encode: &mut dyn FnMut(&mut [u8]) -> Result<usize>,
    ) -> Result<u64> {
        let l = self.temp.layout;
        scratch.resize(l.slot_size as usize, 0);
        let n = encode(scratch)?;
        let offset = l.slot_offset(i as u64);
        // Buffered writes to one file take its inode lock exclusively, and a writer
        // that finds it taken *spins* in the kernel while the owner copies. Two workers
        // writing one shard spent more time spinning than encoding; waiting here
        // sleeps instead, and with one writer at a time the kernel never spins.
        let _one_writer = self.writing.lock().unwrap_or_else(|e| e.into_inner());
        self.write_at(&scratch[..n], offset)?;
        self.write_at(
            &entry_bytes(offset, n as u64),
            l.index_offset + 16 * i as u64,
        )?;
        Ok(n as u64)
    }

    fn keep_for_recovery(&self) {
        self.temp.keep();
    }

    fn finalize(self: Box<Self>, fin: &FinalLayout) -> Result<TempShard> {
        let mut buf = Vec::new();
        for m in &fin.moves {
            buf.resize(m.len as usize, 0);
            self.temp
                .file
                .read_exact_at(&mut buf, m.from)
                .map_err(|e| Error::io("read", &self.temp.path, e, 0))?;
            self.write_at(&buf, m.to)?;
        }
        buf.resize(self.temp.layout.index_size as usize, 0);
        encode_index(&fin.entries, &mut buf);
        self.write_at(&buf, fin.index_at)?;
        self.temp.punch(&fin.holes)?;
        self.temp.set_len(fin.len)?;
        Ok(self.temp)
    }
}
