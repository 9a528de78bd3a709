"""Counting a broker's requests by client id from Kafka's request log."""

from __future__ import annotations

from akf_devtools.sandbox.broker import LOG4J2_PROPERTIES
from akf_devtools.sandbox.request_log import REQUEST_LOGGER_LEVEL, RequestCounter, by_client, request_header

# A line as a Kafka 4.1 broker logs it (the response shortened).
LINE = (
    '[2026-11-28 08:52:11,865] DEBUG Completed request:{"isForwarded":false,'
    '"requestHeader":{"requestApiKey":3,"requestApiVersion":12,"correlationId":17,"clientId":"akf-airflow","requestApiKeyName":"METADATA"},'
    '"request":{"topics":[{"name":"orders"}]},"response":{"throttleTimeMs":0},"totalTimeMs":0.7} '
    "(kafka.request.logger)\n"
)


def test_the_header_names_client_and_request():
    header = request_header(LINE)
    assert header is not None
    assert (header["clientId"], header["requestApiKeyName"]) == ("akf-airflow", "METADATA")
    assert request_header("[2026-11-28 08:52:11,865] INFO [KafkaRaftServer nodeId=1] started\n") is None


def test_the_request_log_switch_is_a_line_of_the_brokers_configuration():
    assert "logger.request.level = WARN" in LOG4J2_PROPERTIES
    assert REQUEST_LOGGER_LEVEL.startswith("logger.request.level")


def test_counts_only_what_the_logs_gained_and_waits_for_a_whole_line(tmp_path):
    log = tmp_path / "broker-A.log"
    log.write_text(LINE * 2)
    counter = RequestCounter([log, tmp_path / "not-yet.log"])
    counter.skip()  # the two lines before the window do not count
    other = LINE.replace('"akf-airflow"', '"consumer-1"').replace("METADATA", "FETCH")
    with open(log, "a") as out:
        out.write(LINE + other + LINE[:40])  # the last line is still being written
    counts = counter.read()
    assert by_client(counts, "akf-airflow") == {"METADATA": 1}
    assert counts[("consumer-1", "FETCH")] == 1
    with open(log, "a") as out:
        out.write(LINE[40:])
    assert by_client(counter.read(), "akf-airflow") == {"METADATA": 1}  # the finished line, counted once
