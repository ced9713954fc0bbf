//! One step of a pair's material at a depth, and the logging of what a
//! job of it decided.
//!
//! Owns the step's jobs and their order: for a streamed pair, batches of
//! groups read into the windows while the previous job is stored and the
//! next read on a thread of its own; which groups turn sparse or are
//! listed again; and what each job's decisions append to the decision log
//! (`log_decisions`, which initialisation uses too). The per-layout work is
//! `kernel`'s (through `run_step`), the buffers and reads `window`'s, the
//! log's bytes `decision_log`'s.

use super::decision_log::DecisionLog;
use super::disk::DiskIo;
use super::flags::PlacementFlags;
use super::kernel::{MoveTable, StepInput, UnitReport};
use super::lanes::{Lane, SegmentMap, Span, carve_mut};
use super::schedule::{self, MoverSlices};
use super::sparse::{self, Base, Pick};
use super::window::{
    self, DueStates, OwnBuffers, Packed, PlaneLoad, Preparation, ReadSignal, SliceBuffer, SlicePart, StepReads,
    ValueSegments, Window,
};
use super::{
    GroupState, IoTotals, Own, Progress, ReadRegion, SolveError, StepTimes, Storage, UndecidedCount, UnitSpec,
    ValueMode, Work, check_dropped, cpu_time, groups_to_visit, own_resident, pair_mut, pair_views, plane_span, record,
    run_step, step_units, value_span,
};
use crate::rules::{CARD_STATES, Rules};
use rayon::prelude::*;
use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::OnceLock;
use std::time::Instant;

