//! A finished material's values in the work directory, packed:
//! `<material>.packed`, one or more zstd frames per index group.
//!
//! Owns that file's byte layout and its writing and reading; knows nothing
//! of moves, steps or shards (the published table is `format`'s business).
//! Layout: each group's frames (level 1, faster settings for values only
//! the shard writer reads, see [`Readers`]; each with zstd's content checksum,
//! together holding the group's value bytes without padding, one after
//! another), groups in the order they were put, then the frame table (per
//! group in group order, `offset: u64, bytes: u64` of its frames), then a
//! trailer `groups: u64, crc32 of the table: u32, bytes per layout: u32`
//! (30 value bytes, or 60 for value words), `magic`, all little-endian.
//!
//! Why packed: at 8 men the finished materials' raw values (15 GB) sat next
//! to 4v4's work files during its steps, and finishing 4v4 wrote its 36 GB
//! raw next to its planes and log, on a disk with about 55 GB free. Value
//! bytes pack about 4 to 5 times at level 1. Frames per group let finishing
//! put groups in the order the steps visit them, and let captured values be
//! unpacked a group at a time, in parallel, or streamed through a buffer of
//! any size (the shard writer beside the solve, a block at a time). A
//! group in several frames (finishing's pieces, `put_batch`) is packed on
//! several workers; zstd's decoder reads frames one after another, so
//! readers do not see where one ends.
//!
//! The file is written as `<material>.packed.partial` (with O_DIRECT,
//! through `disk::Appender`), synced and renamed into place, so a
//! `.packed` file is always whole. It is read with plain
//! positioned reads (not O_DIRECT): it is a few gigabytes at most, and what
//! the page cache holds of it is reclaimable, not the process's memory.

use super::disk::{Appender, DiskError, io_error};
use super::lanes::LaneLayout;
use crate::index::Material;
use rayon::prelude::*;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const MAGIC: [u8; 8] = *b"onitbpv1";
const TRAILER_BYTES: u64 = 24;
const TABLE_ENTRY_BYTES: u64 = 16;
/// zstd level: packing is on the critical path of finishing.
const LEVEL: i32 = 1;
/// zstd's hash table for [`Readers::ShardOnly`]: 2^12 entries instead of
/// level 1's 2^14 (about as small, a little faster), and its
/// acceleration (`targetLength` of the fast strategy, which skips ahead
/// in data it finds no match in). On 500 MB of 8-men 3v4's values (`zstd
/// -b1 -1 --zstd=hlog=12,tlen=2`): 2.48 times smaller at 682 MB/s, unpacked
/// at 1,774 MB/s, against level 1's 3.97 times, 435 and 1,303 MB/s.
const SHARD_ONLY_HASH_LOG: u32 = 12;
const SHARD_ONLY_TARGET_LENGTH: u32 = 2;

/// Who reads a material's packed values back, which sets how hard they are
/// packed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Readers {
    /// Later pairs' initialisation, for their captures (a group unpacked
    /// maybe more than once, and the file kept through those pairs'
    /// steps), and the shard writer: level 1.
    CapturesAndShard,
    /// The shard writer only, once: packed about 1.6 times as fast, and
    /// unpacked 1.4 times, for files 1.6 times as large.
    ShardOnly,
}

impl Readers {
    /// A compressor with this packing's settings and content checksums.
    fn compressor(self) -> io::Result<zstd::bulk::Compressor<'static>> {
        let mut compressor = zstd::bulk::Compressor::new(LEVEL)?;
        for parameter in self.parameters() {
            compressor.set_parameter(parameter)?;
        }
        Ok(compressor)
    }

    /// The zstd parameters set over level 1's, the content checksum first.
    fn parameters(self) -> Vec<zstd::zstd_safe::CParameter> {
        use zstd::zstd_safe::CParameter;
        let mut parameters = vec![CParameter::ChecksumFlag(true)];
        if self == Readers::ShardOnly {
            parameters.push(CParameter::HashLog(SHARD_ONLY_HASH_LOG));
            parameters.push(CParameter::TargetLength(SHARD_ONLY_TARGET_LENGTH));
        }
        parameters
    }
}
/// Buffer between zstd and the file: the appender's, and the most a
/// group's frames are read through.
const BUFFER_BYTES: usize = 256 << 10;
/// The least a group's frames are read through: a page, so that no
/// reader has an empty buffer, whatever the frame table says of the group.
const MIN_READ_BUFFER_BYTES: usize = 4 << 10;

