//! A finished material's values, as the solver hands them on: to later
//! pairs for their captures, to the shard writers, and to a table in memory.
//!
//! Owns how a finished material is held (its value lane in memory, or packed
//! in the work directory, `packed_values`) and how its values are handed
//! out: in chunks of whole groups, in pieces of any size, or loaded whole at
//! a width. Knows nothing of steps, of the schedule or of the shards' byte
//! layouts.

use super::disk::{AlignedBuf, DiskError};
use super::lanes::{LaneLayout, carve_mut};
use super::packed_values::{self, PackedValues};
use super::{IoTotals, SolveError, unpack_groups, value_layout, widen_segment};
use crate::index::{Material, MaterialIndex};
use crate::rules::CARD_STATES;
use crate::table::SolvedMaterial;
use crate::value::ValueWidth;
use rayon::prelude::*;
use std::ops::Range;
use std::path::Path;

/// Value bytes [`FinishedMaterial::for_each_chunk`] unpacks at once where
/// no budget says otherwise: making the whole table in memory, or writing
/// shards without `--mem`.
pub const UNPACK_BATCH_BYTES_DEFAULT: usize = 64 << 20;

/// A finished material: its value lane, in memory or packed in the work
/// directory.
pub struct FinishedMaterial {
    pub(super) index: MaterialIndex,
    pub(super) values_layout: LaneLayout,
    pub(super) values: FinishedValues,
    /// Bytes per state of `values` (see `value::ValueWidth`).
    pub(super) width: ValueWidth,
}

pub(super) enum FinishedValues {
    Resident(Vec<u8>),
    Packed(PackedValues),
}

impl FinishedMaterial {
    pub fn material(&self) -> Material {
        self.index.material
    }

    /// Bytes per state of the values [`Self::for_each_chunk`] hands out.
    pub fn width(&self) -> ValueWidth {
        self.width
    }

    pub fn index(&self) -> &MaterialIndex {
        &self.index
    }

    /// Hands the value bytes, without segment padding and in layout order,
    /// to `sink` a group segment or a batch of them at a time. Packed
    /// values are unpacked a batch of consecutive groups at a time, in
    /// parallel (one zstd stream runs at about 1 GB/s, and a shard writer's
    /// compression would wait on it): at most `batch_bytes` or one group in
    /// memory.
    pub fn for_each_chunk<E: From<SolveError>>(
        &self,
        batch_bytes: usize,
        mut sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let segments: Vec<Range<usize>> = (0..self.index.groups().len())
            .map(|g| {
                let segment = self.values_layout.segment(g);
                segment.start as usize..segment.end as usize
            })
            .collect();
        let packed = match &self.values {
            FinishedValues::Resident(values) => {
                return segments.into_iter().try_for_each(|segment| sink(&values[segment]));
            }
            FinishedValues::Packed(packed) => packed,
        };
        // One buffer for every batch, carved into its groups' segments.
        let largest = segments.iter().map(|s| s.len()).max().unwrap_or(0);
        let total: usize = segments.iter().map(|s| s.len()).sum();
        let mut buffer = vec![0u8; batch_bytes.max(largest).min(total)];
        let mut first = 0;
        while first < segments.len() {
            let mut end = first + 1;
            let mut bytes = segments[first].len();
            while end < segments.len() && bytes + segments[end].len() <= batch_bytes {
                bytes += segments[end].len();
                end += 1;
            }
            let in_batch = segments[first..end].iter().scan(0, |at, segment| {
                *at += segment.len();
                Some(*at - segment.len()..*at)
            });
            carve_mut(&mut buffer[..bytes], in_batch)
                .par_iter_mut()
                .zip(first..end)
                .try_for_each(|(slice, g)| packed.read_group(g, slice))
                .map_err(SolveError::from)?;
            sink(&buffer[..bytes])?;
            first = end;
        }
        Ok(())
    }

    /// Hands the value bytes, in layout order, to `sink` in pieces of
    /// exactly `piece_bytes` (the last one the rest), on this thread, through
    /// one buffer of that size: what a writer beside a running solve may
    /// hold, whatever the groups' sizes (a 4v4 group's values are 96 MB).
    pub fn for_each_piece<E: From<SolveError>>(
        &self,
        piece_bytes: usize,
        mut sink: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        assert!(piece_bytes > 0, "pieces hold bytes");
        let total: u64 =
            (0..self.index.groups().len()).map(|g| self.values_layout.segment(g)).map(|s| s.end - s.start).sum();
        let mut piece = vec![0u8; piece_bytes.min(total as usize).max(1)];
        let mut filled = 0;
        for g in 0..self.index.groups().len() {
            match &self.values {
                FinishedValues::Resident(values) => {
                    let segment = self.values_layout.segment(g);
                    let mut rest = &values[segment.start as usize..segment.end as usize];
                    while !rest.is_empty() {
                        let take = rest.len().min(piece.len() - filled);
                        piece[filled..filled + take].copy_from_slice(&rest[..take]);
                        (filled, rest) = (filled + take, &rest[take..]);
                        if filled == piece.len() {
                            sink(&piece)?;
                            filled = 0;
                        }
                    }
                }
                FinishedValues::Packed(packed) => {
                    packed.read_group_pieces(g, (&mut piece, &mut filled), &mut sink, |e| SolveError::from(e).into())?
                }
            }
        }
        if filled > 0 { sink(&piece[..filled]) } else { Ok(()) }
    }

