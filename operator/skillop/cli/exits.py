"""The CLI's exit codes (docs/api.md): 0 success, 1 the input has problems,
2 a usage error; 3, the cluster could not be read, is ``operator.apiserver``'s."""

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
