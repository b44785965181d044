import subprocess
import sys
from pathlib import Path

import pytest

from schemas.aggregates import Statistics
from stream_app.service.aggregate_collector import OPTIONAL_STATS, TIER_STATS, AggregateCollector
from stream_app.service.exported_statistics import STATS
from stream_app.service.settings import ConfigError, load_settings


def test_defaults() -> None:
    s = load_settings()
    assert s.window_size == 10
    assert (s.composite_weights.pass_rate, s.composite_weights.impl_rate) == (0.5, 0.5)
    assert (
        s.grade_thresholds.A,
        s.grade_thresholds.B,
        s.grade_thresholds.C,
        s.grade_thresholds.D,
    ) == (0.95, 0.85, 0.75, 0.65)
    assert s.baseline_tier == "T0"
    assert s.pass_at_k.k_values == (1, 5, 10)
    assert s.max_message_bytes == 1024 * 1024
    assert "claude-sonnet-4" in s.price_table


def test_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTREAM_WINDOW_SIZE", "5")
    monkeypatch.setenv("EVALSTREAM_GRADE_THRESHOLDS__A", "0.9")
    monkeypatch.setenv("EVALSTREAM_PASS_AT_K", '{"k_values": [3, 1]}')
    s = load_settings()
    assert s.window_size == 5
    assert s.grade_thresholds.A == 0.9
    assert s.pass_at_k.k_values == (1, 3)


def test_yaml_file_and_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "evalstream.yaml"
    cfg.write_text(
        "window_size: 7\nbaseline_tier: T1\ncomposite_weights: {pass_rate: 1, impl_rate: 3}\n"
        "pricing:\n  My-Model: {input: 1.5, output: 2}\n"
    )
    s = load_settings(cfg)
    assert (s.window_size, s.baseline_tier, s.composite_weights.impl_rate) == (7, "T1", 3.0)
    assert s.price_table["my-model"].input == 1.5
    assert "gpt-4o" in s.price_table  # merged over the built-in table
    monkeypatch.setenv("EVALSTREAM_WINDOW_SIZE", "3")
    assert load_settings(cfg).window_size == 3  # environment beats the file
    assert load_settings(cfg, window_size=4).window_size == 4


def test_toml_file(tmp_path: Path) -> None:
    cfg = tmp_path / "evalstream.toml"
    cfg.write_text(
        'baseline_tier = "T2"\n[grade_thresholds]\nA = 0.99\n[pass_at_k]\nk_values = [1, 2]\n'
    )
    s = load_settings(cfg)
    assert (s.baseline_tier, s.grade_thresholds.A, s.pass_at_k.k_values) == ("T2", 0.99, (1, 2))


@pytest.mark.parametrize(
    ("text", "suffix", "message"),
    [
        ("windo_size: 3\n", ".yaml", "windo_size: Extra inputs"),
        ("window_size: 0\n", ".yaml", "window_size"),
        ("grade_thresholds: {A: 0.5, B: 0.9}\n", ".yaml", "A >= B"),
        ("baseline_tier: X1\n", ".yaml", "baseline_tier"),
        ("pass_at_k: {k_values: [0]}\n", ".yaml", "k_values"),
        ("window_size: [\n", ".yaml", "cannot read"),
        ("window_size = 3\n", ".ini", "use .yaml"),
        ("group_instance_id: ''\n", ".yaml", "group_instance_id: .* at least 1"),
        (f"group_instance_id: {'w' * 250}\n", ".yaml", "group_instance_id: .* at most 249"),
    ],
)
def test_bad_config_is_one_clear_error(
    tmp_path: Path, text: str, suffix: str, message: str
) -> None:
    cfg = tmp_path / f"c{suffix}"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_settings(cfg)
    assert "\n" not in str(info.value)


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings("/nonexistent/evalstream.yaml")


def test_every_message_the_worker_writes_fits_the_broker() -> None:
    from stream_app.core.tier_state import MAX_ROW_BYTES, MAX_STRATA_BYTES
    from stream_app.service.settings import MESSAGE_OVERHEAD_BYTES

    most = (1_000_000 - MESSAGE_OVERHEAD_BYTES - MAX_STRATA_BYTES) // MAX_ROW_BYTES
    assert load_settings(window_size=most).window_size == most
    with pytest.raises(ConfigError, match=f"at most {most} runs"):
        load_settings(window_size=most + 1)
    assert load_settings(window_size=most + 1, broker_max_message_bytes=4_000_000)
    with pytest.raises(ConfigError, match="dead_letter_cap"):
        load_settings(dead_letter_cap=1_000_000)