/// Runs one step at `depth` on material `i` of the pair; returns the number
/// of states decided and of groups visited.
pub(super) fn step(
    rules: &Rules,
    moves: &MoveTable,
    works: &mut [Work],
    i: usize,
    depth: u16,
    window: Option<(&mut Window, &mut DiskIo)>,
    progress: &(dyn Fn(Progress) + Sync),
) -> Result<(u64, u64, StepTimes), SolveError> {
    let (this, other) = pair_views(works, i);
    let mut times = StepTimes::default();
    let mut results: Vec<(Vec<UnitSpec>, Vec<UnitReport>)> = Vec::new();
    // A streamed win step reads no dense group's `lost` (see `read` below).
    let mut count = UndecidedCount::Reported;
    match window {
        None => {
            let all: Vec<usize> = (0..this.index.groups().len()).collect();
            let visit = groups_to_visit(this, other.unwrap_or(this), depth, &all);
            let units = step_units(moves, &this.index, &visit);
            let win_step = depth % 2 == 1;
            let Work {
                index, planes, values, width, storage, sides, groups, kept, fresh_placements, solved, open, ..
            } = &mut *this;
            let fresh_placements = &*fresh_placements;
            let landing_fresh = other.map_or(fresh_placements, |o| &o.fresh_placements).as_ref();
            let groups = &*groups;
            let due = |g: usize| groups[g].events.contains(depth);
            let (pm, vm) = (plane_span(planes), value_span(values));
            let Storage::Resident(lanes) = storage else { unreachable!("no window: resident") };
            let target_sides = other.map_or(&*sides, |o| &o.sides);
            let input = StepInput {
                rules,
                moves,
                depth_plies: depth,
                target_sides,
                own_sides: sides,
                kept: kept.as_ref(),
                // Set by `run_step`, which knows the landing lane.
                landing_lane: &[],
                landing_blocks: landing_fresh.filter(|_| kept.is_some() && win_step),
                own_fresh: fresh_placements.as_ref().filter(|_| kept.is_some() && !win_step),
                mirror: moves.mirror.as_ref(),
            };
            let target_map = other.map(|o| plane_span(&o.planes));
            let landing_in = other.zip(target_map.as_ref()).map(|(o, map)| {
                let Storage::Resident(target) = &o.storage else { unreachable!("pairs are resident together") };
                let data = if depth % 2 == 1 { &target.fresh[..] } else { &target.won[..] };
                (&o.index, ReadRegion { map: map as &dyn SegmentMap, data })
            });
            let own = Own { live: open.as_ref(), ..own_resident(lanes, *width, &pm, &vm) };
            let (reports, _) = run_step(&input, index, &units, own, landing_in, &due, ValueMode::Written(*width));
            if cfg!(debug_assertions) {
                check_dropped(index, planes, (solved.as_ref(), open.as_ref()), lanes);
            }
            results.push((units, reports));
        }
        Some((window, disk)) => {
            let this_ref: &Work = this;
            let target = other.unwrap_or(this_ref);
            // Value bytes are neither read nor written: captures due come
            // from the capture schedule, decisions go to the decision log.
            let due = |g: usize| this_ref.groups[g].events.contains(depth);
            let listed = |g: usize| this_ref.groups[g].sparse_layouts > 0;
            let mode = ValueMode::Logged { due: &due, sparse: &listed };
            this_ref.files().log().begin_step(depth);
            let target_slices = MoverSlices::new(&target.index);
            let landing_lane = if depth % 2 == 1 { Lane::Fresh } else { Lane::Won };
            // A win step looks at `capture` only in groups with a capture
            // event due; a loss step looks at every `capture` bit (it holds
            // losses back). A loss step rewrites
            // every layout's `fresh`, so it need not read it, and a win step
            // uses it for its new wins. `capture` changes only where an
            // event is due.
            // A sparse group's planes are its records (all of them); one
            // that relists reads its dense `won` and `lost` too.
            let win_step = depth % 2 == 1;
            let sparse = |g: usize| this_ref.groups[g].sparse_layouts > 0;
            let relisting = |g: usize| win_step && sparse::relists(this_ref.groups[g]);
            // The record lane a step writes for a group that stays listed.
            let step_records = if win_step { Lane::SparseWon } else { Lane::SparseRest };
            // A win step does not read a dense group's `lost`: its new wins
            // never fall on a lost state, so it takes undecided as `!won`
            // (`lost` zeroed; see DESIGN.md, "Win steps without `lost`").
            let read = |lane: Lane, g: usize| match lane {
                Lane::Won if !sparse(g) || relisting(g) => PlaneLoad::Read,
                Lane::Lost if (!sparse(g) && !win_step) || relisting(g) => PlaneLoad::Read,
                Lane::Capture if !sparse(g) && (!win_step || due(g)) => PlaneLoad::Read,
                Lane::SparseWon | Lane::SparseRest => PlaneLoad::Read,
                // Nothing in a win step reads or stores a dense group's
                // `capture` where no event is due (a relisting group's is
                // laid from its records).
                Lane::Capture if win_step && !sparse(g) => PlaneLoad::Left,
                _ => PlaneLoad::Zeroed,
            };
            let input = StepInput {
                rules,
                moves,
                depth_plies: depth,
                target_sides: &target.sides,
                own_sides: &this_ref.sides,
                kept: None,
                landing_lane: &[],
                landing_blocks: None,
                own_fresh: None,
                mirror: moves.mirror.as_ref(),
            };
            // The step's jobs: batches of groups to visit, each with its
            // landing slice (a range of the mirror's groups).
            let mut jobs: Vec<(Range<usize>, Vec<usize>)> = Vec::new();
            for (opponent_counts, groups) in schedule::opponent_slices(&this_ref.index) {
                let visit = groups_to_visit(this_ref, target, depth, &groups);
                if visit.is_empty() {
                    continue;
                }
                let range = target_slices.get(&schedule::landing_slice_counts(&opponent_counts, None));
                jobs.extend(window.batches(this_ref, &visit).into_iter().map(|batch| (range.clone(), batch)));
            }
            // A win step's landing `fresh` is the mirror's last loss step's
            // chunks in its decision log (no `fresh` lane is stored).
            let landing_log = if win_step { Some(target.files().log().landing_chunks()?) } else { None };
            let reads = StepReads {
                work: this_ref,
                lanes: &read,
                values: ValueSegments::Untouched,
                landing: &target.planes,
                landing_log: landing_log.as_ref(),
                landing_holes: &target.landing_holes,
                file_of: |g| target.files().read_file(landing_lane, g),
            };
            let from_log = (&target.planes, landing_log.as_ref());
            let stages = window.owns.len();
            // Job k computes in window k % stages; its slice buffer is the
            // previous job's if the slice is the same, else the other one.
            let mut slice_of: Vec<usize> = Vec::with_capacity(jobs.len());
            for k in 0..jobs.len() {
                slice_of.push(match k {
                    0 => 0,
                    _ if jobs[k - 1].0 == jobs[k].0 => slice_of[k - 1],
                    _ => (slice_of[k - 1] + 1) % stages,
                });
            }
            // With two, the other slice buffer is free from a run's first
            // job on, so each job of a run of jobs with the same slice
            // reads its share of the next run's slice into it: (that run's
            // first job, the part). Read with the run's last job alone,
            // the slice made the workers wait (docs/BENCHMARKS.md).
            let mut ahead: Vec<Option<(usize, SlicePart)>> = vec![None; jobs.len()];
            let mut first = 0;
            while stages == 2 && first < jobs.len() {
                let next = (first..jobs.len()).find(|&j| jobs[j].0 != jobs[first].0).unwrap_or(jobs.len());
                if next < jobs.len() {
                    let parts = SlicePart::split(jobs[next].0.clone(), &target.planes, next - first);
                    for (k, part) in (first..next).zip(parts) {
                        ahead[k] = Some((next, part));
                    }
                }
                first = next;
            }
            let Window { owns, slices, io } = &mut *window;
            // The slice buffers, each with the flags of its blocks that the
            // kernels read: a win step's that hold a `fresh` loss (at 6
            // men, 55% of the blocks a streamed win step lists hold none),
            // a loss step's that hold a state not won (late, nearly every
            // group of the mirror is holes). The other blocks are neither
            // laid nor read: laying them was a pass over the whole mirror
            // plane per step.
            let block_words = (target.index.material.mover * target.index.material.opponent) as usize;
            let mut landing_blocks: Vec<PlacementFlags> =
                slices.iter().map(|buffer| PlacementFlags::all_clear(buffer.len() / 4, block_words)).collect();
            // The due states of a step's groups with a capture event now.
            let due_states = || DueStates { schedule: this_ref.files().schedule(), depth_plies: depth, groups: &due };
            // Reads job k into `own` (and a landing slice, a range of the
            // mirror's groups, into its buffer, if given), and the capture
            // schedule's chunks of its due states: the job's maps, and
            // where the slice was put. What it read is laid out after
            // (`OwnBuffers::prepare`, or shared with the workers below).
            let load = |own: &mut OwnBuffers,
                        slice: Option<(SliceBuffer, SlicePart)>,
                        k: usize,
                        disk: &mut DiskIo,
                        io: &mut IoTotals|
             -> Result<LoadedJob, SolveError> {
                let (buffer, part) = slice.unzip();
                let (mut buffer, mut blocks) = buffer.unzip();
                let groups = part.as_ref().map(|p| p.part.clone());
                let slice = buffer.as_deref_mut().zip(blocks.as_deref_mut()).zip(part);
                let (maps, at, (mut requests, fill)) = reads.plan(own, slice, &jobs[k].1, io);
                window::fetch(disk, (&mut requests, fill), from_log, &mut io.bytes_read)?;
                drop(requests);
                // A loss step's landing `won` of sparse groups is their
                // dense segment with their records laid over it.
                if let (false, Some(buffer), Some(blocks), Some(groups), Some((start, len))) =
                    (win_step, buffer, blocks, groups, at)
                {
                    let words = &mut buffer.words_mut()[..len / 4];
                    own.patch_landing_won(disk, target, groups, (start, words, blocks), io)?;
                }
                io.bytes_read += own.read_due(this_ref, &maps.1, &due_states())?;
                Ok((maps, at))
            };
            // Lays out a loaded job on the workers (the compacted segments,
            // the sparse groups' records, the due states): the first job,
            // and each job with one window.
            let base = |g: usize| if relisting(g) { Base::Dense } else { Base::Holes { block_words } };
            let prepare = |own: &mut OwnBuffers, maps: (&Packed, &Packed)| {
                own.prepare(this_ref, maps, Some(&base), Some(due_states()))
            };
            // Queues the writes of what a computed job changed. (`fresh` is
            // not written at all: a loss step's new losses are its chunks in
            // the decision log, which the next win step reads.)
            // A sparse group stores the records the step writes (a win
            // step `SparseWon`, a loss step `SparseRest`). A group turning
            // sparse in a loss step stores its dense `lost` (its dense
            // `won` is current already) and all its records; one relisting
            // in a win step, its dense `won` and `lost` and all its records
            // (none if it has nothing left undecided: it is dense again).
            let store = |own: &OwnBuffers, (pm, changed, turning): &Computed, disk: &mut DiskIo, io: &mut IoTotals| {
                let is_turning = |g: usize| turns(turning, g);
                let dense = |g: usize| changed.contains(&g) && !sparse(g);
                let staying_dense = |g: usize| dense(g) && !is_turning(g);
                if win_step {
                    own.store(disk, this_ref, pm, &[Lane::Won], dense, io)?;
                    own.store(disk, this_ref, pm, &[Lane::Won, Lane::Lost], is_turning, io)?;
                } else {
                    own.store(disk, this_ref, pm, &[Lane::Lost], dense, io)?;
                    let capture_changed = |g| staying_dense(g) && due(g);
                    own.store(disk, this_ref, pm, &[Lane::Capture], capture_changed, io)?;
                }
                // The records were gathered by `gather_sparse`.
                let listed: Vec<(usize, u32)> = changed
                    .iter()
                    .filter(|&&g| sparse(g) && !is_turning(g))
                    .map(|&g| (g, this_ref.groups[g].sparse_layouts))
                    .collect();
                own.store_sparse(disk, this_ref, pm, &listed, &[step_records], io)?;
                let turning: Vec<(usize, u32)> = turning.iter().copied().filter(|&(_, n)| n > 0).collect();
                own.store_sparse(disk, this_ref, pm, &turning, &[Lane::SparseWon, Lane::SparseRest], io)?;
                Ok::<(), SolveError>(())
            };
            // Groups that turn sparse or relist in this step, (group,
            // records): they are stored so in the step, and are so from the
            // next on.
            let mut turned: Vec<(usize, u32)> = Vec::new();
            // (groups, (lane byte offset, length)) of the whole slice each
            // buffer holds, none while one is read in parts: a job computed
            // against another slice would decide wrongly.
            let mut slice_held = vec![None; stages];
            // Maps of the job loaded next.
            let mut loaded: Option<(Packed, Packed)> = None;
            // With two windows, the job computed last and not yet stored
            // (in the window the next job is read into).
            let mut unstored: Option<Computed> = None;
            if !jobs.is_empty() {
                let started = Instant::now();
                let slice = SlicePart::whole(jobs[0].0.clone());
                let buffer = (&mut slices[0], &mut landing_blocks[0]);
                let (maps, at) = load(&mut owns[0], Some((buffer, slice)), 0, disk, io)?;
                prepare(&mut owns[0], (&maps.0, &maps.1))?;
                times.io_in_turn(started);
                slice_held[0] = Some((jobs[0].0.clone(), at.expect("a slice was planned")));
                loaded = Some(maps);
            }
            // What a computed job leaves for storing, worked out in its
            // window once its kernels have run: the log gets its decisions
            // (encoded by the workers in parallel: on the other thread,
            // alone, it took longer than the job's kernels at 8 men), and
            // the sparse groups' records to store are gathered.
            let settle_job = |own: &mut OwnBuffers,
                              batch: &[usize],
                              (pm, vm): (Packed, Packed),
                              (units, reports, early): (&[UnitSpec], &[UnitReport], &[(usize, EncodedParts)])|
             -> Result<Computed, SolveError> {
                let deciding = deciding_groups(units, reports);
                let ((fresh, live), scratch) = own.decided_and_scratch();
                log_decisions(this_ref, &deciding, (&pm, &vm), ((fresh, Some(live)), scratch), early)?;
                // Groups the step left as they were need no writing.
                let changed: BTreeSet<usize> =
                    units.iter().zip(reports).filter(|(_, r)| r.modified).map(|(u, _)| u.0).collect();
                let turning = if win_step {
                    relisted(this_ref, own, &pm, batch)
                } else {
                    turning_sparse(this_ref, own, &pm, &changed)
                };
                // The records to store, gathered by the workers (on the
                // thread that stores, alone, this was a scan of every
                // layout of a sparse group it changed).
                let mut records: Vec<(usize, Pick, u32)> = changed
                    .iter()
                    .filter(|&&g| sparse(g) && !turns(&turning, g))
                    .map(|&g| (g, Pick::Listed, this_ref.groups[g].sparse_layouts))
                    .chain(turning.iter().filter(|t| t.1 > 0).map(|&(g, n)| (g, Pick::Undecided, n)))
                    .collect();
                records.sort_unstable_by_key(|r| r.0);
                own.gather_sparse(this_ref, &pm, &records, step_records);
                Ok((pm, changed, turning))
            };
            for k in 0..jobs.len() {
                let (pm, vm) = loaded.take().expect("every job is loaded before it runs");
                let units = step_units(moves, &this_ref.index, &jobs[k].1);
                let (w, sb) = (k % stages, slice_of[k]);
                let held = slice_held[sb].as_ref().filter(|held| held.0 == jobs[k].0);
                let (first_byte, len) = held.expect("the job's slice buffer holds its slice").1;
                let map = Span { layout: &target.planes, first_byte, element_bytes: 4 };
                let (blocks_now, blocks_other) = match landing_blocks.as_mut_slice() {
                    [only] => (&*only, None),
                    pair => {
                        let (now, other) = pair_mut(pair, sb);
                        (&*now, Some(other))
                    }
                };
                let input = StepInput { landing_blocks: Some(blocks_now), ..input };
                let (reports, computed) = if stages == 2 {
                    // While the workers compute job k in one window, a thread
                    // of its own stores job k - 1 from the other, then reads
                    // job k + 1 into it (and its part of the next run's
                    // slice into the other slice buffer). Job k is settled as soon
                    // as it is computed, while that thread may still be
                    // reading: the two touch different windows, and settling
                    // writes the log through its own file, not `disk`.
                    let (own_now, own_other) = pair_mut(owns, w);
                    let (slice_now, slice_other) = pair_mut(slices, sb);
                    let ahead = ahead[k].clone();
                    let blocks_other = blocks_other.expect("two windows have two slice buffers");
                    let new_slice = ahead.as_ref().map(|(_, part)| ((slice_other, blocks_other), part.clone()));
                    let mut other_io = IoTotals::default();
                    let region = ReadRegion { map: &map, data: &slice_now.words()[..len / 4] };
                    let previous = unstored.take();
                    // Job k + 1 laid out (`OwnBuffers::prepare`) by that
                    // thread once it is read, and by the workers too once
                    // job k is settled: so the layout takes the thread's
                    // spare time where it has some (win steps), and the
                    // workers' where the thread would keep them waiting
                    // (loss steps).
                    let next_job: OnceLock<Preparation> = OnceLock::new();
                    let next_read = ReadSignal::default();
                    let (reports, computed, other) = std::thread::scope(|scope| {
                        let other = scope.spawn(|| {
                            // Whatever happens, the workers wait no longer
                            // once this thread is done.
                            let _done = next_read.on_drop();
                            // Moved in: the next job's layout borrows the
                            // window past this thread.
                            let own_other: &mut OwnBuffers = own_other;
                            let (started, cpu) = (Instant::now(), cpu_time(libc::CLOCK_THREAD_CPUTIME_ID));
                            if let Some(previous) = &previous {
                                store(own_other, previous, disk, &mut other_io)?;
                            }
                            let loaded = (k + 1 < jobs.len())
                                .then(|| load(&mut *own_other, new_slice, k + 1, disk, &mut other_io))
                                .transpose()?;
                            if let Some((maps, _)) = &loaded {
                                let next =
                                    next_job.get_or_init(|| own_other.preparation(this_ref, (&maps.0, &maps.1), true));
                                next_read.signal();
                                next.help(this_ref, Some(&base), Some(&due_states()));
                            }
                            let cpu = cpu_time(libc::CLOCK_THREAD_CPUTIME_ID).saturating_sub(cpu);
                            Ok::<_, SolveError>((loaded, (started.elapsed(), cpu)))
                        });
                        let landing = Some((&target.index, region));
                        let process_cpu = || cpu_time(libc::CLOCK_PROCESS_CPUTIME_ID);
                        let (started, cpu) = (Instant::now(), process_cpu());
                        let (reports, early) =
                            run_step(&input, &this_ref.index, &units, own_now.own(&pm, &vm), landing, &due, mode);
                        let (computed_at, computed_cpu) = (Instant::now(), process_cpu());
                        times.computing += computed_at - started;
                        times.computing_cpu += computed_cpu.saturating_sub(cpu);
                        let computed = settle_job(own_now, &jobs[k].1, (pm, vm), (&units, &reports, &early));
                        let (settled_at, settled_cpu) = (Instant::now(), process_cpu());
                        times.settling += settled_at - computed_at;
                        times.settling_cpu += settled_cpu.saturating_sub(computed_cpu);
                        // Help lay out the next job once it is read
                        // (counted as computing).
                        next_read.wait();
                        let (helping, helping_cpu) = (Instant::now(), process_cpu());
                        if let Some(next) = next_job.get() {
                            next.help_on_workers(this_ref, Some(&base), Some(&due_states()));
                        }
                        let (helped, helped_cpu) = (Instant::now(), process_cpu());
                        times.computing += helped - helping;
                        times.computing_cpu += helped_cpu.saturating_sub(helping_cpu);
                        let other = other.join();
                        times.waiting_for_io += (helping - settled_at) + helped.elapsed();
                        let waiting_cpu =
                            helping_cpu.saturating_sub(settled_cpu) + process_cpu().saturating_sub(helped_cpu);
                        times.waiting_cpu += waiting_cpu;
                        (reports, computed, other)
                    });
                    if let Some(next) = next_job.into_inner() {
                        next.finish()?;
                    }
                    let (loaded_next, (busy, busy_cpu)) =
                        other.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
                    times.storing_and_reading += busy;
                    times.storing_and_reading_cpu += busy_cpu;
                    if let Some((maps, at)) = loaded_next {
                        if let (Some(at), Some((j, part))) = (at, ahead) {
                            // Whole once its last part is read.
                            slice_held[slice_of[j]] = (part.part.end == part.slice.end).then_some((part.slice, at));
                        }
                        loaded = Some(maps);
                    }
                    io.bytes_read += other_io.bytes_read;
                    io.bytes_written += other_io.bytes_written;
                    (reports, computed?)
                } else {
                    let region = ReadRegion { map: &map, data: &slices[sb].words()[..len / 4] };
                    let landing = Some((&target.index, region));
                    let started = Instant::now();
                    let (reports, early) =
                        run_step(&input, &this_ref.index, &units, owns[w].own(&pm, &vm), landing, &due, mode);
                    times.computing += started.elapsed();
                    let started = Instant::now();
                    let computed = settle_job(&mut owns[w], &jobs[k].1, (pm, vm), (&units, &reports, &early))?;
                    times.settling += started.elapsed();
                    (reports, computed)
                };
                turned.extend(&computed.2);
                if stages == 2 {
                    unstored = Some(computed);
                } else {
                    let started = Instant::now();
                    store(&owns[0], &computed, disk, io)?;
                    if k + 1 < jobs.len() {
                        // One window: read the next job only now that this
                        // one is stored.
                        let new_slice = (jobs[k + 1].0 != jobs[k].0).then(|| {
                            ((&mut slices[0], &mut landing_blocks[0]), SlicePart::whole(jobs[k + 1].0.clone()))
                        });
                        let (maps, at) = load(&mut owns[0], new_slice, k + 1, disk, io)?;
                        prepare(&mut owns[0], (&maps.0, &maps.1))?;
                        if let Some(at) = at {
                            slice_held[0] = Some((jobs[k + 1].0.clone(), at));
                        }
                        loaded = Some(maps);
                    }
                    times.io_in_turn(started);
                }
                results.push((units, reports));
                let material = this_ref.index.material;
                progress(Progress::Batch { depth_plies: depth, material, done: k + 1, batches: jobs.len(), io: *io });
            }
            let started = Instant::now();
            if let Some(last) = unstored.take() {
                store(&owns[(jobs.len() - 1) % stages], &last, disk, io)?;
            }
            disk.drain()?;
            times.io_in_turn(started);
            if win_step {
                count = UndecidedCount::LessDecided;
            }
            for (g, listed) in turned {
                this.groups[g].sparse_layouts = listed;
            }
        }
    }
    let (mut decided, mut visited) = (0, 0);
    for (units, reports) in results {
        decided += record(this, &units, &reports, true, count).decided;
        visited += units.iter().map(|u| u.0).collect::<BTreeSet<_>>().len() as u64;
    }
    Ok((decided, visited, times))
}

