//! The `pincer` command (see [`pincer::cli`]).

fn main() -> std::process::ExitCode {
    pincer::cli::main()
}