    /// A material an earlier pair of this run (or an earlier run) finished,
    /// opened again from its packed values in the work directory `dir`:
    /// a handle of its own, for reading beside the solve.
    pub fn open(dir: &Path, material: Material) -> Result<FinishedMaterial, SolveError> {
        open_finished(dir, material)
    }

    pub(super) fn is_packed(&self) -> bool {
        matches!(self.values, FinishedValues::Packed(_))
    }

    /// The values in memory of their own, at `width` (value bytes are
    /// widened for a pair solved in words; words are never narrowed): what
    /// a resident pair reads its captures from. Counts what is read from
    /// packed values in `io`.
    pub(super) fn loaded(&self, width: ValueWidth, io: &mut IoTotals) -> Result<(LaneLayout, AlignedBuf), SolveError> {
        let layout = value_layout(&self.index, width);
        let len = layout.total_bytes() as usize;
        let mut buffer = AlignedBuf::zeroed(len)?;
        let groups: Vec<usize> = (0..self.index.groups().len()).collect();
        if let FinishedValues::Packed(packed) = &self.values {
            io.bytes_read += packed.packed_bytes(groups.iter().copied());
        }
        match (&self.values, self.width == width) {
            (FinishedValues::Packed(packed), true) => {
                unpack_groups(packed, &layout, (&groups, 0), &mut buffer.bytes_mut()[..len])?;
            }
            (_, same) => {
                assert!(!same && width == ValueWidth::Word, "captured values are widened, never narrowed");
                // Chunks hold whole groups' segments, in group order.
                let mut groups = groups.into_iter();
                self.for_each_chunk(UNPACK_BATCH_BYTES_DEFAULT, |mut chunk| {
                    while !chunk.is_empty() {
                        let g = groups.next().expect("chunks hold the material's groups");
                        let (from, to) = (self.values_layout.segment(g), layout.segment(g));
                        let (bytes, rest) = chunk.split_at((from.end - from.start) as usize);
                        widen_segment(bytes, &mut buffer.bytes_mut()[to.start as usize..to.end as usize]);
                        chunk = rest;
                    }
                    Ok::<_, SolveError>(())
                })?;
            }
        }
        Ok((layout, buffer))
    }

    pub(super) fn into_solved(self) -> Result<SolvedMaterial, SolveError> {
        let mut values = Vec::with_capacity(self.index.layouts() as usize * CARD_STATES);
        self.for_each_chunk(UNPACK_BATCH_BYTES_DEFAULT, |chunk| {
            values.extend_from_slice(chunk);
            Ok::<_, SolveError>(())
        })?;
        Ok(SolvedMaterial { index: self.index, values, width: self.width })
    }
}

/// A material finished by an earlier run: its packed values in the work dir.
pub(super) fn open_finished(dir: &Path, material: Material) -> Result<FinishedMaterial, SolveError> {
    let index = MaterialIndex::new(material);
    let path = packed_values::packed_path(dir, material);
    let per_layout = PackedValues::bytes_per_layout(&path)?;
    let width = [ValueWidth::Byte, ValueWidth::Word]
        .into_iter()
        .find(|w| (CARD_STATES * w.bytes()) as u64 == per_layout)
        .ok_or_else(|| DiskError::Damaged { path: path.clone(), what: "packed with an unknown value width" })?;
    let values_layout = LaneLayout::new(&index, per_layout);
    let packed = PackedValues::open(&path, &values_layout)?;
    Ok(FinishedMaterial { index, values_layout, values: FinishedValues::Packed(packed), width })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::Rules;
    use crate::solver::{SolveConfig, solve_with};

    /// A finished material handed over in pieces of any size, resident or
    /// packed, is its values as handed over in batches of groups.
    #[test]
    fn finished_values_in_pieces_are_those_in_batches() {
        let rules = Rules { cards: crate::rules::CardSet::default_set(), no_move: crate::rules::NoMoveRule::Pass };
        let dir = tempfile::tempdir().unwrap();
        let packed = SolveConfig { work_dir: Some(dir.path().join("work")), ..SolveConfig::default() };
        for config in [SolveConfig::default(), packed] {
            let solved = solve_with(&rules, 2, &config, &|_| {}).unwrap();
            for finished in &solved.materials {
                let mut batches = Vec::new();
                finished
                    .for_each_chunk(1 << 20, |chunk| {
                        batches.extend_from_slice(chunk);
                        Ok::<_, SolveError>(())
                    })
                    .unwrap();
                for piece_bytes in [1, 4095, 1 << 20, batches.len(), batches.len() + 1] {
                    let mut pieces = Vec::new();
                    let mut lens = Vec::new();
                    finished
                        .for_each_piece(piece_bytes, |piece| {
                            lens.push(piece.len());
                            pieces.extend_from_slice(piece);
                            Ok::<_, SolveError>(())
                        })
                        .unwrap();
                    assert!(pieces == batches, "{} in {piece_bytes}-byte pieces", finished.material());
                    assert!(lens[..lens.len() - 1].iter().all(|&n| n == piece_bytes), "whole pieces but the last");
                }
            }
        }
    }
}
