//! How well, and how fast, zstd packs the entries of a decision log
//! (`<material>.decisions`) or a capture schedule (`<material>.captures`)
//! in a streamed run's work directory, stored four ways: layouts as they
//! are, layouts as differences (logs before checkpoint version 13,
//! schedules before version 9), differences with the entries' bytes in
//! byte planes (schedules from version 9 to 13), and compact (logs since
//! version 13, schedules since 14: `solver::entries`). Reads the file's
//! frames (as version 16 writes them) up to LIMIT_MIB packed bytes,
//! unpacks them, and packs them again each way at zstd level LEVEL, one
//! frame at a time on one thread; the times include each way's own
//! transform and its undoing. A last line gives the compact entries with
//! no zstd at all: their size, and the transform's own time.
//! Usage: cargo run --release --example entry_codec -- WORK/4v4.captures [LIMIT_MIB] [EVERY] [LEVEL] [PARAMS]
//! (LIMIT_MIB: packed bytes read, default 300; EVERY: pack one frame in
//! so many again, default 1; LEVEL: zstd level, default 1, the files' own;
//! negative levels are zstd's fast ones; PARAMS: zstd parameters set over
//! the level's, as the zstd tool's `--zstd=` takes them, of `hlog` (hash
//! table size, log 2) and `tlen` (target length, the fast strategies'
//! acceleration), e.g. `hlog=12,tlen=2`.)
use onitb::solver;
use std::process::exit;
use std::time::Instant;

/// Bytes of a chunk header (`solver::decision_log`; a capture schedule's
/// frames have none) and of a frame header (`solver::entries`), and of an
/// entry.
const CHUNK_HEADER_BYTES: usize = 16;
const FRAME_HEADER_BYTES: usize = 12;
const ENTRY_BYTES: usize = 8;
/// Most bytes a compact entry takes (`solver::entries`).
const COMPACT_ENTRY_BYTES: usize = 9;

fn fail(what: &str) -> ! {
    eprintln!("entry_codec: {what}");
    exit(2)
}

