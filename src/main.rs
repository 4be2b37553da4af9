//! The `rdmabench` binary: parse, run, map the outcome to an exit status.

use std::process::ExitCode;

fn main() -> ExitCode {
    ffi::os::fix_malloc_thresholds();
    let cli = match rdmabench::cli::parse(std::env::args_os()) {
        Ok(Some(cli)) => cli,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => return fail(&e),
    };
    match rdmabench::run(cli, &mut std::io::stdout().lock()) {
        Ok(code) => ExitCode::from(code),
        Err(e) => fail(&e),
    }
}

/// One line on stderr; the error's kind decides the status (1 verdict, 2 error).
fn fail(e: &rdmabench::error::Error) -> ExitCode {
    eprintln!("rdmabench: {e}");
    ExitCode::from(e.kind.exit_code())
}
