//! The command line: arguments, progress lines and statistics output.
//!
//! Owns everything the user sees and nothing else: the library solves,
//! stores and counts. Must not reach into solver or index internals. Errors
//! leave as anyhow errors that `main` prints as one `error: ` line.

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use onitb::blockio::{self, IoChoice, format_size, parse_size};
use onitb::compress::{self, ShardSizes};
use onitb::format::Content;
use onitb::index::Material;
use onitb::notation::{self, Colour, Setup};
use onitb::probe::MoveValue;
use onitb::publish::{self, BackgroundShards, Beside, Published, ShardSpec};
use onitb::rules::{CardSet, MAX_PIECES_PER_SIDE, NoMoveRule, Outcome, Rules};
use onitb::shard::{self, TableFiles};
use onitb::solver::{self, IoTotals, PairPlan, PairTime, Progress, SolveConfig, StepTimes};
use onitb::store::OutputDir;
use onitb::value::ValueWidth;
use onitb::{Stats, Tablebase, Value, verify};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What writing the shards may hold of each of two kinds, unpacked groups
/// and blocks waiting to be compressed: a quarter of the budget each. The
/// solver's buffers are freed by then; the blocks' stored bytes and frames
/// (at most a block per thread at once, and the frames, a few times
/// smaller) take part of the rest.
fn shard_writing_bytes(budget_bytes: u64) -> usize {
    usize::try_from(budget_bytes / 4).unwrap_or(usize::MAX)
}

/// Progress lines come every this many plies of depth...
const PROGRESS_EVERY_PLIES: u16 = 10;
/// ...or after a step that ends this long after the last line (long steps
/// of big streamed pairs).
const PROGRESS_EVERY: Duration = Duration::from_secs(10);

#[derive(Parser)]
#[command(name = "onitb", version, about = "Onitama endgame tablebases")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Solve every position with up to MEN pieces and save the table.
    Generate(GenerateArgs),
    /// Print the statistics of a saved table (raw or compressed).
    Stats(StatsArgs),
    /// Write a compressed copy of a table: one zstd frame per block.
    Compress(CompressArgs),
    /// Check every block's checksum of shards or table directories.
    Verify(VerifyArgs),
    /// Print a position's value and every legal move's, best first.
    Probe(ProbeArgs),
    /// Play a position out with best moves on both sides.
    Play(PlayArgs),
}

#[derive(Args)]
struct CompressArgs {
    /// Table directory to read (raw or compressed).
    input: PathBuf,
    /// Directory to write; must not exist or be empty.
    output: PathBuf,
    /// zstd level, 1..=22 (negative levels are faster).
    #[arg(long, value_name = "N", default_value_t = compress::DEFAULT_LEVEL, allow_negative_numbers = true)]
    level: i32,
    /// Store only win / draw / loss (for measuring; such tables cannot be
    /// probed).
    #[arg(long)]
    wdl: bool,
    /// Worker threads [default: one per core].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Print only the totals.
    #[arg(long)]
    quiet: bool,
}

#[derive(Args)]
struct VerifyArgs {
    /// Shard files or table directories.
    #[arg(required = true)]
    paths: Vec<PathBuf>,
    /// Also re-derive every value from its successors (table directories
    /// only; loads the table into memory, unless --sample).
    #[arg(long)]
    deep: bool,
    /// With --deep: check N layouts (each with its 30 card deals), in runs
    /// of 64 from random places, reading blocks through a cache of 256
    /// MiB instead of loading the table; N at least the table's layouts
    /// checks them all.
    #[arg(long, value_name = "N", requires = "deep", value_parser = clap::value_parser!(u64).range(1..))]
    sample: Option<u64>,
    /// With --sample: picks the layouts [default: from the clock; printed,
    /// to check the same ones again].
    #[arg(long, value_name = "S", requires = "sample")]
    seed: Option<u64>,
    /// Worker threads [default: one per core].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
}

#[derive(Args)]
struct ProbeArgs {
    /// Table directory (raw or compressed).
    dir: PathBuf,
    /// The position in notation (see README), e.g.
    /// "1bBb1/5/5/5/1rRr1 r Boar,Ox Crab,Horse Elephant"; may be given as
    /// several arguments.
    #[arg(required = true, num_args = 1..)]
    position: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PlayArgs {
    /// Table directory (raw or compressed).
    dir: PathBuf,
    /// The position in notation (see README).
    #[arg(required = true, num_args = 1..)]
    position: Vec<String>,
    /// Stop after this many plies.
    #[arg(long, value_name = "N", default_value_t = 300)]
    max_plies: u32,
}

#[derive(Args)]
struct GenerateArgs {
    /// Pieces on the board in all, masters included: 2, 4, 6, 8 or 10 (half
    /// of them per side at most).
    #[arg(long, value_name = "N")]
    men: u32,
    /// The five cards, comma-separated [default: Boar,Ox,Elephant,Horse,Crab].
    #[arg(long, value_name = "A,B,C,D,E")]
    cards: Option<String>,
    /// What a side with no legal move does: pass (swap a card with the side
    /// card, the official rule) or lose.
    #[arg(long, value_name = "RULE", default_value = "pass", value_parser = ["pass", "loss"])]
    no_move: String,
    /// Directory to write the table to; must not exist or be empty.
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
    /// Worker threads [default: one per core].
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// Print no progress lines.
    #[arg(long)]
    quiet: bool,
    /// Print a progress line for every step, not only every 10 plies or 10
    /// seconds; a streamed step's line also says where its time went.
    #[arg(long, short, conflicts_with = "quiet")]
    verbose: bool,
    /// Work directory: solved materials and the checkpoint go here, and
    /// materials that do not fit --mem are streamed from here.
    #[arg(long, value_name = "DIR")]
    work: Option<PathBuf>,
    /// Memory for the table while solving, e.g. 512MiB or 2GiB (needs
    /// --work); a small fixed overhead comes on top, see DESIGN.md.
    #[arg(long, value_name = "SIZE")]
    mem: Option<String>,
    /// Continue the run recorded in --work (same arguments).
    #[arg(long)]
    resume: bool,
    /// I/O back end for streaming: auto (io_uring if it works, else pread),
    /// uring or pread.
    #[arg(long, value_name = "IO", default_value = "auto")]
    io: String,
    /// Write the table as compressed shards straight away (zstd LEVEL,
    /// default 19; as `onitb compress` would), not as raw shards.
    #[arg(
        long,
        value_name = "LEVEL",
        num_args = 0..=1,
        default_missing_value = "19",
        allow_negative_numbers = true
    )]
    compress: Option<i32>,
    /// Least seconds between checkpoints inside a streamed material (0:
    /// after every step); `kill -9` loses at most about this much work.
    #[arg(long, value_name = "SECS", default_value_t = solver::CHECKPOINT_EVERY_DEFAULT.as_secs())]
    checkpoint_every: u64,
}