fn word(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

/// A frame's entries (layout, states as 8 bytes each), stored `way`, into
/// `out`.
fn store(way: Way, entries: &[u8], out: &mut Vec<u8>) {
    if way == Way::Compact {
        return solver::entries_to_stored(entries, out);
    }
    out.clear();
    let n = entries.len() / ENTRY_BYTES;
    if way == Way::BytePlanes {
        out.resize(entries.len(), 0);
    }
    let mut last = 0u32;
    for (i, e) in entries.chunks_exact(ENTRY_BYTES).enumerate() {
        let (layout, states) = (word(e, 0), word(e, 4));
        let first = if way == Way::Layouts { layout } else { layout.wrapping_sub(last) };
        last = layout;
        let stored = u64::from(first) | u64::from(states) << 32;
        match way {
            Way::BytePlanes => {
                for (b, byte) in stored.to_le_bytes().into_iter().enumerate() {
                    out[b * n + i] = byte;
                }
            }
            Way::Layouts | Way::Differences => out.extend_from_slice(&stored.to_le_bytes()),
            Way::Compact => unreachable!("stored by the solver's codec above"),
        }
    }
}

/// Undoes [`store`]: `stored` back into entries, `out` (as long as they);
/// `None` if `stored` does not hold them all.
fn restore(way: Way, stored: &[u8], out: &mut [u8]) -> Option<()> {
    let n = out.len() / ENTRY_BYTES;
    if way == Way::Compact {
        // As the solver reads frames: from a buffer with its slack, each
        // entry straight where it goes.
        let mut padded = Vec::with_capacity(stored.len() + solver::STORED_SLACK_BYTES);
        padded.extend_from_slice(stored);
        padded.resize(stored.len() + solver::STORED_SLACK_BYTES, 0);
        let mut entries = out.chunks_exact_mut(ENTRY_BYTES);
        solver::visit_stored(&padded, stored.len(), n, |layout, states| {
            let e = entries.next().expect("as many entries as asked for");
            e[..4].copy_from_slice(&(layout as u32).to_le_bytes());
            e[4..].copy_from_slice(&states.to_le_bytes());
        })?;
        return Some(());
    }
    if stored.len() != out.len() {
        return None;
    }
    let mut last = 0u32;
    for (i, e) in out.chunks_exact_mut(ENTRY_BYTES).enumerate() {
        let value = match way {
            Way::BytePlanes => u64::from_le_bytes(std::array::from_fn(|b| stored[b * n + i])),
            _ => u64::from_le_bytes(stored[i * ENTRY_BYTES..][..ENTRY_BYTES].try_into().expect("8 bytes")),
        };
        last = if way == Way::Layouts { value as u32 } else { last.wrapping_add(value as u32) };
        e[..4].copy_from_slice(&last.to_le_bytes());
        e[4..].copy_from_slice(&((value >> 32) as u32).to_le_bytes());
    }
    Some(())
}

#[derive(Clone, Copy, PartialEq)]
enum Way {
    Layouts,
    Differences,
    BytePlanes,
    Compact,
}

/// Per way: packed bytes, seconds packing, seconds unpacking.
type Totals = [(usize, f64, f64); 4];

/// Compact entries without zstd: stored bytes, seconds storing, seconds
/// restoring (the floor any zstd level adds its time to).
type CompactOnly = (usize, f64, f64);

const WAYS: [(&str, Way); 4] = [
    ("layouts", Way::Layouts),
    ("differences", Way::Differences),
    ("byte planes", Way::BytePlanes),
    ("compact", Way::Compact),
];

/// Packs and unpacks one frame's entries each way, adding to `totals`.
fn measure(
    entries: &[u8],
    packer: &mut zstd::bulk::Compressor,
    unpacker: &mut zstd::bulk::Decompressor,
    totals: &mut Totals,
    compact_only: &mut CompactOnly,
) {
    let mut compact = Vec::new();
    let started = Instant::now();
    store(Way::Compact, entries, &mut compact);
    let storing = started.elapsed().as_secs_f64();
    let (mut back, started) = (vec![0u8; entries.len()], Instant::now());
    restore(Way::Compact, &compact, &mut back).expect("compact entries restore");
    let restoring = started.elapsed().as_secs_f64();
    assert_eq!(back, entries, "compact entries round-trip");
    *compact_only = (compact_only.0 + compact.len(), compact_only.1 + storing, compact_only.2 + restoring);
    let bound = entries.len() / ENTRY_BYTES * COMPACT_ENTRY_BYTES;
    let (mut stored, mut packed, mut back) = (Vec::new(), vec![0u8; 1 << 18], vec![0u8; entries.len()]);
    for (total, (name, way)) in totals.iter_mut().zip(WAYS) {
        let started = Instant::now();
        store(way, entries, &mut stored);
        let len = packer.compress_to_buffer(&stored[..], &mut packed[..]).expect("packs");
        let packing = started.elapsed().as_secs_f64();
        let started = Instant::now();
        stored.clear();
        stored.reserve(bound);
        let unpacked = unpacker.decompress_to_buffer(&packed[..len], &mut stored).expect("unpacks");
        restore(way, &stored[..unpacked], &mut back).expect("a frame packed here unpacks");
        let unpacking = started.elapsed().as_secs_f64();
        assert_eq!(back, entries, "{name} round-trips");
        *total = (total.0 + len, total.1 + packing, total.2 + unpacking);
    }
}

fn main() {
    let usage = "usage: entry_codec DECISIONS_OR_CAPTURES_FILE [LIMIT_MIB] [EVERY] [LEVEL]";
    let path = std::env::args().nth(1).unwrap_or_else(|| fail(usage));
    let arg = |n: usize, default: usize, what: &str| -> usize {
        std::env::args().nth(n).map_or(default, |s| s.parse().unwrap_or_else(|_| fail(&format!("{what}: a number"))))
    };
    // Packed bytes read at most, and every how many frames one is packed
    // again (so that a whole 5 GB schedule takes a minute).
    let limit_mib = arg(2, 300, "LIMIT_MIB");
    let every = arg(3, 1, "EVERY").max(1);
    let level: i32 = std::env::args().nth(4).map_or(1, |s| s.parse().unwrap_or_else(|_| fail("LEVEL: a number")));
    let schedule = path.ends_with(".captures");
    let file = std::fs::File::open(&path).unwrap_or_else(|e| fail(&format!("cannot open '{path}': {e}")));
    let data = std::io::Read::take(file, (limit_mib as u64) << 20);
    let mut reader = std::io::BufReader::with_capacity(1 << 20, data);
    let mut read = |bytes: &mut [u8]| std::io::Read::read_exact(&mut reader, bytes).is_ok();
    let mut unpacker = zstd::bulk::Decompressor::new().expect("a zstd context");
    let mut packer = zstd::bulk::Compressor::new(level).unwrap_or_else(|_| fail("LEVEL: not a zstd level"));
    packer.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(true)).expect("checksums");
    let params = std::env::args().nth(5).unwrap_or_default();
    for param in params.split(',').filter(|p| !p.is_empty()) {
        use zstd::zstd_safe::CParameter;
        let bad = || -> ! { fail(&format!("PARAMS: '{param}' is not hlog=N or tlen=N")) };
        let (key, value) = param.split_once('=').unwrap_or_else(|| bad());
        let value: u32 = value.parse().unwrap_or_else(|_| bad());
        let parameter = match key {
            "hlog" => CParameter::HashLog(value),
            "tlen" => CParameter::TargetLength(value),
            _ => bad(),
        };
        packer.set_parameter(parameter).unwrap_or_else(|_| fail(&format!("PARAMS: zstd refuses '{param}'")));
    }
    let mut totals: Totals = [(0, 0.0, 0.0); 4];
    let mut compact_only: CompactOnly = (0, 0.0, 0.0);
    let (mut frames, mut measured, mut raw_bytes, mut packed_bytes) = (0usize, 0usize, 0usize, 0usize);
    // A log's chunk ends here (a schedule has no chunks).
    let (mut at, mut chunk_end) = (0usize, 0usize);
    let mut header = [0u8; CHUNK_HEADER_BYTES];
    loop {
        if !schedule && at == chunk_end {
            if !read(&mut header) {
                break;
            }
            at += CHUNK_HEADER_BYTES;
            chunk_end = at + word(&header, 12) as usize;
            continue;
        }
        if !read(&mut header[..FRAME_HEADER_BYTES]) {
            break;
        }
        let (entries, compressed) = (word(&header, 0) as usize, word(&header, 4) as usize);
        let mut payload = vec![0u8; compressed];
        if !read(&mut payload) {
            break;
        }
        at += FRAME_HEADER_BYTES + compressed;
        frames += 1;
        if frames % every != 0 {
            continue;
        }
        let mut raw = vec![0u8; entries * ENTRY_BYTES];
        unpacker
            .decompress(&payload, entries * COMPACT_ENTRY_BYTES)
            .ok()
            .and_then(|stored| restore(Way::Compact, &stored, &mut raw))
            .unwrap_or_else(|| fail(&format!("'{path}' is not a log or schedule of checkpoint version 16")));
        measure(&raw, &mut packer, &mut unpacker, &mut totals, &mut compact_only);
        (measured, raw_bytes, packed_bytes) = (measured + 1, raw_bytes + raw.len(), packed_bytes + compressed);
    }
    println!(
        "{measured} of {frames} frames, {:.1} MB of entries, {:.1} MB packed in the file",
        raw_bytes as f64 / 1e6,
        packed_bytes as f64 / 1e6
    );
    for ((name, _), (packed, packing, unpacking)) in WAYS.iter().zip(totals) {
        println!(
            "{name:>12}, level {level}{}: {:.2} times, packing {:.0} MB/s, unpacking {:.0} MB/s",
            if params.is_empty() { String::new() } else { format!(" {params}") },
            raw_bytes as f64 / packed as f64,
            raw_bytes as f64 / packing / 1e6,
            raw_bytes as f64 / unpacking / 1e6
        );
    }
    let (stored, storing, restoring) = compact_only;
    println!(
        "compact only, no zstd: {:.2} times, storing {:.0} MB/s, restoring {:.0} MB/s",
        raw_bytes as f64 / stored as f64,
        raw_bytes as f64 / storing / 1e6,
        raw_bytes as f64 / restoring / 1e6
    );
}