/// The groups of a material whose layouts not listed in sparse records
/// (every layout, if the group is dense) have no undecided state: the
/// sparse groups and those with nothing undecided. Taken before a depth's
/// steps begin, these are the mirror's loss steps' landing holes: a state
/// lost by then lost at depth d - 2 or earlier, so every state with a move
/// into it won in the win step after, and a loss step looks at the landing
/// `won` only for undecided states. So where a state is decided, `won` may
/// as well read as set, and the dense `won` of these groups (most of the
/// landing bytes once groups are sparse) need not be read; their records
/// are laid over the holes. (Taken after the first material's step of the
/// depth instead, a group of it turning sparse there would hide that
/// step's losses from the second material's loss step.)
pub(super) fn settled_groups(groups: &[GroupState]) -> Vec<bool> {
    groups.iter().map(|g| g.sparse_layouts > 0 || g.undecided == 0).collect()
}

/// Is `g` among the groups of a job that turn sparse or relist
/// ((group, records), increasing)?
fn turns(turning: &[(usize, u32)], g: usize) -> bool {
    turning.binary_search_by_key(&g, |t| t.0).is_ok()
}

/// The groups of a job in which its units decided anything.
pub(super) fn deciding_groups(units: &[UnitSpec], reports: &[UnitReport]) -> Vec<usize> {
    let mut groups: Vec<usize> = units.iter().zip(reports).filter(|(_, r)| r.decided > 0).map(|(u, _)| u.0).collect();
    groups.dedup();
    groups
}

