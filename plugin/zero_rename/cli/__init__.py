"""The zero-rename command line."""
