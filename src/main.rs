fn main() -> std::process::ExitCode {
    repro::cli::main()
}