#[derive(Args)]
struct StatsArgs {
    /// Directory of a table written by `generate`.
    dir: PathBuf,
    /// Print JSON instead of a text table.
    #[arg(long)]
    json: bool,
}

pub fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Generate(args) => generate(args),
        Command::Stats(args) => {
            let files = TableFiles::open(&args.dir)?;
            let (total, per) = files.stats()?;
            print_stats(&files.rules, files.max_per_side, total, per, args.json)
        }
        Command::Compress(args) => compress_command(args),
        Command::Verify(args) => verify_command(args),
        Command::Probe(args) => probe_command(args),
        Command::Play(args) => play_command(args),
    }
}

/// Starts the worker threads, `threads` of them or one per core. Started
/// here, not on first use, so that threads the system refuses (a limit on
/// processes or memory) are an error, not a panic.
fn set_threads(threads: Option<usize>) -> Result<()> {
    if threads == Some(0) {
        bail!("--threads must be at least 1");
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads.unwrap_or(0))
        .build_global()
        .context("cannot start the worker threads")
}

fn out(text: &str) -> Result<()> {
    match io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to standard output"),
    }
}

fn bits_per_state(bytes: u64, states: u64) -> f64 {
    bytes as f64 * 8.0 / states.max(1) as f64
}

fn compress_command(args: CompressArgs) -> Result<()> {
    set_threads(args.threads)?;
    let content = if args.wdl { Content::Wdl } else { Content::Values };
    let start = Instant::now();
    let quiet = args.quiet;
    let report = |s: ShardSizes| {
        if !quiet {
            let words = if s.width == ValueWidth::Word { " (two-byte values)" } else { "" };
            let line = format!(
                "{}: {} states, {} value bytes -> {} bytes, {:.4} bits/state{words}\n",
                s.material,
                s.states,
                s.value_bytes,
                s.file_bytes,
                bits_per_state(s.file_bytes, s.states)
            );
            let _ = out(&line);
        }
    };
    let sizes = compress::compress_table(&args.input, &args.output, args.level, content, &report)?;
    let seconds = start.elapsed().as_secs_f64();
    let states: u64 = sizes.iter().map(|s| s.states).sum();
    let value_bytes: u64 = sizes.iter().map(|s| s.value_bytes).sum();
    let file_bytes: u64 = sizes.iter().map(|s| s.file_bytes).sum();
    out(&format!(
        "total: {states} states, {value_bytes} value bytes -> {file_bytes} bytes (ratio {:.1}), {:.4} bits/state; \
         {seconds:.1} s, {:.1} MB/s in, {:.2} MB/s out\n",
        value_bytes as f64 / file_bytes.max(1) as f64,
        bits_per_state(file_bytes, states),
        value_bytes as f64 / 1e6 / seconds,
        file_bytes as f64 / 1e6 / seconds,
    ))
}

fn verify_command(args: VerifyArgs) -> Result<()> {
    set_threads(args.threads)?;
    let start = Instant::now();
    let report = verify::verify_paths(&args.paths);
    let seconds = start.elapsed().as_secs_f64();
    if let Some(first) = report.failures.first() {
        let lines: String = report.failures.iter().map(|f| format!("FAILED: {f}\n")).collect();
        out(&lines)?;
        bail!("{} damaged blocks or unreadable shards; the first: {first}", report.failures.len());
    }
    out(&format!(
        "checksums ok: {} shards, {} blocks, {} bytes in {seconds:.2} s ({:.0} MB/s)\n",
        report.shards,
        report.blocks,
        report.bytes,
        report.bytes as f64 / 1e6 / seconds.max(1e-9)
    ))?;
    if args.deep {
        for path in &args.paths {
            if !path.is_dir() {
                bail!("--deep needs table directories, '{}' is not one", path.display());
            }
            if let Some(layouts) = args.sample {
                deep_check_sample(path, layouts, args.seed)?;
                continue;
            }
            let progress = |m: Material| {
                let _ = out(&format!("deep check {}: {m}\n", path.display()));
            };
            if let Some(found) = verify::verify_deep(path, &progress)? {
                bail!("'{}': {found}", path.display());
            }
            out(&format!("deep check ok: {}\n", path.display()))?;
        }
    }
    Ok(())
}

