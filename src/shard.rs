//! Reading shard files, raw or compressed, one block at a time.
//!
//! Owns opening a shard (header only, file length checked), reading and
//! checking one block, and opening a table directory as a set of shards
//! that agree with each other. Knows the byte layouts only through `format`
//! and the recomputable bytes only through `compress`; never loads a whole
//! shard unless asked to ([`TableFiles::load`]).
//!
//! Every block read is checked before it is used: a raw block against its
//! CRC-32, a compressed frame against its CRC-32, then its decompressed
//! bytes against theirs. A damaged file is an error naming the shard and the
//! block, never a wrong value.

use crate::compress;
use crate::format::{COMPRESSED_MAGIC, CompressedHeader, Content, FIXED_HEADER_BYTES, FormatError, MAGIC, ShardHeader};
use crate::index::{Material, MaterialIndex};
use crate::rules::{Rules, WinsInOne};
use crate::store::{StoreError, compressed_shard_name, material_of_name, shard_name};
use crate::table::{SolvedMaterial, Stats, Table};
use std::fs::{self, File};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// How a shard stores its blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Storage {
    /// Value bytes follow the header; block `i` at `values_at + i * BLOCK_BYTES`.
    Raw { values_at: u64 },
    /// One zstd frame per block.
    Compressed(Box<CompressedHeader>),
}

/// An open shard: its checked header and the file, positioned nowhere (all
/// reads are positional, so one `ShardFile` serves many threads).
#[derive(Debug)]
pub struct ShardFile {
    path: PathBuf,
    file: File,
    header: ShardHeader,
    storage: Storage,
}

