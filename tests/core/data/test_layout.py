def test_partition_key() -> None:
    from zero_rename.core.data.layout import partition_key

    assert partition_key("dt=2024-01-01") == "2024-01-01"
    assert partition_key("dt=2024-01-01/region=eu/") == "2024-01-01/eu"
    assert partition_key("k=a%2Fb/n=__HIVE_DEFAULT_PARTITION__") == "a/b/__HIVE_DEFAULT_PARTITION__"
    assert partition_key("") == ""
