//! The `onitb` binary: parses the arguments and reports failure.
//!
//! Owns only the process boundary (exit code, the one `error: ` line);
//! everything else is in `cli` and the library.

mod cli;

use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    match cli::run(cli::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            let _ = writeln!(std::io::stderr(), "error: {error:#}");
            ExitCode::FAILURE
        }
    }
}
