import pytest


def test_partition_key() -> None:
    from zero_rename.core.data.layout import partition_key

    assert partition_key("dt=2024-01-01") == "2024-01-01"
    assert partition_key("dt=2024-01-01/region=eu/") == "2024-01-01/eu"
    assert partition_key("k=a%2Fb/n=__HIVE_DEFAULT_PARTITION__") == "a/b/__HIVE_DEFAULT_PARTITION__"
    assert partition_key("") == ""


def test_a_job_is_named_by_its_id_or_its_first_characters() -> None:
    from zero_rename.core.data.layout import check_job_ref
    from zero_rename.errors import ConfigError

    whole = "3286d41d-d8bd-4cf1-acba-f287d7611755"
    for ref in (whole, whole[:8], whole[:9], whole[:13], whole[:35]):
        assert check_job_ref(ref) == ref
    for ref, says in (
        (whole[:7], "at least its first 8 characters"),
        ("", "at least its first 8"),
        ("3286D41D", "write it in lower case"),
        (whole.upper(), "canonical form"),
        ("3286d41dd8bd", "nor the start of one"),
        ("3286d41g", "nor the start of one"),
        (whole + "0", "nor the start of one"),
    ):
        with pytest.raises(ConfigError, match=says):
            check_job_ref(ref)
