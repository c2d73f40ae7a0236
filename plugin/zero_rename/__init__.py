"""zero-rename: an output committer for S3 that publishes by completing multipart uploads."""

__version__ = "0.1.0"
