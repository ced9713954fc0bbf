//! The command line: arguments, progress lines and statistics output.
//!
//! Owns everything the user sees and nothing else: the library solves,
//! stores and counts. Must not reach into solver or index internals. Errors
//! leave as anyhow errors that `main` prints as one `error: ` line.

use anyhow::{Context, Result, bail};
use clap::{Args, Parser, Subcommand};
use onitb::index::Material;
use onitb::rules::{CardSet, MAX_PIECES_PER_SIDE, NoMoveRule, Rules};
use onitb::solver::{self, Progress};
use onitb::store::{self, OutputDir};
use onitb::{Stats, Table};
use serde::Serialize;
use std::io::{self, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Progress lines come every this many plies of depth.
const PROGRESS_EVERY_PLIES: u16 = 10;

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
    /// Print the statistics of a saved table.
    Stats(StatsArgs),
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
            let table = store::load(&args.dir)?;
            print_stats(&table, args.json)
        }
    }
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
    if let Some(threads) = args.threads {
        if threads == 0 {
            bail!("--threads must be at least 1");
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build_global()
            .context("cannot start the worker threads")?;
    }
    // Fail on a bad output path now, not after the solve.
    let out = OutputDir::prepare(&args.out)?;
    let reporter = Reporter { quiet: args.quiet, start: Instant::now(), depth: AtomicU64::new(0) };
    reporter.line(format_args!("solving {} men ({cards}; no move: {})", args.men, no_move.name()));
    let table = solver::solve(&rules, max_per_side, &|p| reporter.progress(p)).context("solving failed")?;
    reporter.line(format_args!("writing {}", out.target().display()));
    let target = out.target().to_path_buf();
    out.commit(&table)?;
    let shards = table.materials().len();
    reporter.line(format_args!("saved {shards} shard{} in {}", if shards == 1 { "" } else { "s" }, target.display()));
    print_stats(&table, false)
}

/// Progress lines on stderr with the elapsed time.
struct Reporter {
    quiet: bool,
    start: Instant,
    /// Depth of the last step, for the closing line of a material.
    depth: AtomicU64,
}

impl Reporter {
    fn line(&self, text: std::fmt::Arguments) {
        if !self.quiet {
            let _ = writeln!(io::stderr(), "[{:>9}] {text}", elapsed(self.start.elapsed()));
        }
    }

    fn progress(&self, progress: Progress) {
        match progress {
            Progress::MaterialStarted { materials, layouts, streamed } => {
                self.depth.store(0, Ordering::Relaxed);
                let how = if streamed { "streamed from the work directory" } else { "in memory" };
                self.line(format_args!("{}: started, {layouts} layouts, {how}", pair(materials)));
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
            Progress::Step { depth_plies, decided } => {
                self.depth.store(depth_plies as u64, Ordering::Relaxed);
                if depth_plies % PROGRESS_EVERY_PLIES == 0 {
                    self.line(format_args!("  depth {depth_plies} plies, {decided} states decided"));
                }
            }
            Progress::MaterialDone { materials } => {
                let depth = self.depth.load(Ordering::Relaxed);
                self.line(format_args!("{}: done after {depth} plies", pair(materials)));
            }
        }
    }
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

fn print_stats(table: &Table, json: bool) -> Result<()> {
    let (total, per) = table.stats();
    let report = StatsReport {
        cards: table.rules().cards.names(),
        men: 2 * table.max_per_side(),
        rules: RulesReport { no_move: table.rules().no_move.name() },
        total,
        materials: per.into_iter().map(|(m, stats)| MaterialReport { material: m.to_string(), stats }).collect(),
    };
    let text = if json { serde_json::to_string_pretty(&report)? + "\n" } else { stats_text(&report) };
    match io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => other.context("cannot write to standard output"),
    }
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
    fn elapsed_times_read_well() {
        assert_eq!(elapsed(Duration::from_millis(1234)), "1.2s");
        assert_eq!(elapsed(Duration::from_secs(75)), "1m15s");
        assert_eq!(elapsed(Duration::from_secs(3 * 3600 + 65)), "3h01m05s");
    }
}
