//! The `rdmabench` binary: parse, run, map the outcome to an exit status.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match rdmabench::cli::parse(std::env::args_os()) {
        Ok(Some(cli)) => cli,
        Ok(None) => return ExitCode::SUCCESS,
        Err(msg) => return fail(&msg),
    };
    match rdmabench::run(cli, &mut std::io::stdout().lock()) {
        Ok(code) => ExitCode::from(code),
        Err(msg) => fail(&msg),
    }
}

fn fail(msg: &str) -> ExitCode {
    eprintln!("rdmabench: {msg}");
    ExitCode::from(rdmabench::EXIT_ERROR)
}