def test_prices_are_bounded_so_priced_costs_stay_finite() -> None:
    with pytest.raises(ConfigError, match="pricing"):
        load_settings(pricing={"m": {"input": 1e300, "output": 1}})
    assert load_settings(pricing={"m": {"input": 1e6, "output": 1}})


def test_composite_weights_are_bounded() -> None:
    with pytest.raises(ConfigError, match="composite_weights"):
        load_settings(composite_weights={"pass_rate": 1e308, "impl_rate": 1e308})


def test_exported_statistics_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTREAM_EXPORTED_STATISTICS", "all")
    assert load_settings().exported_statistics["cost_usd"] == (
        "median",
        "mean",
        "mode",
        "min",
        "max",
        "std_dev",
    )
    monkeypatch.setenv("EVALSTREAM_EXPORTED_STATISTICS", '{"cost_usd": ["min", "max"]}')
    assert load_settings().exported_statistics == {"cost_usd": ("min", "max")}
    monkeypatch.setenv("EVALSTREAM_EXPORTED_STATISTICS", "everything")
    with pytest.raises(ConfigError, match="exported_statistics"):
        load_settings()


def test_loading_the_settings_imports_neither_prometheus_client_nor_faust() -> None:
    probe = (
        "import sys, stream_app.service.settings\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'prometheus_client', 'faust'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_settings_and_the_collector_name_the_same_fields_and_statistics() -> None:
    """Every field the settings accept has its gauge family, every statistic is one of
    `Statistics`, and the settings' default is the collector's."""
    everything = load_settings(exported_statistics="all").exported_statistics
    assert set(everything) == {*TIER_STATS, *OPTIONAL_STATS}
    assert all(chosen == STATS for chosen in everything.values())
    assert set(STATS) == set(Statistics.model_fields) - {"count"}
    assert load_settings().exported_statistics == AggregateCollector().exported


def test_an_undecodable_variable_is_one_line_that_names_no_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("EVALSTREAM_PASS_AT_K", "{bad")
    with pytest.raises(ConfigError, match=r"^invalid configuration: .*pass_at_k"):
        load_settings()


BROKER_URL_EXPECTED = "kafka://HOST:PORT[,HOST:PORT...]"


@pytest.mark.parametrize(
    ("url", "servers"),
    [
        ("kafka://127.0.0.1:9092", ["127.0.0.1:9092"]),  # the default
        ("127.0.0.1:1", ["127.0.0.1:1"]),  # bare host:port (the tests' unreachable broker)
        ("kafka://kafka:9092", ["kafka:9092"]),  # docker-compose.yml
        ("kafka://b1.example:9093,b2.example:9093", ["b1.example:9093", "b2.example:9093"]),
        ("kafka://a:9092, b:9093;kafka://c:9094/", ["a:9092", "b:9093", "c:9094"]),
        ("  kafka://my_kafka-1.local:65535/  ", ["my_kafka-1.local:65535"]),
        ("KAFKA://a:9092", ["a:9092"]),  # a scheme is case-insensitive
        ("kafka://[::1]:9092", ["[::1]:9092"]),
        ("[fe80::1%eth0]:9092,kafka://10.0.0.1:9092", ["[fe80::1%eth0]:9092", "10.0.0.1:9092"]),
    ],
)
def test_a_valid_broker_url(url: str, servers: list[str]) -> None:
    settings = load_settings(broker_url=url)
    assert settings.broker_url == url
    assert settings.bootstrap_servers == servers


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("kafka://", "no host"),
        ("kafka:///", "no host"),
        ("kafka://:9092", "no host"),
        ("kafka://127.0.0.1", "no port"),
        ("127.0.0.1", "no port"),
        ("kafka://127.0.0.1:", "no port"),
        ("kafka://127.0.0.1:notaport", "port 'notaport'"),
        ("kafka://127.0.0.1:+9092", "port '\\+9092'"),
        ("kafka://127.0.0.1:99999", "port 99999"),
        ("kafka://127.0.0.1:0", "port 0"),
        ("http://127.0.0.1:29092", "http://"),
        ("kafkas://127.0.0.1:29092", "kafkas://"),
        ("kafka:127.0.0.1:9092", "host 'kafka:127.0.0.1'"),
        ("kafka://::1:9092", "brackets"),
        ("kafka://[::1]", "no port"),
        ("kafka://[::1]9092", "after"),
        ("kafka://[not-an-ip]:9092", "not-an-ip"),
        ("kafka://127.0.0.1:9092/topic", "port '9092/topic'"),
        ("kafka://user@127.0.0.1:9092", "host 'user@127.0.0.1'"),
        ("kafka://a:9092,,b:9092", "empty entry"),
        ("kafka://a:9092,", "empty entry"),
        ("kafka://a:9092,kafka://", "no host"),
    ],
)
def test_a_bad_broker_url_is_one_clear_error(url: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason) as info:
        load_settings(broker_url=url)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("invalid configuration: broker_url: ")
    assert repr(url) in message  # names the bad value as given
    assert BROKER_URL_EXPECTED in message  # and what is expected