/// `verify --deep --sample`: a line at the start, one at least every
/// [`PROGRESS_EVERY`] while it runs, and the result.
fn deep_check_sample(path: &Path, layouts: u64, seed: Option<u64>) -> Result<()> {
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
    });
    out(&format!("deep check {}: a sample of {layouts} layouts, --seed {seed}\n", path.display()))?;
    let start = Instant::now();
    let last = std::sync::Mutex::new(start);
    let progress = |done: u64, of: u64| {
        let mut last = last.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.elapsed() >= PROGRESS_EVERY && done < of {
            *last = Instant::now();
            let _ = out(&format!("deep check {}: {done}/{of} layouts\n", path.display()));
        }
    };
    let report = verify::verify_deep_sample(path, verify::Sample { layouts, seed }, &progress)?;
    if let Some(found) = report.found {
        bail!("'{}': {found}", path.display());
    }
    out(&format!(
        "deep check ok: {} layouts of {} ({:.4}%) in {:.1} s: {}\n",
        report.layouts,
        report.table_layouts,
        100.0 * report.layouts as f64 / report.table_layouts.max(1) as f64,
        start.elapsed().as_secs_f64(),
        path.display()
    ))
}

/// The table and the position given in notation.
fn open_position(dir: &Path, words: &[String]) -> Result<(Tablebase, Setup)> {
    let tablebase = Tablebase::open(dir)?;
    let text = words.join(" ");
    let setup = notation::parse(&text, &tablebase.rules().cards)?;
    Ok((tablebase, setup))
}

fn value_text(value: Value) -> String {
    match value {
        Value::Draw => "draw".to_string(),
        Value::Win(p) | Value::Loss(p) => {
            format!("{} in {p} {}", value.wdl_name(), if p == 1 { "ply" } else { "plies" })
        }
    }
}

#[derive(Serialize)]
struct ProbeReport {
    position: String,
    to_move: &'static str,
    wdl: &'static str,
    plies: Option<u16>,
    moves: Vec<MoveReport>,
}

#[derive(Serialize)]
struct MoveReport {
    card: &'static str,
    from: String,
    to: String,
    pass: bool,
    wdl: &'static str,
    plies: Option<u16>,
    /// The position after the move, or null if the move wins on the spot.
    result: Option<String>,
}

fn probe_command(args: ProbeArgs) -> Result<()> {
    let (tablebase, setup) = open_position(&args.dir, &args.position)?;
    let cards = &tablebase.rules().cards;
    let value = tablebase.probe(&setup.position)?;
    let moves = tablebase.probe_moves(&setup.position)?;
    let report = ProbeReport {
        position: notation::to_notation(&setup, cards),
        to_move: setup.to_move.name(),
        wdl: value.wdl_name(),
        plies: value.plies(),
        moves: moves.iter().map(|m| move_report(m, setup.to_move, cards)).collect(),
    };
    if args.json {
        return out(&(serde_json::to_string_pretty(&report)? + "\n"));
    }
    let mut text = notation::diagram(&setup, cards);
    text += &format!("{}: {}\n", setup.to_move, value_text(value));
    for m in &moves {
        text += &format!("  {:<20} {}\n", notation::move_name(&m.played, setup.to_move, cards), value_text(m.value));
    }
    if moves.is_empty() {
        text += "  no legal move\n";
    }
    out(&text)
}

fn move_report(m: &MoveValue, to_move: Colour, cards: &CardSet) -> MoveReport {
    let result = match m.played.outcome {
        Outcome::Win => None,
        Outcome::Continue(next) => {
            Some(notation::to_notation(&Setup { to_move: to_move.other(), position: next }, cards))
        }
    };
    MoveReport {
        card: cards.card(m.played.card_slot).name,
        from: notation::square_name(m.played.from, to_move),
        to: notation::square_name(m.played.to, to_move),
        pass: m.played.is_pass(),
        wdl: m.value.wdl_name(),
        plies: m.value.plies(),
        result,
    }
}

fn play_command(args: PlayArgs) -> Result<()> {
    let (tablebase, mut setup) = open_position(&args.dir, &args.position)?;
    let cards = tablebase.rules().cards;
    let mut seen = HashSet::new();
    for ply in 1..=args.max_plies {
        let value = tablebase.probe(&setup.position)?;
        out(&format!("{}{}: {}\n", notation::diagram(&setup, &cards), setup.to_move, value_text(value)))?;
        if !seen.insert(setup) {
            return out("the position repeats: a draw\n");
        }
        let moves = tablebase.probe_moves(&setup.position)?;
        let Some(best) = moves.first() else {
            return out(&format!("{} has no legal move and loses\n", setup.to_move));
        };
        let name = notation::move_name(&best.played, setup.to_move, &cards);
        out(&format!("\nply {ply}: {} plays {name}\n", setup.to_move))?;
        match best.played.outcome {
            Outcome::Win => return out(&format!("{} wins\n", setup.to_move)),
            Outcome::Continue(next) => setup = Setup { to_move: setup.to_move.other(), position: next },
        }
    }
    out(&format!("stopped after {} plies\n", args.max_plies))
}

