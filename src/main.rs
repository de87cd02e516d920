//! The `dynsim` binary: parse, run, and turn every error into one line on stderr and exit code 2
//! (130 when SIGINT or SIGTERM stopped it).

use std::io::IsTerminal;

use clap::error::ErrorKind;

fn main() {
    init_logging();
    let cli = match dynsim::cli::Cli::try_parse_args() {
        Ok(cli) => cli,
        Err(e) => match e.kind() {
            ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => e.exit(),
            _ => {
                eprintln!("dynsim: {}", one_line(&e.to_string()));
                std::process::exit(2);
            }
        },
    };
    if let Err(e) = dynsim::interrupt::install() {
        eprintln!("dynsim: {e}");
        std::process::exit(2);
    }
    match dynsim::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e @ dynsim::error::Error::Interrupted { .. }) => {
            eprintln!("dynsim: {e}");
            std::process::exit(dynsim::interrupt::EXIT_CODE);
        }
        Err(e) => {
            eprintln!("dynsim: {e}");
            std::process::exit(2);
        }
    }
}

/// Clap's message up to its usage section, folded onto one line.
fn one_line(message: &str) -> String {
    let body: Vec<&str> = message
        .lines()
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    body.join(" ").trim_start_matches("error: ").to_string()
}

/// Logs (tracing) go to stderr; `RUST_LOG` sets the level, warnings by default.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .without_time()
        .init();
}