def test_a_bad_broker_url_from_the_environment_or_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "c.yaml"
    cfg.write_text("broker_url: http://file-broker:9092\n")
    with pytest.raises(ConfigError, match=r"from .*c\.yaml.*'http://file-broker:9092'"):
        load_settings(cfg)
    monkeypatch.setenv("EVALSTREAM_BROKER_URL", "kafka://env-broker:notaport")
    with pytest.raises(ConfigError, match="'kafka://env-broker:notaport'"):
        load_settings(cfg)


def test_the_tables_live_on_disk_unless_asked_otherwise() -> None:
    """RocksDB in the data directory by default; Faust's own store URLs are not settings (its
    `rocksdb://` files keys under the current event's partition, and a batch spans them)."""
    assert load_settings().store == "rocksdb"
    assert load_settings(store="memory").store == "memory"
    with pytest.raises(ConfigError, match="store: Input should be 'rocksdb' or 'memory'"):
        load_settings(store="rocksdb://")


def test_a_variable_that_names_no_setting_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A misspelled variable must not leave its setting at the default without a word."""
    monkeypatch.setenv("EVALSTREAM_WINDOW_SIZ", "5")
    with pytest.raises(
        ConfigError,
        match=r"EVALSTREAM_WINDOW_SIZ names no setting \(did you mean "
        r"EVALSTREAM_WINDOW_SIZE\?\)",
    ):
        load_settings()


def test_variables_that_are_no_setting_but_share_the_prefix_pass(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("EVALSTREAM_TEST_BROKER", "EVALSTREAM_KAFKA_HOME", "EVALSTREAM_TEST_ANYTHING"):
        monkeypatch.setenv(name, "x")
    monkeypatch.setenv("evalstream_window_size", "7")  # names are case-insensitive, as read
    assert load_settings().window_size == 7


def test_a_config_path_that_is_a_directory_is_said(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a file"):
        load_settings(tmp_path)


def test_a_key_after_a_plain_value_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVALSTREAM_WINDOW_SIZE__X", "1")
    with pytest.raises(ConfigError, match="EVALSTREAM_WINDOW_SIZE is one value"):
        load_settings()


def test_a_kubernetes_service_named_evalstream_is_no_setting_to_refuse(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Kubernetes gives every pod these variables for a service named `evalstream`."""
    for name, value in {
        "EVALSTREAM_SERVICE_HOST": "10.0.0.5",
        "EVALSTREAM_SERVICE_PORT": "6066",
        "EVALSTREAM_SERVICE_PORT_HTTP": "6066",
        "EVALSTREAM_PORT": "tcp://10.0.0.5:6066",
        "EVALSTREAM_PORT_6066_TCP": "tcp://10.0.0.5:6066",
        "EVALSTREAM_PORT_6066_TCP_ADDR": "10.0.0.5",
        "EVALSTREAM_PORT_6066_TCP_PORT": "6066",
        "EVALSTREAM_PORT_6066_TCP_PROTO": "tcp",
    }.items():
        monkeypatch.setenv(name, value)
    assert load_settings().web_port == 6066


def test_changelogs_roll_and_clean_their_segments_and_stay_compacted() -> None:
    assert load_settings().changelog_configs == {
        "segment.ms": "600000",
        "min.cleanable.dirty.ratio": "0.1",
        "max.compaction.lag.ms": "3600000",
    }
    assert load_settings(changelog_configs={"segment.bytes": "1048576"}).changelog_configs == {
        "segment.bytes": "1048576"
    }
    with pytest.raises(ConfigError, match="compact, always"):
        load_settings(changelog_configs={"cleanup.policy": "delete"})
    with pytest.raises(ConfigError, match="changelog_configs"):
        load_settings(changelog_configs={"Segment MS": "1"})