fn generate(args: GenerateArgs) -> Result<()> {
    let max_per_side = match args.men {
        men @ 2..=10 if men % 2 == 0 && men as usize / 2 <= MAX_PIECES_PER_SIDE => men as usize / 2,
        men => bail!("--men must be an even number from 2 to {}, got {men}", 2 * MAX_PIECES_PER_SIDE),
    };
    let cards = match &args.cards {
        None => CardSet::default_set(),
        Some(list) => CardSet::from_names(&list.split(',').collect::<Vec<_>>()).context("--cards")?,
    };
    let no_move: NoMoveRule = args.no_move.parse().context("--no-move")?;
    let rules = Rules { cards, no_move };
    let budget_bytes = match &args.mem {
        Some(text) => Some(parse_size(text).with_context(|| format!("--mem {text:?}"))?),
        None => None,
    };
    if args.work.is_none() {
        if budget_bytes.is_some() {
            bail!("--mem needs --work DIR: the part of the table that does not fit goes there");
        }
        if args.resume {
            bail!("--resume needs --work DIR: the directory of the run to continue");
        }
    }
    let io: IoChoice = args.io.parse().map_err(|e: String| anyhow::anyhow!("--io: {e}"))?;
    set_threads(args.threads)?;
    // Fail on a bad output path now, not after the solve.
    if let Some(level) = args.compress {
        // Now, not after the solve.
        compress::check_level(level, &args.out)?;
    }
    check_memory(max_per_side, budget_bytes, blockio::available_memory_bytes())?;
    // A run with a work directory can be resumed, and so can its output:
    // the shards it finished are kept for `--resume` (store::OutputDir).
    let mut out = match args.work {
        Some(_) => OutputDir::prepare_resumable(&args.out, args.resume)?,
        None => OutputDir::prepare(&args.out)?,
    };
    let reporter = Reporter {
        quiet: args.quiet,
        every_step: args.verbose,
        start: Instant::now(),
        depth: AtomicU64::new(0),
        last_io: Mutex::new((Instant::now(), IoTotals::default())),
        eta: Mutex::new(Eta::default()),
        pair_times: Mutex::new([StepTimes::default(); 2]),
    };
    reporter.line(format_args!("solving {} men ({cards}; no move: {})", args.men, no_move.name()));
    if let Some(budget) = budget_bytes {
        reporter.line(format_args!("memory budget {}", format_size(budget)));
    }
    // With a work directory, the shards of finished materials are written
    // beside the solve of the later pairs (publish::BackgroundShards), with
    // memory the streamed pairs leave them.
    let background = args.work.as_ref().zip(publish::writes_in_background(budget_bytes, args.compress));
    let config = SolveConfig {
        work_dir: args.work.clone(),
        budget_bytes,
        resume: args.resume,
        force_streamed: false,
        io,
        checkpoint_every: Duration::from_secs(args.checkpoint_every),
        reserved_bytes: background.map_or(0, |(_, bytes)| bytes),
        ..SolveConfig::default()
    };
    let context = args.compress.map(|_| shard::Context::new(rules, max_per_side));
    let spec = ShardSpec { rules, max_per_side, compress: args.compress.zip(context.as_ref()) };
    for (name, misfit) in publish::check_adopted(&mut out, &spec) {
        reporter.warning(format_args!("the interrupted run's shard {name} is written again: {misfit}"));
    }
    if !out.adopted().is_empty() {
        let kept = out.adopted().len();
        reporter.line(format_args!(
            "keeping {kept} shard{} the interrupted run finished",
            if kept == 1 { "" } else { "s" }
        ));
    }
    let out = out;
    let shard_written = |beside: Beside| match beside {
        Beside::Done(material, Published::Written) => {
            reporter.line(format_args!("{material}: shard written beside the solve"))
        }
        Beside::Done(material, Published::Kept) => {
            reporter.line(format_args!("{material}: shard kept from the interrupted run"))
        }
        Beside::Done(material, Published::Replaced(why)) => reporter.warning(format_args!(
            "{material}: the interrupted run's shard failed its check ({why}); written again beside the solve"
        )),
        Beside::Failed(material, error) => reporter.warning(format_args!(
            "{material}: shard not written beside the solve ({error}); it and the rest are written after the solve"
        )),
    };
    let solved_and_written = std::thread::scope(|scope| -> Result<_> {
        let writer =
            background.and_then(|(work, _)| BackgroundShards::start(scope, work.clone(), (&out, spec), &shard_written));
        let solved = solver::solve_with(&rules, max_per_side, &config, &|p| {
            if let (Progress::RunStarted { pairs, .. }, Some(work)) = (&p, &args.work) {
                report_work_disk(&reporter, work, pairs);
            }
            if let Some(writer) = &writer {
                writer.observe(&p);
            }
            reporter.progress(p)
        })
        .context("solving failed")?;
        reporter.line(format_args!("writing {}", out.target().display()));
        let beside = writer.map(BackgroundShards::finish).transpose().context("writing shards beside the solve")?;
        let mut per: BTreeMap<Material, Stats> = beside.unwrap_or_default().into_iter().collect();
        let rest: Vec<&solver::FinishedMaterial> =
            solved.materials.iter().filter(|f| !per.contains_key(&f.material())).collect();
        for finished in rest {
            let (stats, how) = publish::write_shard(finished, &out, &spec, budget_bytes.map(shard_writing_bytes))?;
            let material = finished.material();
            match how {
                Published::Written => {}
                Published::Kept => reporter.line(format_args!("{material}: shard kept from the interrupted run")),
                Published::Replaced(why) => reporter.warning(format_args!(
                    "{material}: the interrupted run's shard failed its check ({why}); written again"
                )),
            }
            per.insert(finished.material(), stats);
        }
        Ok((solved, per))
    });
    let (solved, per) = solved_and_written.inspect_err(|_| {
        // Only a run with a work directory keeps its output (store::OutputDir).
        if args.work.is_none() {
            return;
        }
        let entries = std::fs::read_dir(out.partial()).into_iter().flatten().flatten();
        let shards = entries.filter(|e| onitb::store::is_shard_name(&e.file_name().to_string_lossy())).count();
        if shards > 0 {
            let (plural, verb) = if shards == 1 { ("", "stays") } else { ("s", "stay") };
            let partial = out.partial().display();
            reporter.warning(format_args!("{shards} finished shard{plural} in {partial} {verb} for --resume"));
        }
    })?;
    let total = per.values().fold(Stats::default(), |a, &b| Stats::merge(a, b));
    let per: Vec<(Material, Stats)> = per.into_iter().collect();
    let target = out.target().to_path_buf();
    out.finish()?;
    let shards = per.len();
    reporter.line(format_args!("saved {shards} shard{} in {}", if shards == 1 { "" } else { "s" }, target.display()));
    if let Some(work) = &args.work {
        solver::remove_work_files(work, &solved).context("cleaning the work directory")?;
    }
    // The summary is part of the result (stdout), so --quiet keeps it.
    let peak = peak_memory().map_or("unknown".to_string(), format_size);
    if args.work.is_some() {
        println!(
            "summary: work files read {}, written {}; {} of {} material pairs streamed; peak memory {peak}",
            format_size(solved.io.bytes_read),
            format_size(solved.io.bytes_written),
            solved.streamed_pairs,
            solved.pairs,
        );
    } else {
        println!("summary: solved in memory; peak memory {peak}");
    }
    print_stats(&rules, max_per_side, total, per, false)
}

