use membloat_exporter::config::{Config, FlagsOutcome};
use membloat_exporter::{daemon, log};

fn main() {
    let cfg = match Config::from_args(std::env::args_os()) {
        Ok(cfg) => cfg,
        Err(FlagsOutcome::Print(text)) => {
            print!("{text}");
            std::process::exit(0);
        }
        Err(FlagsOutcome::Bad(line)) => {
            eprintln!("{line}");
            std::process::exit(2);
        }
    };
    log::set_level(cfg.log_level);
    if cfg.once {
        match daemon::run_once(&cfg) {
            Ok(text) => {
                use std::io::Write;
                let mut out = std::io::stdout().lock();
                if out
                    .write_all(text.as_bytes())
                    .and_then(|_| out.flush())
                    .is_err()
                {
                    std::process::exit(1);
                }
            }
            Err(e) => {
                membloat_exporter::log!(Error, "{e}");
                std::process::exit(1);
            }
        }
        return;
    }
    std::process::exit(daemon::run(cfg));
}
