fn main() -> std::process::ExitCode {
    repro::commands::main()
}