/// Refuses, before anything is solved, a run that needs more memory than
/// `available_bytes`: it would be killed when it got to its largest pair
/// (at 8 men without --mem, after the smaller pairs' minutes). It needs the
/// largest pair's memory, or the budget if that is less (streamed pairs'
/// buffers take the budget).
fn check_memory(max_per_side: usize, budget_bytes: Option<u64>, available_bytes: Option<u64>) -> Result<()> {
    let (largest, material) = solver::largest_pair_bytes(max_per_side);
    let Some(available) = available_bytes else { return Ok(()) };
    let pair = if material.mover == material.opponent {
        material.to_string()
    } else {
        format!("{material} and {}", material.flipped())
    };
    match budget_bytes {
        None if largest > available => bail!(
            "solving {pair} in memory needs at least {}, but {} of memory is available: \
             give a --mem SIZE within that (and --work DIR), to stream what does not fit through DIR",
            format_size(largest),
            format_size(available)
        ),
        Some(budget) if budget.min(largest) > available => bail!(
            "--mem {} is more than the {} of memory available (solving {pair} takes {}): give a --mem SIZE within that",
            format_size(budget),
            format_size(available),
            format_size(budget.min(largest)),
        ),
        _ => Ok(()),
    }
}

/// Says before the solve what its work directory is estimated to need at
/// the peak, and warns if the disk has less: a run that would fill it
/// hours in can be moved now.
fn report_work_disk(reporter: &Reporter, work: &Path, pairs: &[PairPlan]) {
    let Some(outlook) = solver::work_disk_outlook(work, pairs) else { return };
    let (needed, available) = (format_size(outlook.needed_bytes), format_size(outlook.available_bytes));
    if outlook.available_bytes < outlook.needed_bytes {
        reporter.warning(format_args!(
            "the work directory may need about {needed} of disk at its peak (an estimate), and it has {available}; \
             if the disk fills, the run stops at its last checkpoint, to be resumed with --resume once there is room"
        ));
    } else {
        reporter.line(format_args!(
            "work directory: about {needed} of disk at the peak (an estimate), {available} available"
        ));
    }
}

/// Peak resident memory of this process (VmHWM), where Linux reports it.
fn peak_memory() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Progress lines on stderr with the elapsed time.
struct Reporter {
    quiet: bool,
    /// A line for every step (`--verbose`).
    every_step: bool,
    start: Instant,
    /// Depth of the last step, for the closing line of a material.
    depth: AtomicU64,
    /// When the last step line was printed, and the I/O totals then.
    last_io: Mutex<(Instant, IoTotals)>,
    eta: Mutex<Eta>,
    /// Where the streamed steps of the pair in progress spent their time:
    /// win steps (odd depths), then loss steps.
    pair_times: Mutex<[StepTimes; 2]>,
}

/// Estimates the time left from how long finished pairs took per layout.
///
/// Time per layout is roughly the same across pairs solved the same way
/// (0.95 to 1.1 µs in memory at 6 men), while streamed pairs are several
/// times slower; so each pair left counts at the rate of the last finished
/// pair solved like it (in memory or streamed: the solver's plan says which
/// each will be). No estimate while a kind of pair still to come has no
/// rate yet: at 8 men an in-memory rate put the whole run at 10 minutes.
/// A resumed run starts from the times its checkpoint recorded: those of
/// the pairs the earlier runs finished, and what they spent on the pair
/// it goes on with.
#[derive(Default)]
struct Eta {
    /// Pairs not started yet, from the solver's plan.
    left: Vec<PairPlan>,
    /// Seconds per layout of the last finished pair, in memory or streamed.
    rate: [Option<f64>; 2],
    /// The pair in progress.
    current: Option<PairInProgress>,
}

#[derive(Clone, Copy)]
struct PairInProgress {
    /// When this run took it up, and the time earlier runs spent on it.
    started: Instant,
    spent_before: Duration,
    layouts: u64,
    streamed: bool,
}

/// The rate a finished pair sets for the pairs solved like it.
fn secs_per_layout(secs: f64, layouts: u64) -> f64 {
    secs / layouts.max(1) as f64
}

impl PairInProgress {
    fn spent_secs(&self) -> f64 {
        (self.spent_before + self.started.elapsed()).as_secs_f64()
    }
}

impl Eta {
    /// The pairs to solve, and the times of those earlier runs finished.
    fn run_started(&mut self, pairs: Vec<PairPlan>, earlier: &[PairTime]) {
        self.left = pairs;
        for time in earlier {
            self.rate[time.streamed as usize] = Some(secs_per_layout(time.spent_ms as f64 / 1e3, time.layouts));
        }
    }

    fn pair_started(&mut self, materials: [Material; 2], layouts: u64, streamed: bool, spent_before: Duration) {
        self.left.retain(|p| p.materials != materials);
        self.current = Some(PairInProgress { started: Instant::now(), spent_before, layouts, streamed });
    }

