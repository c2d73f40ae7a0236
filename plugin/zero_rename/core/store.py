"""``zero_rename.core.store``, as the README shows it: the S3 store's client settings.

The module lives in :mod:`zero_rename.core.s3.client`; this name stays for the
code that imports ``StoreConfig`` (and ``S3Store``, ``client_config``) from here.
"""

from zero_rename.core.s3.client import S3Store, StoreConfig, client_config, make_client

__all__ = ["S3Store", "StoreConfig", "client_config", "make_client"]
