//! Finishing a solved pair's material: undecided states become draws, and
//! the value bytes are made, in memory from the planes, or streamed from the
//! planes and the decision log and packed into the work directory.
//!
//! Owns the order finishing takes a streamed material's batches in, the
//! pieces its workers share, and the reading ahead of the next batch; the
//! per-layout arithmetic is `kernel`'s, the log's bytes `decision_log`'s and
//! the packed file's `packed_values`'. Runs once a pair's steps are done and
//! touches no other material.

use super::disk::{AlignedBuf, DiskIo};
use super::kernel::{self, MoveTable, Unit};
use super::lanes::{Lane, SegmentMap, carve_mut};
use super::packed_values::PackedWriter;
use super::window::{OwnBuffers, Packed, PlaneLoad, ValueSegments, Window};
use super::{
    IoTotals, Own, Progress, SolveError, Storage, Work, narrow_segment, own_resident, pair_mut, plane_span,
    relaid_values, schedule, value_span,
};
use crate::rules::CARD_STATES;
use crate::value::{Value, ValueWidth};
use rayon::prelude::*;
use std::ops::Range;

/// How far ahead of the entry being applied finishing asks for a streamed
/// pair's value bytes (about 68 one-byte layouts).
const LOG_APPLY_AHEAD_BYTES: usize = 2048;

/// Runs `finish(g, won, lost, values)` (`kernel::finish`: undecided
/// states become draws) on each resident group's planes and value bytes,
/// groups in parallel.
fn run_finish(groups: &[usize], own: Own, finish: impl Fn(usize, &[u32], &[u32], &mut [u8]) + Sync) {
    let values = carve_mut(own.values, groups.iter().map(|&g| own.value_map.elements(g)));
    let (won, lost) = (&*own.won, &*own.lost);
    groups.par_iter().zip(values).for_each(|(&g, values)| {
        let r = own.plane_map.elements(g);
        finish(g, &won[r.clone()], &lost[r], values);
    });
}