    fn pair_done(&mut self) {
        if let Some(pair) = self.current.take() {
            self.rate[pair.streamed as usize] = Some(secs_per_layout(pair.spent_secs(), pair.layouts));
        }
    }

    /// The tail of a progress line: the time left, or when there will be
    /// an estimate.
    fn text(&self) -> String {
        let streams = self.current.is_some_and(|c| c.streamed) || self.left.iter().any(|p| p.streamed);
        match self.left_secs() {
            Some(secs) => format!(", ETA ~{}", elapsed(Duration::from_secs_f64(secs))),
            None if streams && self.rate[1].is_none() => ", ETA once the first streamed pair is done".to_string(),
            None => String::new(),
        }
    }

    /// Seconds left, if there is a rate for the pair in progress and for
    /// every kind of pair still to come.
    fn left_secs(&self) -> Option<f64> {
        let current = self.current?;
        let rate = self.rate[current.streamed as usize]?;
        // The current pair counts as at least 5% left until it is done.
        let whole = current.layouts as f64 * rate;
        let pair_left = (whole - current.spent_secs()).max(0.05 * whole);
        let mut after = 0.0;
        for pair in &self.left {
            after += pair.layouts as f64 * self.rate[pair.streamed as usize]?;
        }
        Some(pair_left + after)
    }
}

impl Reporter {
    fn line(&self, text: std::fmt::Arguments) {
        if !self.quiet {
            let _ = writeln!(io::stderr(), "[{:>9}] {text}", elapsed(self.start.elapsed()));
        }
    }

    /// A line that `--quiet` keeps: something went wrong, and the run goes on.
    fn warning(&self, text: std::fmt::Arguments) {
        let _ = writeln!(io::stderr(), "[{:>9}] warning: {text}", elapsed(self.start.elapsed()));
    }

    /// The work-file I/O and rates since the last line, and the ETA, as
    /// the tail of a progress line.
    fn io_and_eta(&self, last: &(Instant, IoTotals), io: IoTotals) -> String {
        let secs = last.0.elapsed().as_secs_f64().max(1e-3);
        let rate = |now: u64, then: u64| now.saturating_sub(then) as f64 / secs / 1e6;
        let io_text = if io.bytes_read + io.bytes_written > 0 {
            format!(
                ", work files: read {} ({:.0} MB/s), written {} ({:.0} MB/s)",
                format_size(io.bytes_read),
                rate(io.bytes_read, last.1.bytes_read),
                format_size(io.bytes_written),
                rate(io.bytes_written, last.1.bytes_written)
            )
        } else {
            String::new()
        };
        let eta = self.eta().text();
        format!("{io_text}{eta}")
    }

    fn eta(&self) -> std::sync::MutexGuard<'_, Eta> {
        self.eta.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn progress(&self, progress: Progress) {
        match progress {
            Progress::RunStarted { pairs, earlier } => self.eta().run_started(pairs, &earlier),
            Progress::MaterialStarted { materials, layouts, streamed, resumed_at_plies, spent_before } => {
                self.eta().pair_started(materials, layouts, streamed, spent_before);
                // A pair's work-file totals start from zero.
                *self.last_io.lock().unwrap_or_else(|e| e.into_inner()) = (Instant::now(), IoTotals::default());
                self.depth.store(resumed_at_plies.unwrap_or(0) as u64, Ordering::Relaxed);
                let how = if streamed { "streamed from the work directory" } else { "in memory" };
                // Checkpoints of earlier builds have no time spent.
                let spent = match spent_before {
                    Duration::ZERO => String::new(),
                    spent => format!(", {} into it", elapsed(spent)),
                };
                let resumed = match resumed_at_plies {
                    Some(0) => format!(", resumed after initialisation (checkpoint{spent})"),
                    Some(plies) => format!(", resumed after depth {plies} (checkpoint{spent})"),
                    None => String::new(),
                };
                self.line(format_args!("{}: started, {layouts} layouts, {how}{resumed}", pair(materials)));
            }
            Progress::Widened { material } => {
                self.line(format_args!(
                    "{material}: needs a loss deeper than {} plies; going on with two-byte values, for it and the materials whose captures lead to it",
                    onitb::value::MAX_LOSS_PLIES
                ));
            }
            Progress::IoBackend { backend, fallback } => {
                self.line(format_args!("streaming with {backend} I/O"));
                if let Some(why) = fallback {
                    self.line(format_args!("note: io_uring is not available ({why}); using pread"));
                }
            }
            Progress::MaterialResumed { materials } => {
                self.line(format_args!("{}: finished by the earlier run (checkpoint)", pair(materials)));
            }
            Progress::Step { depth_plies, decided, groups_visited, groups, groups_sparse, io, times } => {
                self.depth.store(depth_plies as u64, Ordering::Relaxed);
                let kind = if depth_plies % 2 == 1 { 0 } else { 1 };
                self.pair_times.lock().unwrap_or_else(|e| e.into_inner())[kind] += times;
                let mut last = self.last_io.lock().unwrap_or_else(|e| e.into_inner());
                if self.every_step || depth_plies % PROGRESS_EVERY_PLIES == 0 || last.0.elapsed() >= PROGRESS_EVERY {
                    let tail = self.io_and_eta(&last, io);
                    let sparse = if groups_sparse > 0 { format!(" ({groups_sparse} sparse)") } else { String::new() };
                    let spent = if self.every_step && times != StepTimes::default() {
                        format!("; {}", time_spent(&times))
                    } else {
                        String::new()
                    };
                    match depth_plies {
                        0 => self.line(format_args!("  initialised, {decided} states decided{tail}")),
                        _ => self.line(format_args!(
                            "  depth {depth_plies} plies, {decided} states decided, step visited {groups_visited}/{groups} groups{sparse}{tail}{spent}"
                        )),
                    }
                    *last = (Instant::now(), io);
                }
            }
            Progress::Batch { depth_plies, material, done, batches, io } => {
                // Long steps of big streamed pairs: a line inside the step.
                let mut last = self.last_io.lock().unwrap_or_else(|e| e.into_inner());
                if done < batches && last.0.elapsed() >= PROGRESS_EVERY {
                    let tail = self.io_and_eta(&last, io);
                    self.line(format_args!("  depth {depth_plies} plies: {material} batch {done}/{batches}{tail}"));
                    *last = (Instant::now(), io);
                }
            }
            Progress::Finishing { material, done, batches, io } => {
                // After a big streamed pair's last step, minutes of it.
                let mut last = self.last_io.lock().unwrap_or_else(|e| e.into_inner());
                if done < batches && last.0.elapsed() >= PROGRESS_EVERY {
                    let tail = self.io_and_eta(&last, io);
                    self.line(format_args!("  finishing {material}: batch {done}/{batches}{tail}"));
                    *last = (Instant::now(), io);
                }
            }
            Progress::MaterialDone { materials } => {
                self.eta().pair_done();
                let depth = self.depth.load(Ordering::Relaxed);
                let times = std::mem::take(&mut *self.pair_times.lock().unwrap_or_else(|e| e.into_inner()));
                self.line(format_args!("{}: done after {depth} plies{}", pair(materials), step_times(&times)));
            }
        }
    }
}