/// Layouts of a group whose decisions are encoded as one task, at most
/// (a larger group is cut into parts of about this many, the last part
/// taking the rest). Whole groups as tasks left a worker idle for 19% of
/// 4v4's encoding (throwaway timers, depths 2-6: 7.2 s of encoding took
/// 4.4 s on two workers), a job's largest group taking most of it. The
/// storing and reading thread takes most of a core left so, and steps
/// settled only 2-4% faster in parts (docs/BENCHMARKS.md, session 47). A
/// part ends a frame early, which at 2^18 layouts costs a few dozen bytes.
#[cfg(not(test))]
const LOG_PART_LAYOUTS: usize = 1 << 18;
/// Unit tests cut groups into parts of a few placements, so that a small
/// table's groups have several.
#[cfg(test)]
const LOG_PART_LAYOUTS: usize = 64;

/// Appends to the decision log of a streamed material what a job of a step
/// decided in `groups` (increasing), group by group: `decided` is the
/// window's plane holding it. Groups that `early` gives were encoded as
/// soon as their kernels had run ([`encode_group`] from `run_step`: (group,
/// parts) with the parts' bytes at the start of the group's value segment).
/// The other groups' chunks are encoded now, in parallel, a large group in
/// parts ([`LOG_PART_LAYOUTS`]), each part into its share of the group's
/// value segment (30 bytes per layout and padded to 4096, free once the
/// step has run; a chunk needs about 8 per layout at most). Then all are
/// appended in order. With `live` (a step's window), only the live
/// placements' words are read: the others' are not the batch's (a dense
/// group's placements are all live, and its parts are read whole).
pub(super) fn log_decisions(
    work: &Work,
    groups: &[usize],
    (plane_map, value_map): (&Packed, &Packed),
    ((decided, live), scratch): ((&[u32], Option<&PlacementFlags>), &mut [u8]),
    early: &[(usize, EncodedParts)],
) -> Result<(), SolveError> {
    let block_words = (work.index.material.mover * work.index.material.opponent) as usize;
    let padded = |g: usize| {
        let start = value_map.elements(g).start;
        start..start + window::padded_len(&work.values, g) as usize
    };
    debug_assert!(early.is_sorted_by_key(|e| e.0), "early groups come in the job's order");
    let regions = carve_mut(scratch, groups.iter().map(|&g| padded(g)));
    // (the group's region, its parts' byte ranges in it and entries).
    let encoded: Vec<(&[u8], EncodedParts)> = regions
        .into_par_iter()
        .zip(groups)
        .map(|(region, &g)| {
            let parts = match early.binary_search_by_key(&g, |e| e.0) {
                Ok(at) => early[at].1.clone(),
                Err(_) => {
                    let range = plane_map.elements(g);
                    debug_assert!(
                        work.groups[g].sparse_layouts > 0
                            || live.is_none_or(|live| live
                                .set_blocks(range.start, range.len() / block_words)
                                .eq(0..range.len() / block_words)),
                        "every placement of a dense group is live"
                    );
                    let live = live.filter(|_| work.groups[g].sparse_layouts > 0).map(|live| (live, range.start));
                    encode_group(&decided[range], block_words, live, region)
                }
            };
            (&*region, parts)
        })
        .collect();
    let mut log = work.files().log();
    for (&g, (region, parts)) in groups.iter().zip(&encoded) {
        let frames: Vec<&[u8]> = parts.iter().map(|(bytes, _)| &region[bytes.clone()]).collect();
        let count = parts.iter().map(|&(_, count)| count).sum();
        log.append_encoded(g, (&frames, count))?;
    }
    Ok(())
}

