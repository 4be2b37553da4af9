//! The `rdmabench` binary: parse, run, map the outcome to an exit status.

use std::io::{self, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    ffi::os::fix_malloc_thresholds();
    let cli = match rdmabench::cli::parse(std::env::args_os()) {
        Ok(Some(cli)) => cli,
        Ok(None) => return ExitCode::SUCCESS,
        Err(e) => return fail(&e),
    };
    match rdmabench::run(cli, &mut UntilClosed { out: io::stdout().lock(), closed: false }) {
        Ok(code) => ExitCode::from(code),
        Err(e) => fail(&e),
    }
}

/// One line on stderr; the error's kind decides the status (1 verdict, 2 error).
fn fail(e: &rdmabench::error::Error) -> ExitCode {
    eprintln!("rdmabench: {e}");
    ExitCode::from(e.kind.exit_code())
}

/// stdout, where a reader that went away (`| head`) ends the output, not the command:
/// what follows is dropped, quietly, and the status stays the command's own (as the
/// tools it is compared with end `completions | head` and a listing's pipe: 0).
struct UntilClosed<W: Write> {
    out: W,
    closed: bool,
}

impl<W: Write> Write for UntilClosed<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.closed {
            return Ok(buf.len());
        }
        match self.out.write(buf) {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(buf.len())
            }
            other => other,
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.closed {
            return Ok(());
        }
        match self.out.flush() {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            other => other,
        }
    }
}