/// Undecided states become draws. Streamed, this is where the value bytes
/// are first made: from the planes (holes, initialisation's decisions,
/// draws), then the decision log over them, and packed into the work
/// directory (`packed_values`) a batch at a time.
pub(super) fn finish(
    moves: &MoveTable,
    work: &mut Work,
    window: Option<(&mut Window, &mut DiskIo)>,
    narrow: bool,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(), SolveError> {
    let all: Vec<usize> = (0..work.index.groups().len()).collect();
    match window {
        None => {
            let Work { index, planes, values, width, storage, .. } = work;
            let (pm, vm) = (plane_span(planes), value_span(values));
            let Storage::Resident(lanes) = storage else { unreachable!("no window: resident") };
            let (p, q) = (index.material.mover as usize, index.material.opponent as usize);
            let groups = index.groups();
            run_finish(&all, own_resident(lanes, *width, &pm, &vm), |g, won, lost, values| {
                kernel::finish(won, lost, *width, values);
                // Then the images' bytes, which the steps left to this,
                // while the group's bytes are in the cache.
                let unit = Unit { group: &groups[g], p, q, start: 0, end: groups[g].layouts / (p * q) as u64 };
                kernel::mirror_values(moves, unit, *width, values);
            });
            if narrow
                && *width == ValueWidth::Word
                && let Some((bytes_layout, bytes)) =
                    relaid_values(index, values, &lanes.values, ValueWidth::Byte, narrow_segment)
            {
                (*values, lanes.values, *width) = (bytes_layout, bytes, ValueWidth::Byte);
            }
        }
        Some((window, disk)) => {
            // Its values are the depths of the steps that decided them (and
            // draws, wins in 1, losses in 0): if no step deeper than a byte
            // holds decided anything, they are finished in bytes.
            let deepest = work.files().log().deepest_decided_plies();
            if narrow && work.width == ValueWidth::Word && deepest <= ValueWidth::Byte.max_loss_plies() + 1 {
                (work.values, work.width) = (work.values_at(ValueWidth::Byte), ValueWidth::Byte);
            }
            // Batches in the order the steps visited groups, so that each
            // step's part of the decision log is read front to back.
            let batches: Vec<Vec<usize>> = (schedule::opponent_slices(&work.index).into_iter())
                .flat_map(|(_, groups)| window.batches(work, &groups))
                .collect();
            let mut rank = vec![0; work.index.groups().len()];
            for (r, &g) in batches.iter().flatten().enumerate() {
                rank[g] = r;
            }
            let Storage::OnDisk(files) = &work.storage else { unreachable!("streamed") };
            files.release_for_finishing()?;
            // Finishing reads no `capture`, compacted or not, and
            // its peak is the table's: give the flags back.
            work.solved = None;
            let dir = files.dir().to_path_buf();
            let mut packer = PackedWriter::create(&dir, work.index.material, &work.values, work.readers)?;
            // No values exist yet: every byte comes from the planes, then
            // the log. A sparse group's planes are its dense segments with
            // its records over them. Nothing reads `fresh` or `capture`:
            // they are left as they were, not zeroed.
            let lanes = &[Lane::Won, Lane::Lost, Lane::SparseWon, Lane::SparseRest][..];
            let load = (lanes, PlaneLoad::Left, ValueSegments::Untouched);
            let stages = window.owns.len();
            let Window { owns, slices, io } = &mut *window;
            let mut loaded = match batches.first() {
                Some(batch) => Some(owns[0].load(disk, work, batch, load, io)?),
                None => None,
            };
            // The other window's value buffer while it is lent to the
            // packer (an empty one in between).
            let mut lent = AlignedBuf::zeroed(0)?;
            for (k, batch) in batches.iter().enumerate() {
                let maps = loaded.take().expect("every batch is loaded before it is finished");
                let w = k % stages;
                // With two windows, the next batch is read into the other
                // while this one is finished; its value buffer is lent to
                // the packer meanwhile (loading leaves values alone).
                let (own, mut other) = match owns.as_mut_slice() {
                    [only] => (only, None),
                    pair => {
                        let (now, other) = pair_mut(pair, w);
                        (now, Some(other))
                    }
                };
                let two = other.is_some();
                if let Some(other) = other.as_deref_mut() {
                    other.swap_values(&mut lent);
                }
                let mut other_io = IoTotals::default();
                let next = batches.get(k + 1);
                let finished = std::thread::scope(|scope| {
                    let loading = (other.as_deref_mut().zip(next))
                        .map(|(other, next)| scope.spawn(|| other.load(disk, work, next, load, &mut other_io)));
                    let scratch: Vec<&mut [u8]> = (two.then(|| lent.bytes_mut()).into_iter())
                        .chain(slices.iter_mut().map(|s| s.bytes_mut()))
                        .collect();
                    let finished = finish_batch(work, batch, (&rank, own, maps), scratch, &mut packer);
                    let loaded = loading.map(|l| l.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)));
                    (finished, loaded.transpose())
                });
                if let Some(other) = other {
                    other.swap_values(&mut lent);
                }
                let (frame_bytes, loaded_next) = (finished.0?, finished.1?);
                io.bytes_read += other_io.bytes_read;
                io.bytes_written += other_io.bytes_written;
                // Counted as the batch's frames are written, so finishing's
                // progress lines show its writing as it goes.
                io.bytes_written += frame_bytes;
                loaded = match (loaded_next, next) {
                    (Some(maps), _) => Some(maps),
                    (None, Some(next)) => Some(owns[0].load(disk, work, next, load, io)?),
                    (None, None) => None,
                };
                let material = work.index.material;
                progress(Progress::Finishing { material, done: k + 1, batches: batches.len(), io: *io });
            }
            let frame_bytes = packer.frame_bytes();
            let packed = packer.finish(&work.values)?;
            debug_assert_eq!(frame_bytes, packed.packed_bytes(0..work.index.groups().len()));
            disk.drain()?;
        }
    }
    Ok(())
}

/// Layouts of a piece of a streamed batch's finishing: groups larger than
/// this are settled, have the log applied and are packed in pieces of this
/// many layouts (each its own zstd frame), in parallel. As whole-group
/// tasks, a batch's largest group kept one worker busy after the other ran
/// out of groups: at 8 men 4v4's largest group held a median 27% of its
/// batch's layouts, and all of some, and its finishing ran at 1.44 cores;
/// in pieces it took 7 s less of 65 (docs/BENCHMARKS.md, sessions 70 and
/// 71). 2^17 one-byte layouts are 3.75 MiB of values, a frame that packs
/// about as well as a whole group.
#[cfg(not(test))]
const FINISH_PIECE_LAYOUTS: usize = 1 << 17;
/// Unit tests cut groups into pieces of a few placements, so that a small
/// table's groups have several.
#[cfg(test)]
const FINISH_PIECE_LAYOUTS: usize = 64;

