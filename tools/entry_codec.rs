//! How well, and how fast, zstd packs the entries of a decision log
//! (`<material>.decisions` in a streamed run's work directory), stored as
//! they are and with their layouts as differences (what `solver::entries`
//! does since checkpoint version 8), at levels 1 and -3. Reads the log's
//! chunks and frames up to LIMIT_MIB packed bytes, unpacks them, and packs
//! them again each way, one frame at a time on one thread.
//! Usage: cargo run --release --example entry_codec -- WORK/3v4.decisions [LIMIT_MIB]
use std::process::exit;
use std::time::Instant;

/// Bytes of a chunk header and of a frame header (`solver::decision_log`,
/// `solver::entries`), and of an entry.
const CHUNK_HEADER_BYTES: usize = 16;
const FRAME_HEADER_BYTES: usize = 8;
const ENTRY_BYTES: usize = 8;

fn fail(what: &str) -> ! {
    eprintln!("entry_codec: {what}");
    exit(2)
}

fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// Each entry's layout from the differences the log stores.
fn to_layouts(entries: &mut [u8]) {
    let mut last = 0u32;
    for e in entries.chunks_exact_mut(ENTRY_BYTES) {
        last = last.wrapping_add(word(e, 0));
        e[..4].copy_from_slice(&last.to_le_bytes());
    }
}

fn to_differences(entries: &[u8]) -> Vec<u8> {
    let mut out = entries.to_vec();
    let mut last = 0u32;
    for e in out.chunks_exact_mut(ENTRY_BYTES) {
        let layout = word(e, 0);
        e[..4].copy_from_slice(&layout.wrapping_sub(last).to_le_bytes());
        last = layout;
    }
    out
}

fn main() {
    let path = std::env::args().nth(1).unwrap_or_else(|| fail("usage: entry_codec DECISIONS_FILE [LIMIT_MIB]"));
    let limit_mib: usize =
        std::env::args().nth(2).map_or(300, |s| s.parse().unwrap_or_else(|_| fail("LIMIT_MIB: a number")));
    let data = std::fs::read(&path).unwrap_or_else(|e| fail(&format!("cannot read '{path}': {e}")));
    let mut unpacker = zstd::bulk::Decompressor::new().expect("a zstd context");
    let (mut frames, mut packed_now, mut at) = (Vec::new(), 0, 0);
    while at + CHUNK_HEADER_BYTES <= data.len() && packed_now < limit_mib << 20 {
        let end = at + CHUNK_HEADER_BYTES + word(&data, at + 12) as usize;
        let mut frame = at + CHUNK_HEADER_BYTES;
        while frame < end.min(data.len()) {
            let (entries, compressed) = (word(&data, frame) as usize, word(&data, frame + 4) as usize);
            let payload = data.get(frame + FRAME_HEADER_BYTES..frame + FRAME_HEADER_BYTES + compressed);
            let mut raw = payload
                .and_then(|p| unpacker.decompress(p, entries * ENTRY_BYTES).ok())
                .filter(|raw| raw.len() == entries * ENTRY_BYTES)
                .unwrap_or_else(|| fail(&format!("'{path}' is not a decision log of checkpoint version 8")));
            to_layouts(&mut raw);
            frames.push(raw);
            (packed_now, frame) = (packed_now + compressed, frame + FRAME_HEADER_BYTES + compressed);
        }
        at = end;
    }
    let raw_bytes: usize = frames.iter().map(Vec::len).sum();
    println!(
        "{} frames, {:.1} MB of entries, {:.1} MB packed in the log",
        frames.len(),
        raw_bytes as f64 / 1e6,
        packed_now as f64 / 1e6
    );
    let differences: Vec<Vec<u8>> = frames.iter().map(|f| to_differences(f)).collect();
    for (name, inputs, level) in [
        ("layouts, level 1", &frames, 1),
        ("layouts, level -3", &frames, -3),
        ("differences, level 1", &differences, 1),
        ("differences, level -3", &differences, -3),
    ] {
        let mut packer = zstd::bulk::Compressor::new(level).expect("a zstd context");
        packer.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).expect("checksums");
        let started = Instant::now();
        let packed: Vec<Vec<u8>> = inputs.iter().map(|f| packer.compress(f).expect("packs")).collect();
        let pack_s = started.elapsed().as_secs_f64();
        let started = Instant::now();
        for (p, f) in packed.iter().zip(inputs) {
            assert_eq!(&unpacker.decompress(p, f.len()).expect("unpacks"), f);
        }
        let unpack_s = started.elapsed().as_secs_f64();
        let packed_bytes: usize = packed.iter().map(Vec::len).sum();
        println!(
            "{name:>22}: {:.2} times, packing {:.0} MB/s, unpacking {:.0} MB/s",
            raw_bytes as f64 / packed_bytes as f64,
            raw_bytes as f64 / pack_s / 1e6,
            raw_bytes as f64 / unpack_s / 1e6
        );
    }
}