/// A group's chunk as [`encode_group`] left it: per part, its frames'
/// bytes (a range of the region it was encoded into) and their entries.
pub(super) type EncodedParts = Vec<(Range<usize>, u32)>;

/// Encodes the decisions of one group (`decided`: its words of the plane
/// holding them) into `region`, in parts of about [`LOG_PART_LAYOUTS`]
/// layouts encoded in parallel, each into its share of `region`, which
/// must hold 30 bytes per layout (see [`fits_encoded`]). With `live`
/// (flags and the group's first element in them), only the live
/// placements' words are read. Touches nothing but `region`.
pub(super) fn encode_group(
    decided: &[u32],
    block_words: usize,
    live: Option<(&PlacementFlags, usize)>,
    region: &mut [u8],
) -> EncodedParts {
    let placements = decided.len() / block_words;
    let part_placements = log_part_placements(block_words);
    // (placements, the part's first byte in `region`, its bytes).
    let mut parts: Vec<(Range<usize>, usize, &mut [u8])> = Vec::new();
    let (mut rest, mut start) = (region, 0);
    while placements - start >= 2 * part_placements {
        let (part, after) = rest.split_at_mut(part_placements * block_words * CARD_STATES);
        parts.push((start..start + part_placements, start * block_words * CARD_STATES, part));
        (rest, start) = (after, start + part_placements);
    }
    parts.push((start..placements, start * block_words * CARD_STATES, rest));
    let encode = |(part, first_byte, bytes): (Range<usize>, usize, &mut [u8])| {
        let (len, count) = match live {
            Some((live, origin)) => {
                let first = part.start;
                let runs = live.set_runs(origin + first * block_words, part.len());
                let runs = runs.map(|run| first + run.start..first + run.end);
                DecisionLog::encode(decided, block_words, part.clone(), runs, bytes)
            }
            // Every placement of a dense group is live (`OwnBuffers::prepare`):
            // its words are read as one run, without asking the flags.
            None => DecisionLog::encode(decided, block_words, part.clone(), std::iter::once(part.clone()), bytes),
        };
        (first_byte..first_byte + len, count)
    };
    if parts.len() == 1 { parts.into_iter().map(encode).collect() } else { parts.into_par_iter().map(encode).collect() }
}