/// The name of a material's packed values.
pub(super) fn packed_path(dir: &Path, material: Material) -> PathBuf {
    dir.join(format!("{material}.packed"))
}

fn partial_path(dir: &Path, material: Material) -> PathBuf {
    dir.join(format!("{material}.packed.partial"))
}

/// Removes a material's packed values, whole or partial. Missing is fine.
pub(super) fn remove(dir: &Path, material: Material) -> io::Result<()> {
    for path in [packed_path(dir, material), partial_path(dir, material)] {
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
            _ => {}
        }
    }
    Ok(())
}

/// Writes a material's packed values, group by group in any order.
pub(super) struct PackedWriter {
    /// The partial file; its length is where the next frame starts.
    out: Appender,
    dir: PathBuf,
    material: Material,
    /// Per group, where its frame lies (None: not put yet).
    frames: Vec<Option<(u64, u64)>>,
    /// Per group, its value bytes (unpadded).
    lens: Vec<u64>,
    readers: Readers,
}

impl PackedWriter {
    /// Starts (or starts over) the material's partial file, packed for
    /// `readers`.
    pub fn create(
        dir: &Path,
        material: Material,
        layout: &LaneLayout,
        readers: Readers,
    ) -> Result<PackedWriter, DiskError> {
        let partial = partial_path(dir, material);
        let appender = Appender::create(&partial, BUFFER_BYTES)?;
        let lens: Vec<u64> = (0..layout.groups()).map(|g| layout.segment(g).end - layout.segment(g).start).collect();
        let frames = vec![None; lens.len()];
        Ok(PackedWriter { out: appender, dir: dir.to_path_buf(), material, frames, lens, readers })
    }

    /// Packs group `g`'s value bytes (its unpadded segment) as one frame.
    pub fn put(&mut self, g: usize, values: &[u8]) -> Result<(), DiskError> {
        let readers = self.readers;
        self.put_with(g, values.len(), |out| write_frame(out, values, readers))
    }

    /// Bytes of frames written so far (appended to the partial file, some
    /// of them perhaps still gathered for their O_DIRECT write).
    pub fn frame_bytes(&self) -> u64 {
        self.out.len()
    }

    /// Writes group `g`'s frame, of its `len` value bytes, with `write`, and
    /// records where it lies.
    fn put_with(
        &mut self,
        g: usize,
        len: usize,
        write: impl FnOnce(&mut Appender) -> io::Result<()>,
    ) -> Result<(), DiskError> {
        assert_eq!(len as u64, self.lens[g], "a group's values are its whole segment");
        assert!(self.frames[g].is_none(), "group {g} put twice");
        let start = self.out.len();
        write(&mut self.out).map_err(|e| io_error("write", &partial_path(&self.dir, self.material), e))?;
        self.frames[g] = Some((start, self.out.len() - start));
        Ok(())
    }