/// The pieces of `batch` that finishing settles, applies the log to and
/// packs as tasks, in batch order: (group, its layouts `range` of at most
/// [`FINISH_PIECE_LAYOUTS`]), every group at least one, together all of it.
fn finish_pieces(work: &Work, batch: &[usize]) -> Vec<(usize, Range<usize>)> {
    let mut pieces = Vec::with_capacity(batch.len());
    for &g in batch {
        let layouts = work.index.groups()[g].layouts as usize;
        pieces.push((g, 0..layouts.min(FINISH_PIECE_LAYOUTS)));
        let more = (FINISH_PIECE_LAYOUTS..layouts).step_by(FINISH_PIECE_LAYOUTS);
        pieces.extend(more.map(|start| (g, start..layouts.min(start + FINISH_PIECE_LAYOUTS))));
    }
    pieces
}

/// Finishes one loaded batch of a streamed material in `own`, in pieces
/// ([`finish_pieces`]): its value bytes from its planes (`kernel::settle`),
/// then from the decision log, packed into `packer`'s frames in the
/// `scratch` buffers. `rank`: each
/// group's place in the batches' order. Returns the frame bytes written.
fn finish_batch(
    work: &Work,
    batch: &[usize],
    (rank, own, (pm, vm)): (&[usize], &mut OwnBuffers, (Packed, Packed)),
    scratch: Vec<&mut [u8]>,
    packer: &mut PackedWriter,
) -> Result<u64, SolveError> {
    let width = work.width;
    let layout_bytes = CARD_STATES * width.bytes();
    let pieces = finish_pieces(work, batch);
    // A piece's value bytes, as a range of the window's value buffer.
    let piece_bytes = |(g, layouts): &(usize, Range<usize>)| {
        let group = vm.elements(*g);
        debug_assert_eq!(group.len(), work.index.groups()[*g].layouts as usize * layout_bytes);
        group.start + layouts.start * layout_bytes..group.start + layouts.end * layout_bytes
    };
    {
        let Own { won, lost, values, .. } = own.own(&pm, &vm);
        let (won, lost) = (&*won, &*lost);
        let values = carve_mut(values, pieces.iter().map(piece_bytes));
        pieces.par_iter().zip(values).for_each(|((g, layouts), values)| {
            let planes = pm.elements(*g);
            let r = planes.start + layouts.start..planes.start + layouts.end;
            kernel::settle(&won[r.clone()], &lost[r], width, values);
        });
    }
    let last = batch.iter().map(|&g| rank[g]).max().expect("a batch has groups");
    let values = carve_mut(own.values_mut(), pieces.iter().map(piece_bytes));
    let mut targets: Vec<(usize, usize, &mut [u8])> =
        pieces.iter().zip(values).map(|((g, layouts), values)| (*g, layouts.start, values)).collect();
    work.files().log().apply(
        &mut targets,
        |g| rank[g] > last,
        |values, depth, layout, states| {
            let value = if depth % 2 == 1 { Value::Win(depth) } else { Value::Loss(depth) };
            let n = layout * layout_bytes;
            // A chunk's entries come in layout order, with gaps: ask for
            // the bytes a little ahead, which the blend below loads (its
            // load had been half the samples of applying the log; 4096
            // bytes ahead gained no more; docs/BENCHMARKS.md, session 68).
            if let Some(ahead) = values.get(n + LOG_APPLY_AHEAD_BYTES..) {
                crate::cache_hint::prefetch(ahead);
            }
            let Some(layout_values) = values.get_mut(n..n + layout_bytes) else { return false };
            kernel::set_codes_blended(width, layout_values, states, width.encode(value));
            true
        },
    )?;
    let values = own.values();
    let pieces: Vec<(usize, &[u8])> = pieces.iter().map(|piece| (piece.0, &values[piece_bytes(piece)])).collect();
    let before = packer.frame_bytes();
    packer.put_batch(&pieces, scratch)?;
    Ok(packer.frame_bytes() - before)
}