/// Placements in a part of a group's chunk ([`LOG_PART_LAYOUTS`] layouts,
/// at least one placement): [`encode_group`] cuts by it and
/// [`fits_encoded`] checks room by it.
fn log_part_placements(block_words: usize) -> usize {
    (LOG_PART_LAYOUTS / block_words).max(1)
}

/// Whether a group's decisions can be encoded into a region of `bytes`
/// holding its `layouts` layouts' value bytes exactly ([`encode_group`],
/// the last part taking the rest): a group of a few layouts may not hold a
/// frame's bound and is encoded in its padded segment later.
pub(super) fn fits_encoded(layouts: usize, block_words: usize, bytes: usize) -> bool {
    let part_layouts = log_part_placements(block_words) * block_words;
    let holds = |layouts: usize| DecisionLog::encoded_bound(layouts) <= layouts * CARD_STATES;
    let whole_parts = layouts >= 2 * part_layouts;
    let last = if whole_parts { part_layouts + layouts % part_layouts } else { layouts };
    bytes >= layouts * CARD_STATES && holds(last) && (!whole_parts || holds(part_layouts))
}

/// A streamed job read into a window: its plane and value maps, and where
/// its landing slice was put (lane byte offset, length) if it was read.
type LoadedJob = ((Packed, Packed), Option<(u64, usize)>);

