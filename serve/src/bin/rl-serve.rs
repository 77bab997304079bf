//! `rl-serve`: `rl serve` as its own binary (for containers and the tests); the same flags.

use clap::Parser;

#[derive(Parser)]
#[command(name = "rl-serve", version)]
struct Cli {
    #[command(flatten)]
    args: rl_serve::ServeArgs,
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    rl_serve::init_logs(&cli.args.log_format);
    let rt = match cli.args.runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rl serve: error: cannot start the async runtime: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match rt.block_on(rl_serve::run(cli.args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rl serve: error: {e}");
            std::process::ExitCode::from(2)
        }
    }
}