/// Where a streamed pair's win and loss steps spent their time, as the
/// tail of its closing line (nothing for a pair solved in memory): the
/// workers' computing, settling and waiting add up to about the steps'
/// wall time. Apart, because the two kinds have different bounds (a loss
/// step reads twice what a win step does; DESIGN.md, "What bounds a
/// streamed step now").
fn step_times([win, loss]: &[StepTimes; 2]) -> String {
    if *win == StepTimes::default() && *loss == StepTimes::default() {
        return String::new();
    }
    format!("; win steps: {}; loss steps: {}", time_spent(win), time_spent(loss))
}

/// Where streamed steps spent their time, as text, with the cores busy
/// in each part (CPU time over wall time; none with one window).
fn time_spent(times: &StepTimes) -> String {
    let part = |wall: Duration, cpu: Duration| match cpu.is_zero() || wall.is_zero() {
        true => elapsed(wall),
        false => format!("{} at {:.2} cores", elapsed(wall), cpu.as_secs_f64() / wall.as_secs_f64()),
    };
    format!(
        "computing {}, settling {}, waiting for I/O {} (storing and reading busy {})",
        part(times.computing, times.computing_cpu),
        part(times.settling, times.settling_cpu),
        part(times.waiting_for_io, times.waiting_cpu),
        part(times.storing_and_reading, times.storing_and_reading_cpu)
    )
}

/// `1v2+2v1`, or `2v2` for a material that is its own mirror.
fn pair(materials: [Material; 2]) -> String {
    if materials[0] == materials[1] { materials[0].to_string() } else { format!("{}+{}", materials[0], materials[1]) }
}

fn elapsed(time: Duration) -> String {
    let secs = time.as_secs();
    match secs {
        0..60 => format!("{:.1}s", time.as_secs_f64()),
        60..3600 => format!("{}m{:02}s", secs / 60, secs % 60),
        _ => format!("{}h{:02}m{:02}s", secs / 3600, secs / 60 % 60, secs % 60),
    }
}

#[derive(Serialize)]
struct StatsReport {
    cards: Vec<&'static str>,
    men: usize,
    rules: RulesReport,
    total: Stats,
    materials: Vec<MaterialReport>,
}

#[derive(Serialize)]
struct RulesReport {
    no_move: &'static str,
}

#[derive(Serialize)]
struct MaterialReport {
    material: String,
    #[serde(flatten)]
    stats: Stats,
}

fn print_stats(
    rules: &Rules,
    max_per_side: usize,
    total: Stats,
    per: Vec<(Material, Stats)>,
    json: bool,
) -> Result<()> {
    let report = StatsReport {
        cards: rules.cards.names(),
        men: 2 * max_per_side,
        rules: RulesReport { no_move: rules.no_move.name() },
        total,
        materials: per.into_iter().map(|(m, stats)| MaterialReport { material: m.to_string(), stats }).collect(),
    };
    let text = if json { serde_json::to_string_pretty(&report)? + "\n" } else { stats_text(&report) };
    out(&text)
}