/// A streamed job computed and not yet stored: its plane map, the groups
/// it changed, and those of them that turn sparse with how many layouts
/// they list (increasing).
type Computed = (Packed, BTreeSet<usize>, Vec<(usize, u32)>);

/// The groups among `changed` (dense ones, computed by a loss step in
/// `own`) that turn sparse, with how many layouts they list.
fn turning_sparse(work: &Work, own: &OwnBuffers, plane_map: &Packed, changed: &BTreeSet<usize>) -> Vec<(usize, u32)> {
    let candidates: Vec<usize> = changed.iter().copied().filter(|&g| work.groups[g].sparse_layouts == 0).collect();
    undecided_layouts_of(own, plane_map, &candidates, |g, listed| {
        sparse::converts(listed, plane_map.elements(g).len() as u64, window::padded_len(&work.planes, g))
    })
}

/// The groups of a win step's job (`batch`, computed in `own`) that
/// relist, with how many layouts they list now (0: none left undecided).
fn relisted(work: &Work, own: &OwnBuffers, plane_map: &Packed, batch: &[usize]) -> Vec<(usize, u32)> {
    let candidates: Vec<usize> = batch.iter().copied().filter(|&g| sparse::relists(work.groups[g])).collect();
    undecided_layouts_of(own, plane_map, &candidates, |g, listed| {
        debug_assert!(listed * sparse::RELIST_SHARE <= work.groups[g].sparse_layouts as u64);
        true
    })
}

