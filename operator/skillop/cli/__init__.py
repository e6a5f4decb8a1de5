"""The skillop command line."""
