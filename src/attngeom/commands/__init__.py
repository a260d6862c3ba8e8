"""The command line's subcommands, one module each: its options, read once into a typed, frozen record,
then its work, imported only when the command runs (`cli.COMMANDS` lists them).

Nothing below this package imports argparse or sees a parsed command line.
"""