/// (group, layouts with an undecided state) of the `groups` computed in
/// `own` for which `keep(group, layouts)` holds, counted in parallel.
fn undecided_layouts_of(
    own: &OwnBuffers,
    plane_map: &Packed,
    groups: &[usize],
    keep: impl Fn(usize, u64) -> bool + Sync,
) -> Vec<(usize, u32)> {
    let (won, lost) = (own.plane(Lane::Won), own.plane(Lane::Lost));
    groups
        .par_iter()
        .filter_map(|&g| {
            let range = plane_map.elements(g);
            let listed = sparse::undecided_layouts(&won[range.clone()], &lost[range]);
            keep(g, listed).then(|| (g, u32::try_from(listed).expect("a group's layouts fit u32")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Material, MaterialIndex};
    use crate::solver::{SolveConfig, solve_with};
    use crate::table::Table;

    /// Streamed with groups' decisions logged in parts of 64 layouts
    /// ([`LOG_PART_LAYOUTS`] in unit tests), the 4-men table is the
    /// resident one, bit for bit (tests/streamed.rs checks whole groups).
    #[test]
    fn decisions_logged_in_parts_give_the_resident_table() {
        let rules = Rules { cards: crate::rules::CardSet::default_set(), no_move: crate::rules::NoMoveRule::Pass };
        let resident = Table::generate(&rules, 2).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let config = SolveConfig {
            work_dir: Some(dir.path().join("work")),
            budget_bytes: Some(64 << 20),
            force_streamed: true,
            ..SolveConfig::default()
        };
        let solved = solve_with(&rules, 2, &config, &|_| {}).unwrap();
        assert_eq!(solved.streamed_pairs, solved.pairs);
        let streamed = solved.into_table().unwrap();
        assert_eq!(resident.materials().len(), streamed.materials().len());
        for (a, b) in resident.materials().iter().zip(streamed.materials()) {
            assert!(a.values == b.values, "material {} differs", a.index.material);
        }
        let largest = (0..2).flat_map(|p| {
            let index = MaterialIndex::new(Material { mover: p + 1, opponent: 2 });
            index.groups().iter().map(|g| g.layouts).max()
        });
        assert!(largest.max().unwrap() >= 2 * LOG_PART_LAYOUTS as u64, "some group is logged in parts");
    }
}
