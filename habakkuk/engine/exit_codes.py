"""Process exit codes, shared by the CLI, its commands and the setup wizard."""

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