fn io_error(action: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StoreError {
    let path = path.to_path_buf();
    move |cause| StoreError::Io { action, path, cause }
}

impl ShardFile {
    /// Opens a shard and checks its header and its length; reads nothing
    /// else.
    pub fn open(path: &Path) -> Result<ShardFile, StoreError> {
        let format_error = |cause| StoreError::Format { path: path.to_path_buf(), cause };
        let file = File::open(path).map_err(io_error("open shard", path))?;
        let file_len = file.metadata().map_err(io_error("read shard", path))?.len();
        let mut prefix = vec![0u8; FIXED_HEADER_BYTES.min(file_len as usize)];
        file.read_exact_at(&mut prefix, 0).map_err(io_error("read shard", path))?;
        let compressed = prefix.starts_with(&COMPRESSED_MAGIC);
        if !compressed && prefix.len() >= MAGIC.len() && !prefix.starts_with(&MAGIC) {
            return Err(format_error(FormatError::BadMagic));
        }
        let header_len =
            if compressed { CompressedHeader::total_len(&prefix) } else { ShardHeader::total_len(&prefix) }
                .map_err(format_error)?;
        if file_len < header_len as u64 {
            return Err(format_error(FormatError::Truncated { needed: header_len as u64, got: file_len }));
        }
        let mut bytes = vec![0u8; header_len];
        file.read_exact_at(&mut bytes, 0).map_err(io_error("read shard", path))?;
        let (header, storage, needed) = if compressed {
            let compressed = CompressedHeader::from_bytes(&bytes).map_err(format_error)?;
            let needed = compressed.file_len();
            (compressed.shard.clone(), Storage::Compressed(Box::new(compressed)), needed)
        } else {
            let header = ShardHeader::from_bytes(&bytes).map_err(format_error)?;
            let needed = header_len as u64 + header.values_len();
            (header, Storage::Raw { values_at: header_len as u64 }, needed)
        };
        if file_len < needed {
            return Err(format_error(FormatError::Truncated { needed, got: file_len }));
        }
        if file_len > needed {
            return Err(format_error(FormatError::TrailingBytes { extra: file_len - needed }));
        }
        Ok(ShardFile { path: path.to_path_buf(), file, header, storage })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The header; for a compressed shard its `block_crcs` are empty.
    pub fn header(&self) -> &ShardHeader {
        &self.header
    }

    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    pub fn material(&self) -> Material {
        self.header.material
    }

    pub fn block_count(&self) -> usize {
        self.header.block_count()
    }

    /// What the shard's bytes hold (raw shards hold values).
    pub fn content(&self) -> Content {
        match &self.storage {
            Storage::Raw { .. } => Content::Values,
            Storage::Compressed(c) => c.content,
        }
    }

    /// Bytes the recomputable values may hold anything in (compressed
    /// shards), or hold their true value (raw shards).
    pub fn is_compressed(&self) -> bool {
        matches!(self.storage, Storage::Compressed(_))
    }

    /// File offset and length of block `block` as stored.
    pub fn stored_range(&self, block: usize) -> (u64, u64) {
        match &self.storage {
            Storage::Raw { values_at } => {
                let range = self.header.block_range(block);
                (values_at + range.start, range.end - range.start)
            }
            Storage::Compressed(c) => (c.frames[block].offset, c.frames[block].len as u64),
        }
    }

    /// Reads `len` bytes at `offset` (for streaming several blocks at once).
    pub fn read_at(&self, offset: u64, buffer: &mut [u8]) -> Result<(), StoreError> {
        self.file.read_exact_at(buffer, offset).map_err(io_error("read shard", &self.path))
    }

    /// Checks the stored bytes of one block against their checksum.
    pub fn check_stored(&self, block: usize, stored: &[u8]) -> Result<(), FormatError> {
        let computed = crc32fast::hash(stored);
        let (expected, range) = match &self.storage {
            Storage::Raw { .. } => (self.header.block_crcs[block], self.header.block_range(block)),
            Storage::Compressed(c) => {
                let frame = &c.frames[block];
                (frame.crc, frame.offset..frame.offset + frame.len as u64)
            }
        };
        if computed == expected {
            return Ok(());
        }
        match &self.storage {
            Storage::Raw { .. } => {
                Err(FormatError::BlockCrc { block, start: range.start, end: range.end, stored: expected, computed })
            }
            Storage::Compressed(_) => {
                Err(FormatError::FrameCrc { block, start: range.start, end: range.end, stored: expected, computed })
            }
        }
    }

    /// One block as stored in the shard, checked: for a compressed shard,
    /// its frame decompressed (packed as the header says, see
    /// [`compress::unpack_block`]).
    pub fn read_block(&self, block: usize) -> Result<Vec<u8>, StoreError> {
        assert!(block < self.block_count(), "block {block} of {}", self.block_count());
        let format_error = |cause| StoreError::Format { path: self.path.clone(), cause };
        let (offset, len) = self.stored_range(block);
        let mut stored = vec![0u8; len as usize];
        self.read_at(offset, &mut stored)?;
        self.check_stored(block, &stored).map_err(format_error)?;
        match &self.storage {
            Storage::Raw { .. } => Ok(stored),
            Storage::Compressed(c) => {
                let capacity = compress::block_capacity(c, &self.header.block_range(block));
                compress::decompress_frame(&stored, capacity, c.frames[block].content_crc, block).map_err(format_error)
            }
        }
    }

    /// One block of true value bytes (for a WDL shard: 1, 128 or 255):
    /// [`ShardFile::read_block`], unpacked, with the recomputable values of a
    /// compressed shard recomputed.
    pub fn read_values(&self, block: usize, context: &Context) -> Result<Vec<u8>, StoreError> {
        let stored = self.read_block(block)?;
        match &self.storage {
            Storage::Raw { .. } => Ok(stored),
            Storage::Compressed(c) => {
                let range = self.header.block_range(block);
                compress::unpack_block(&context.index(self.material()), context, c, range, &stored, block)
                    .map_err(|cause| StoreError::Format { path: self.path.clone(), cause })
            }
        }
    }
}

/// What recomputing values needs: the rules, their wins in one ply, and
/// the indexes.
pub struct Context {
    pub rules: Rules,
    pub wins: WinsInOne,
    indexes: Vec<(Material, std::sync::Arc<MaterialIndex>)>,
}

impl Context {
    pub fn new(rules: Rules, max_per_side: usize) -> Context {
        let indexes = Material::all_up_to(max_per_side)
            .into_iter()
            .map(|m| (m, std::sync::Arc::new(MaterialIndex::new(m))))
            .collect();
        Context { rules, wins: WinsInOne::new(&rules.cards), indexes }
    }

    /// # Panics
    /// If the material is bigger than the table.
    pub fn index(&self, material: Material) -> std::sync::Arc<MaterialIndex> {
        let found = self.indexes.iter().find(|(m, _)| *m == material);
        found.map(|(_, index)| index.clone()).expect("material of the table")
    }
}

/// Every shard of a table directory, opened and checked to belong together.
pub struct TableFiles {
    pub rules: Rules,
    pub max_per_side: usize,
    /// One per material, sorted by material.
    pub shards: Vec<ShardFile>,
}

impl TableFiles {
    /// Opens every shard of `dir` (raw `.onitb` or compressed `.onitbz`,
    /// one per material) and checks that they form one complete table.
    /// Reads headers only.
    pub fn open(dir: &Path) -> Result<TableFiles, StoreError> {
        let mut paths: Vec<(Material, PathBuf)> = Vec::new();
        for entry in fs::read_dir(dir).map_err(io_error("read table directory", dir))? {
            let entry = entry.map_err(io_error("read table directory", dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if !crate::store::is_shard_name(&name) {
                continue;
            }
            let material = material_of_name(&name).ok_or_else(|| StoreError::ShardName(entry.path()))?;
            if let Some((_, other)) = paths.iter().find(|(m, _)| *m == material) {
                return Err(StoreError::Duplicate { path: entry.path(), other: other.clone() });
            }
            paths.push((material, entry.path()));
        }
        paths.sort();
        let Some((_, first_path)) = paths.first().cloned() else {
            return Err(StoreError::NoTable(dir.to_path_buf()));
        };
        let first = ShardFile::open(&first_path)?;
        let max_per_side = first.header.max_per_side as usize;
        for material in Material::all_up_to(max_per_side) {
            if !paths.iter().any(|(m, _)| *m == material) {
                let name = if first.is_compressed() { compressed_shard_name(material) } else { shard_name(material) };
                return Err(StoreError::MissingShard { path: dir.join(name), men: 2 * max_per_side });
            }
        }
        let mut shards = Vec::with_capacity(paths.len());
        for (material, path) in paths {
            let shard = ShardFile::open(&path)?;
            if shard.header.material != material {
                return Err(StoreError::MaterialMismatch { path, found: shard.header.material });
            }
            let what = if shard.header.max_per_side != first.header.max_per_side {
                Some("table size")
            } else if shard.header.no_move != first.header.no_move {
                Some("no-move rule")
            } else if shard.header.cards != first.header.cards {
                Some("cards")
            } else if shard.content() != first.content() {
                Some("content (values or win/draw/loss only)")
            } else {
                None
            };
            if let Some(what) = what {
                return Err(StoreError::Mismatch { path, other: first_path, what });
            }
            shards.push(shard);
        }
        let rules = first.header.rules().map_err(|cause| StoreError::Format { path: first_path, cause })?;
        Ok(TableFiles { rules, max_per_side, shards })
    }

    /// The shard of `material`, if the table has it.
    pub fn shard(&self, material: Material) -> Option<&ShardFile> {
        self.shards.iter().find(|s| s.material() == material)
    }

    /// Statistics of the whole table and of each material, read block by
    /// block (never a whole shard in memory).
    pub fn stats(&self) -> Result<(Stats, Vec<(Material, Stats)>), StoreError> {
        let context = Context::new(self.rules, self.max_per_side);
        let mut per = Vec::with_capacity(self.shards.len());
        for shard in &self.shards {
            if shard.content() != Content::Values {
                return Err(StoreError::Format { path: shard.path.clone(), cause: FormatError::WdlOnly });
            }
            let mut stats = Stats::default();
            for block in 0..shard.block_count() {
                // Blocks hold whole words: BLOCK_BYTES is even.
                let values = shard.read_values(block, &context)?;
                stats = Stats::merge(stats, Stats::of_width(shard.header.width, &values));
            }
            per.push((shard.material(), stats));
        }
        let total = per.iter().map(|(_, s)| *s).fold(Stats::default(), Stats::merge);
        Ok((total, per))
    }

    /// Reads every block of every shard into a table in memory, checking
    /// each block and recomputing the recomputable values.
    pub fn load(&self) -> Result<Table, StoreError> {
        let context = Context::new(self.rules, self.max_per_side);
        let mut solved = Vec::with_capacity(self.shards.len());
        for shard in &self.shards {
            if shard.content() != Content::Values {
                let cause = FormatError::WdlOnly;
                return Err(StoreError::Format { path: shard.path.clone(), cause });
            }
            let mut values = Vec::with_capacity(shard.header.values_len() as usize);
            for block in 0..shard.block_count() {
                values.extend_from_slice(&shard.read_values(block, &context)?);
            }
            let index = MaterialIndex::new(shard.material());
            solved.push(SolvedMaterial { index, values, width: shard.header.width });
        }
        Ok(Table::new(self.rules, self.max_per_side, solved))
    }
}
