"""The `roundhouse` command line: one module per subcommand, wired together in `tools.cli`."""
