//! The `onitb` binary: parses the arguments and reports failure.
//!
//! Owns only the process boundary (exit code, the one `error: ` line, the
//! check that the CPU runs what the build was compiled for); everything
//! else is in `cli` and the library.

mod cli;
mod cpu_check;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Before anything else: code compiled for features the CPU lacks dies
    // of SIGILL, with no message.
    if !cpu_check::runs_this_build() {
        return ExitCode::FAILURE;
    }
    match cli::run(cli::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