fn stats_text(report: &StatsReport) -> String {
    let mut out = format!(
        "{} men, cards {}, no move: {}\n{:<8} {:>14} {:>14} {:>14} {:>14} {:>12} {:>12} {:>12}\n",
        report.men,
        report.cards.join(","),
        report.rules.no_move,
        "material",
        "states",
        "win in 1",
        "wins",
        "losses",
        "draws",
        "longest win",
        "longest loss",
    );
    let rows = std::iter::once(("all", &report.total)).chain(report.materials.iter().map(|m| (&*m.material, &m.stats)));
    for (name, s) in rows {
        out += &format!(
            "{name:<8} {:>14} {:>14} {:>14} {:>14} {:>12} {:>12} {:>12}\n",
            s.states, s.win_in_1, s.wins, s.losses, s.draws, s.longest_win_plies, s.longest_loss_plies
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_bigger_than_the_memory_available_is_refused_before_it_starts() {
        const GIB: u64 = 1 << 30;
        let error = |result: Result<()>| result.unwrap_err().to_string();
        assert!(check_memory(2, None, Some(GIB)).is_ok());
        assert!(check_memory(4, None, None).is_ok(), "unknown: allowed");
        // 6 men in memory: 3v3 alone, under 2 GiB (the run's peak is 1.93 GiB).
        assert!(check_memory(3, None, Some(2 * GIB)).is_ok());
        let message = error(check_memory(3, None, Some(GIB / 2)));
        assert!(message.contains("solving 3v3 in memory") && message.contains("--mem SIZE"), "{message}");
        // 8 men: 4v4 does not fit 22 GiB in memory, but a budget does.
        let message = error(check_memory(4, None, Some(22 * GIB)));
        assert!(message.contains("4v4") && message.contains("but 22 GiB"), "{message}");
        assert!(check_memory(4, Some(GIB), Some(22 * GIB)).is_ok());
        let message = error(check_memory(4, Some(40 * GIB), Some(22 * GIB)));
        assert!(message.contains("--mem 40 GiB is more than the 22 GiB"), "{message}");
        // A budget above what the whole run needs needs no more than that.
        let (largest, material) = solver::largest_pair_bytes(2);
        assert_eq!(material, Material::new(2, 2));
        assert!(check_memory(2, Some(1000 * GIB), Some(largest)).is_ok());
        assert!(check_memory(2, Some(1000 * GIB), Some(largest - 1)).is_err());
    }

    #[test]
    fn eta_counts_each_pair_at_the_rate_of_its_kind() {
        let plan = |mover, opponent, layouts, streamed| PairPlan {
            materials: [Material::new(mover, opponent), Material::new(opponent, mover)],
            layouts,
            streamed,
        };
        // Two small in-memory pairs, then two streamed ones.
        let (a, b) = (plan(1, 1, 1_000, false), plan(1, 2, 9_000, false));
        let (c, d) = (plan(2, 2, 100_000, true), plan(2, 3, 890_000, true));
        let mut eta = Eta { left: vec![a, b, c, d], ..Eta::default() };
        eta.pair_started(a.materials, a.layouts, false, Duration::ZERO);
        assert_eq!(eta.left_secs(), None, "no estimate before a pair is finished");
        eta.pair_done();
        eta.rate[0] = Some(1e-6);
        eta.pair_started(b.materials, b.layouts, false, Duration::ZERO);
        assert_eq!(eta.left_secs(), None, "streamed pairs to come, none finished yet");
        assert!(eta.text().contains("once the first streamed pair is done"), "{}", eta.text());
        eta.pair_done();
        eta.pair_started(c.materials, c.layouts, true, Duration::ZERO);
        assert_eq!(eta.left_secs(), None, "this is the first streamed pair");
        assert!(eta.text().contains("once the first streamed pair is done"), "{}", eta.text());
        // 100,000 + 890,000 streamed layouts at 1e-5 s each: ~9.9 s.
        eta.rate[1] = Some(1e-5);
        let left = eta.left_secs().unwrap();
        assert!((9.0..=10.0).contains(&left), "{left}");
        assert!(eta.text().starts_with(", ETA ~"), "{}", eta.text());
        // With only in-memory pairs left an in-memory rate is enough.
        let mut eta = Eta { left: vec![a, b], ..Eta::default() };
        eta.pair_started(a.materials, a.layouts, false, Duration::ZERO);
        eta.pair_done();
        eta.pair_started(b.materials, b.layouts, false, Duration::ZERO);
        assert!(eta.left_secs().is_some());
    }

    /// A run resumed in the last streamed pair has an estimate at once,
    /// from the times its checkpoint recorded, and counts the time earlier
    /// runs spent on that pair as done.
    #[test]
    fn a_resumed_run_estimates_from_the_checkpointed_times() {
        let m = |mover, opponent| [Material::new(mover, opponent), Material::new(opponent, mover)];
        let last = PairPlan { materials: m(2, 2), layouts: 1_000_000, streamed: true };
        // The earlier run took 20 s for 1,000,000 in-memory layouts and
        // 30 s for 1,000,000 streamed ones, then 10 s into the last pair.
        let earlier = [
            PairTime { layouts: 1_000_000, streamed: false, spent_ms: 20_000 },
            PairTime { layouts: 1_000_000, streamed: true, spent_ms: 30_000 },
        ];
        let mut eta = Eta::default();
        eta.run_started(vec![last], &earlier);
        eta.pair_started(last.materials, last.layouts, true, Duration::from_secs(10));
        let left = eta.left_secs().expect("an estimate from the earlier run's streamed pair");
        assert!((19.0..=20.0).contains(&left), "30 s at the streamed rate, 10 s of it done: {left}");
        // Without times (a checkpoint of an earlier build) there is none.
        let mut eta = Eta::default();
        eta.run_started(vec![last], &[]);
        eta.pair_started(last.materials, last.layouts, true, Duration::ZERO);
        assert!(eta.text().contains("once the first streamed pair is done"), "{}", eta.text());
    }

    #[test]
    fn elapsed_times_read_well() {
        assert_eq!(elapsed(Duration::from_millis(1234)), "1.2s");
        assert_eq!(elapsed(Duration::from_secs(75)), "1m15s");
        assert_eq!(elapsed(Duration::from_secs(3 * 3600 + 65)), "3h01m05s");
    }

    #[test]
    fn step_parts_say_how_many_cores_were_busy() {
        let secs = Duration::from_secs;
        let times = StepTimes {
            computing: secs(10),
            computing_cpu: secs(18),
            settling: secs(2),
            settling_cpu: secs(3),
            waiting_for_io: secs(1),
            storing_and_reading: secs(8),
            storing_and_reading_cpu: secs(2),
            ..StepTimes::default()
        };
        assert_eq!(
            time_spent(&times),
            "computing 10.0s at 1.80 cores, settling 2.0s at 1.50 cores, waiting for I/O 1.0s \
             (storing and reading busy 8.0s at 0.25 cores)"
        );
    }
}
