//! Sequential O_DIRECT bandwidth through `onitb::blockio`, per back end and
//! queue depth: writes a file of SIZE_MIB in 4 MiB blocks (then fdatasync),
//! reads it back, checks each block's first word, and prints MB/s
//! (10^6 bytes per second) as tab-separated rows.
//!
//! usage: cargo run --release --example disk_bandwidth -- DIR SIZE_MIB
//! (used by scripts/bench-disk.sh)

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result, bail, ensure};
use onitb::blockio::{BlockIo, BufferPool, FileId, IoChoice};

const BLOCK_BYTES: usize = 4 << 20;
const QUEUE_DEPTH_MAX: u32 = 8;

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(size_mib)) = (args.next(), args.next()) else {
        bail!("usage: disk_bandwidth DIR SIZE_MIB");
    };
    let size_mib: u64 = size_mib.parse().context("SIZE_MIB")?;
    let block_count = size_mib * (1 << 20) / BLOCK_BYTES as u64;
    ensure!(block_count > 0, "SIZE_MIB must be at least 4");
    let path = PathBuf::from(dir).join("onitb-disk-bandwidth.tmp");
    println!("backend\tqueue_depth\twrite_MBps\tread_MBps");
    for (choice, depth) in [(IoChoice::Uring, 1), (IoChoice::Uring, QUEUE_DEPTH_MAX), (IoChoice::Pread, 1)] {
        let result = measure(choice, depth, &path, block_count);
        let _ = std::fs::remove_file(&path);
        let (write_mbps, read_mbps) = result?;
        println!("{choice}\t{depth}\t{write_mbps:.0}\t{read_mbps:.0}");
    }
    Ok(())
}

/// Write then read bandwidth in MB/s.
fn measure(choice: IoChoice, depth: u32, path: &Path, block_count: u64) -> Result<(f64, f64)> {
    let mut pool = BufferPool::new(depth as usize, BLOCK_BYTES)?;
    let mut io = BlockIo::new(choice, &pool, depth)?;
    let file = io.open(path, true)?;
    ensure!(io.direct(file), "{} does not accept O_DIRECT", path.display());
    let bytes = block_count * BLOCK_BYTES as u64;
    io.set_len(file, bytes)?;

    let start = Instant::now();
    stream(&mut io, &mut pool, file, block_count, true)?;
    io.sync(file)?;
    let write_seconds = start.elapsed().as_secs_f64();

    let start = Instant::now();
    stream(&mut io, &mut pool, file, block_count, false)?;
    let read_seconds = start.elapsed().as_secs_f64();

    let stats = io.stats();
    ensure!(stats.bytes_written == bytes && stats.bytes_read == bytes);
    let megabytes = bytes as f64 / 1e6;
    Ok((megabytes / write_seconds, megabytes / read_seconds))
}

/// Writes (or reads and checks) blocks 0..block_count in order, keeping up
/// to the pool's count of requests in flight.
fn stream(io: &mut BlockIo, pool: &mut BufferPool, file: FileId, block_count: u64, write: bool) -> Result<()> {
    for block in 0..block_count {
        let mut buf = match pool.take() {
            Some(buf) => buf,
            None => finish_one(io, write)?,
        };
        let offset = block * BLOCK_BYTES as u64;
        if write {
            buf.as_u64s_mut()[0] = block;
            io.submit_write(file, offset, BLOCK_BYTES, buf, block)?;
        } else {
            io.submit_read(file, offset, BLOCK_BYTES, buf, block)?;
        }
    }
    while io.in_flight() > 0 {
        pool.give(finish_one(io, write)?);
    }
    Ok(())
}

fn finish_one(io: &mut BlockIo, write: bool) -> Result<onitb::blockio::Buffer> {
    let completion = io.wait()?;
    if !write {
        ensure!(completion.buf.as_u64s()[0] == completion.tag, "block {} read back wrong", completion.tag);
    }
    Ok(completion.buf)
}