    /// Packs a batch of groups as [`PackedWriter::put`] does, but on the
    /// workers and in pieces: `pieces` are `(g, value bytes)`, a group's
    /// pieces one after another and in order, together its whole segment.
    /// Each piece is packed as a frame into its own region of the `scratch`
    /// buffers (as long as its values, taken in turn while they have room);
    /// a thread of its own writes the frames in batch order, a group's one
    /// after another, each as soon as it and those before it are packed,
    /// while the workers pack the later ones (written after all were
    /// packed, the writes took finishing 8-men 4v4 about 3 s longer, the
    /// workers idle). A piece without a region, or whose frame does not fit
    /// it (values that do not pack), is packed by the writing thread. (Packed a group at a
    /// time on one thread, this was half of finishing 8-men 3v4.)
    pub fn put_batch(&mut self, pieces: &[(usize, &[u8])], scratch: Vec<&mut [u8]>) -> Result<(), DiskError> {
        for group in pieces.chunk_by(|a, b| a.0 == b.0) {
            let len: usize = group.iter().map(|(_, values)| values.len()).sum();
            assert_eq!(len as u64, self.lens[group[0].0], "a group's pieces are its whole segment");
        }
        let mut rooms = scratch.into_iter();
        let mut room = rooms.next().unwrap_or_default();
        let mut regions: Vec<Option<&mut [u8]>> = Vec::with_capacity(pieces.len());
        for (_, values) in pieces {
            while values.len() > room.len() {
                let Some(next) = rooms.next() else { break };
                room = next;
            }
            if values.len() <= room.len() {
                let (region, rest) = std::mem::take(&mut room).split_at_mut(values.len());
                regions.push(Some(region));
                room = rest;
            } else {
                regions.push(None);
            }
        }
        let readers = self.readers;
        let (packed_tx, packed_rx) = std::sync::mpsc::channel::<(usize, Option<&[u8]>)>();
        std::thread::scope(|scope| {
            // Writing on a thread of its own, so that this one packs with
            // the workers (or is one of them).
            let writing = scope.spawn(|| {
                let mut packed: Vec<Option<Option<&[u8]>>> = vec![None; pieces.len()];
                let mut next = 0;
                for (k, frame) in packed_rx {
                    packed[k] = Some(frame);
                    while let Some(frame) = packed.get_mut(next).and_then(Option::take) {
                        self.write_piece(pieces, next, frame)?;
                        next += 1;
                    }
                }
                assert_eq!(next, pieces.len(), "every piece was packed");
                Ok(())
            });
            // The workers take the pieces from the front, so they are
            // packed about in the order they are written.
            (pieces.iter().zip(regions).enumerate()).par_bridge().for_each_init(
                || readers.compressor().ok(),
                |packer, (k, ((_, values), region))| {
                    // A frame that does not fit is packed again when written.
                    let frame = match (packer.as_mut(), region) {
                        (Some(packer), Some(region)) => {
                            packer.compress_to_buffer(values, &mut *region).ok().map(|len| &region[..len])
                        }
                        _ => None,
                    };
                    // The receiver is gone only if writing failed.
                    let _ = packed_tx.send((k, frame));
                },
            );
            // The writer ends once every sender is gone.
            drop(packed_tx);
            writing.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    /// Writes piece `k` of `pieces` (see [`PackedWriter::put_batch`]): its
    /// `frame`, or, if it was not packed, its values packed here. A group's
    /// first piece records where its frames start, its last their length.
    fn write_piece(&mut self, pieces: &[(usize, &[u8])], k: usize, frame: Option<&[u8]>) -> Result<(), DiskError> {
        let (g, values) = pieces[k];
        if k == 0 || pieces[k - 1].0 != g {
            assert!(self.frames[g].is_none(), "group {g} put twice");
            self.frames[g] = Some((self.out.len(), 0));
        }
        let written = match frame {
            Some(frame) => self.out.write_all(frame),
            None => write_frame(&mut self.out, values, self.readers),
        };
        written.map_err(|e| io_error("write", &partial_path(&self.dir, self.material), e))?;
        if let Some((start, bytes)) = &mut self.frames[g] {
            *bytes = self.out.len() - *start;
        }
        Ok(())
    }

    /// Writes the frame table, syncs and renames the file into place; every
    /// group must have been put. Returns the file opened for reading.
    pub fn finish(mut self, layout: &LaneLayout) -> Result<PackedValues, DiskError> {
        let partial = partial_path(&self.dir, self.material);
        let mut table = Vec::with_capacity(self.frames.len() * TABLE_ENTRY_BYTES as usize);
        for (g, frame) in self.frames.iter().enumerate() {
            let (offset, bytes) = frame.unwrap_or_else(|| panic!("group {g} of {} never put", self.material));
            table.extend_from_slice(&offset.to_le_bytes());
            table.extend_from_slice(&bytes.to_le_bytes());
        }
        let mut trailer = Vec::with_capacity(TRAILER_BYTES as usize);
        trailer.extend_from_slice(&(self.frames.len() as u64).to_le_bytes());
        trailer.extend_from_slice(&crc32fast::hash(&table).to_le_bytes());
        trailer.extend_from_slice(&(layout.bytes_per_layout() as u32).to_le_bytes());
        trailer.extend_from_slice(&MAGIC);
        (|| {
            self.out.write_all(&table)?;
            self.out.write_all(&trailer)
        })()
        .map_err(|e| io_error("write", &partial, e))?;
        self.out.sync()?;
        let path = packed_path(&self.dir, self.material);
        std::fs::rename(&partial, &path).map_err(|e| io_error("rename", &path, e))?;
        File::open(&self.dir).and_then(|d| d.sync_all()).map_err(|e| io_error("sync", &self.dir, e))?;
        PackedValues::open(&path, layout)
    }
}

/// Writes `values` to `out` as one frame (packed for `readers`, with its
/// content checksum), streamed through zstd's encoder.
fn write_frame(out: &mut Appender, values: &[u8], readers: Readers) -> io::Result<()> {
    let mut encoder = zstd::stream::write::Encoder::new(out, LEVEL)?;
    for parameter in readers.parameters() {
        encoder.set_parameter(parameter)?;
    }
    encoder.set_pledged_src_size(Some(values.len() as u64))?;
    encoder.write_all(values)?;
    encoder.finish()?;
    Ok(())
}

/// The fields of a packed file's trailer (see the module header).
struct Trailer {
    groups: u64,
    table_crc32: u32,
    bytes_per_layout: u32,
}

/// A material's packed values, opened for reading.
pub struct PackedValues {
    file: File,
    path: PathBuf,
    /// Per group: (offset, bytes) of its frame.
    frames: Vec<(u64, u64)>,
    /// Per group, its value bytes (unpadded).
    lens: Vec<u64>,
}

impl PackedValues {
    /// Opens a packed file and checks its frame table against `layout`.
    pub fn open(path: &Path, layout: &LaneLayout) -> Result<PackedValues, DiskError> {
        let damaged = |what| DiskError::Damaged { path: path.to_path_buf(), what };
        let (file, size, trailer) = Self::trailer(path)?;
        let groups = layout.groups() as u64;
        let table_bytes = groups * TABLE_ENTRY_BYTES;
        if size < TRAILER_BYTES + table_bytes {
            return Err(damaged("shorter than its frame table"));
        }
        if trailer.groups != groups {
            return Err(damaged("packed for another number of groups"));
        }
        if u64::from(trailer.bytes_per_layout) != layout.bytes_per_layout() {
            return Err(damaged("packed with another value width"));
        }
        let table_start = size - TRAILER_BYTES - table_bytes;
        let mut table = vec![0u8; table_bytes as usize];
        file.read_exact_at(&mut table, table_start).map_err(|e| io_error("read", path, e))?;
        if crc32fast::hash(&table) != trailer.table_crc32 {
            return Err(damaged("frame table checksum mismatch"));
        }
        let frames: Vec<(u64, u64)> = table
            .chunks_exact(TABLE_ENTRY_BYTES as usize)
            .map(|e| {
                let (offset, bytes) = e.split_at(8);
                (u64::from_le_bytes(offset.try_into().expect("8")), u64::from_le_bytes(bytes.try_into().expect("8")))
            })
            .collect();
        if frames.iter().any(|&(offset, bytes)| offset.checked_add(bytes).is_none_or(|end| end > table_start)) {
            return Err(damaged("a frame lies outside the file"));
        }
        let lens = (0..layout.groups()).map(|g| layout.segment(g).end - layout.segment(g).start).collect();
        Ok(PackedValues { file, path: path.to_path_buf(), frames, lens })
    }

    /// Bytes per layout of the values packed at `path` (30 value bytes or
    /// 60 for value words): what a finished material reopened is laid out
    /// by.
    pub fn bytes_per_layout(path: &Path) -> Result<u64, DiskError> {
        Ok(u64::from(Self::trailer(path)?.2.bytes_per_layout))
    }

    /// The file at `path` opened, its size and its trailer (the magic
    /// checked).
    fn trailer(path: &Path) -> Result<(File, u64, Trailer), DiskError> {
        let damaged = |what| DiskError::Damaged { path: path.to_path_buf(), what };
        let file = File::open(path).map_err(|e| io_error("open", path, e))?;
        let size = file.metadata().map_err(|e| io_error("inspect", path, e))?.len();
        if size < TRAILER_BYTES {
            return Err(damaged("shorter than its trailer"));
        }
        let mut raw = [0u8; TRAILER_BYTES as usize];
        file.read_exact_at(&mut raw, size - TRAILER_BYTES).map_err(|e| io_error("read", path, e))?;
        if raw[16..] != MAGIC {
            return Err(damaged("not packed values (bad magic)"));
        }
        let u32_at = |at: usize| u32::from_le_bytes(raw[at..at + 4].try_into().expect("4 bytes"));
        let groups = u64::from_le_bytes(raw[..8].try_into().expect("8 bytes"));
        Ok((file, size, Trailer { groups, table_crc32: u32_at(8), bytes_per_layout: u32_at(12) }))
    }

    /// Bytes the groups' frames take (what reading all of them reads).
    pub fn packed_bytes(&self, groups: impl IntoIterator<Item = usize>) -> u64 {
        groups.into_iter().map(|g| self.frames[g].1).sum()
    }

    /// Unpacks group `g`'s value bytes into `into` (exactly its unpadded
    /// segment's length). Thread-safe: positioned reads only.
    pub fn read_group(&self, g: usize, into: &mut [u8]) -> Result<(), DiskError> {
        assert_eq!(into.len() as u64, self.lens[g], "a group's values are its whole segment");
        let mut decoder = self.decoder(g)?;
        self.read_frame(&mut decoder, into)?;
        self.end_frame(decoder)
    }

    /// Unpacks group `g`'s value bytes through `piece`, a buffer of any
    /// length: fills it from `*filled` on and hands it to `full` each time
    /// it is full, then fills it again from its start; `*filled` says how
    /// much of it the group's last bytes take. So a whole material streams
    /// through one buffer, its pieces cut where the buffer's length says,
    /// not at group edges. Read errors become `E` through `disk`.
    pub fn read_group_pieces<E>(
        &self,
        g: usize,
        (piece, filled): (&mut [u8], &mut usize),
        mut full: impl FnMut(&[u8]) -> Result<(), E>,
        disk: impl Fn(DiskError) -> E,
    ) -> Result<(), E> {
        assert!(*filled < piece.len(), "the piece has room");
        let mut decoder = self.decoder(g).map_err(&disk)?;
        let mut left = self.lens[g] as usize;
        while left > 0 {
            let take = left.min(piece.len() - *filled);
            self.read_frame(&mut decoder, &mut piece[*filled..*filled + take]).map_err(&disk)?;
            (*filled, left) = (*filled + take, left - take);
            if *filled == piece.len() {
                full(piece)?;
                *filled = 0;
            }
        }
        self.end_frame(decoder).map_err(disk)
    }

    /// A decoder of group `g`'s frames (one after another: zstd's decoder
    /// goes on into the next frame where one ends).
    fn decoder(&self, g: usize) -> Result<FrameDecoder<'_>, DiskError> {
        let (offset, bytes) = self.frames[g];
        let source = At { file: &self.file, at: offset, end: offset + bytes };
        // No larger than the group's frames: std zeroes a new reader's
        // buffer on its first read, and a whole 256 KiB for every small
        // group was 3.3% of a streamed 4-men run's instructions.
        let buffer_bytes = usize::try_from(bytes).unwrap_or(usize::MAX).clamp(MIN_READ_BUFFER_BYTES, BUFFER_BYTES);
        zstd::stream::read::Decoder::with_buffer(io::BufReader::with_capacity(buffer_bytes, source))
            .map_err(|e| io_error("unpack", &self.path, e))
    }

    /// Reads the next `into.len()` bytes of a group's frames.
    fn read_frame(&self, decoder: &mut FrameDecoder<'_>, into: &mut [u8]) -> Result<(), DiskError> {
        match decoder.read_exact(into) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::Other || e.kind() == io::ErrorKind::UnexpectedEof => {
                Err(self.undecodable())
            }
            Err(e) => Err(io_error("read", &self.path, e)),
        }
    }

    /// Reads on to the group's last frame's end, once its bytes are read:
    /// checks that frame's content checksum and that the frames hold no
    /// more than the group.
    fn end_frame(&self, mut decoder: FrameDecoder<'_>) -> Result<(), DiskError> {
        let mut more = [0u8; 1];
        match decoder.read(&mut more) {
            Ok(0) => Ok(()),
            Ok(_) | Err(_) => Err(self.undecodable()),
        }
    }

    fn undecodable(&self) -> DiskError {
        DiskError::Damaged { path: self.path.clone(), what: "a packed values frame does not unpack" }
    }
}

/// A zstd decoder of one group's frames, read with positioned reads.
type FrameDecoder<'a> = zstd::stream::read::Decoder<'static, io::BufReader<At<'a>>>;

/// Reads `file` from `at` up to `end` with positioned reads.
struct At<'a> {
    file: &'a File,
    at: u64,
    end: u64,
}

impl Read for At<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len().min((self.end - self.at) as usize);
        if want == 0 {
            return Ok(0);
        }
        let n = self.file.read_at(&mut buf[..want], self.at)?;
        self.at += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::MaterialIndex;

    fn values_of(layout: &LaneLayout, g: usize) -> Vec<u8> {
        let len = (layout.segment(g).end - layout.segment(g).start) as usize;
        (0..len).map(|i| ((i * 31 + g * 7) % 200 / 50) as u8).collect()
    }

    /// 2v2's layout and its packed values in `dir`, each group's
    /// [`values_of`] put in group order.
    fn packed_2v2(dir: &Path) -> (LaneLayout, PackedValues) {
        let material = Material::new(2, 2);
        let layout = LaneLayout::new(&MaterialIndex::new(material), 30);
        let mut writer = PackedWriter::create(dir, material, &layout, Readers::CapturesAndShard).unwrap();
        for g in 0..layout.groups() {
            writer.put(g, &values_of(&layout, g)).unwrap();
        }
        let packed = writer.finish(&layout).unwrap();
        (layout, packed)
    }

    #[test]
    fn groups_put_in_any_order_read_back_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let material = Material::new(2, 2);
        let layout = LaneLayout::new(&MaterialIndex::new(material), 30);
        let mut writer = PackedWriter::create(dir.path(), material, &layout, Readers::CapturesAndShard).unwrap();
        for g in (0..layout.groups()).rev() {
            writer.put(g, &values_of(&layout, g)).unwrap();
        }
        assert!(!packed_path(dir.path(), material).exists(), "only whole files have the final name");
        let packed = writer.finish(&layout).unwrap();
        assert!(!partial_path(dir.path(), material).exists());
        for g in 0..layout.groups() {
            let mut back = vec![0xee; values_of(&layout, g).len()];
            packed.read_group(g, &mut back).unwrap();
            assert_eq!(back, values_of(&layout, g));
        }
        let path = packed_path(dir.path(), material);
        let total = layout.span(0..layout.groups()).end;
        assert!(std::fs::metadata(&path).unwrap().len() < total / 4, "values pack");
        // A flipped bit inside a frame is caught by the content checksum.
        let (offset, bytes) = packed.frames[5];
        let mut raw = std::fs::read(&path).unwrap();
        raw[(offset + bytes / 2) as usize] ^= 0x10;
        std::fs::write(&path, &raw).unwrap();
        let packed = PackedValues::open(&path, &layout).unwrap();
        let mut back = vec![0; values_of(&layout, 5).len()];
        assert!(matches!(packed.read_group(5, &mut back), Err(DiskError::Damaged { .. })));
        // A damaged frame table, a foreign file and a file of another
        // material are refused when opened.
        let at = raw.len() - TRAILER_BYTES as usize - 3;
        raw[at] ^= 1;
        std::fs::write(&path, &raw).unwrap();
        assert!(matches!(PackedValues::open(&path, &layout), Err(DiskError::Damaged { .. })));
        std::fs::write(&path, b"not a packed file at all, but long enough to have a trailer").unwrap();
        assert!(matches!(PackedValues::open(&path, &layout), Err(DiskError::Damaged { .. })));
        let other = LaneLayout::new(&MaterialIndex::new(Material::new(1, 2)), 30);
        drop(packed_2v2(dir.path()));
        assert!(matches!(PackedValues::open(&path, &other), Err(DiskError::Damaged { .. })));
        // The trailer says how wide the values are, and they are read at
        // that width only.
        assert_eq!(PackedValues::bytes_per_layout(&path).unwrap(), 30);
        let words = LaneLayout::new(&MaterialIndex::new(material), 60);
        assert!(matches!(PackedValues::open(&path, &words), Err(DiskError::Damaged { .. })));
    }

    /// Groups read through a buffer of any length give the pieces of the
    /// groups' bytes run together, cut at the buffer's length; a damaged
    /// frame met on the way is an error, whatever the piece.
    #[test]
    fn groups_read_in_pieces_run_together() {
        let dir = tempfile::tempdir().unwrap();
        let (layout, packed) = packed_2v2(dir.path());
        let all: Vec<u8> = (0..layout.groups()).flat_map(|g| values_of(&layout, g)).collect();
        let largest = (0..layout.groups()).map(|g| values_of(&layout, g).len()).max().unwrap();
        for piece_len in [1, 7, 4096, largest, largest + 1, all.len() + 3] {
            let (mut piece, mut filled) = (vec![0xee; piece_len], 0);
            let mut got: Vec<Vec<u8>> = Vec::new();
            for g in 0..layout.groups() {
                let full = |p: &[u8]| -> Result<(), DiskError> {
                    got.push(p.to_vec());
                    Ok(())
                };
                packed.read_group_pieces(g, (&mut piece, &mut filled), full, |e| e).unwrap();
            }
            got.push(piece[..filled].to_vec());
            assert!(got[..got.len() - 1].iter().all(|p| p.len() == piece_len), "full pieces, {piece_len} bytes");
            assert_eq!(got.concat(), all, "{piece_len}-byte pieces");
        }
        let path = packed_path(dir.path(), Material::new(2, 2));
        let (offset, bytes) = packed.frames[3];
        let mut raw = std::fs::read(&path).unwrap();
        raw[(offset + bytes / 2) as usize] ^= 0x10;
        std::fs::write(&path, &raw).unwrap();
        let packed = PackedValues::open(&path, &layout).unwrap();
        let (mut piece, mut filled) = (vec![0; 4096], 0);
        let read = packed.read_group_pieces(3, (&mut piece, &mut filled), |_| Ok(()), |e| e);
        assert!(matches!(read, Err(DiskError::Damaged { .. })));
    }

    /// Batches packed on the workers read back as the groups put one by
    /// one, whole or through a small buffer: with groups in one to three
    /// pieces (frames), scratch in two buffers that hold only some of the
    /// pieces (the rest are packed on the calling thread), and a group that
    /// does not pack (its frames do not fit their regions). A damaged frame
    /// after a group's first is refused too.
    #[test]
    fn batches_read_back_whatever_the_scratch() {
        let dir = tempfile::tempdir().unwrap();
        let material = Material::new(2, 2);
        let layout = LaneLayout::new(&MaterialIndex::new(material), 30);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let values: Vec<Vec<u8>> = (0..layout.groups())
            .map(|g| {
                let mut v = values_of(&layout, g);
                if g == 3 {
                    for byte in &mut v {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        *byte = seed as u8;
                    }
                }
                v
            })
            .collect();
        let largest = values.iter().map(Vec::len).max().unwrap();
        // Packed for the shard writer only: its settings, on the workers
        // and (a frame too big for its region) on the writing thread.
        let mut writer = PackedWriter::create(dir.path(), material, &layout, Readers::ShardOnly).unwrap();
        let (mut first, mut second) = (vec![0u8; largest + 10], vec![0u8; 3 * largest]);
        let groups: Vec<usize> = (0..layout.groups()).collect();
        let pieces_of = |g: usize| {
            let (v, k) = (&values[g][..], 1 + g % 3);
            (0..k).map(move |i| (g, &v[v.len() * i / k..v.len() * (i + 1) / k]))
        };
        for batch in groups.chunks(6) {
            let batch: Vec<(usize, &[u8])> = batch.iter().flat_map(|&g| pieces_of(g)).collect();
            writer.put_batch(&batch, vec![&mut first[..], &mut second[..]]).unwrap();
        }
        let packed = writer.finish(&layout).unwrap();
        let (mut piece, mut filled, mut through) = (vec![0; 7], 0, Vec::new());
        for (g, wanted) in values.iter().enumerate() {
            let mut back = vec![0xee; wanted.len()];
            packed.read_group(g, &mut back).unwrap();
            assert_eq!(&back, wanted, "group {g}");
            let full = |p: &[u8]| -> Result<(), DiskError> {
                through.extend_from_slice(p);
                Ok(())
            };
            packed.read_group_pieces(g, (&mut piece, &mut filled), full, |e| e).unwrap();
        }
        through.extend_from_slice(&piece[..filled]);
        assert_eq!(through, values.concat(), "read through a 7-byte buffer");
        // Group 5 is three frames: damage the last.
        let path = packed_path(dir.path(), material);
        let (offset, bytes) = packed.frames[5];
        let mut raw = std::fs::read(&path).unwrap();
        raw[(offset + bytes - 6) as usize] ^= 0x10;
        std::fs::write(&path, &raw).unwrap();
        let packed = PackedValues::open(&path, &layout).unwrap();
        let mut back = vec![0; values[5].len()];
        assert!(matches!(packed.read_group(5, &mut back), Err(DiskError::Damaged { .. })));
    }
}
