"""Client quotas on their own (broker/client_quotas.py): Kafka's checks, filters, which
quota applies to whom, and the throttle time a rate over it earns."""

from __future__ import annotations

import pytest

from ottla.broker import client_quotas
from ottla.broker.client_quotas import (
    CONSUMER_BYTE_RATE,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    PRODUCER_BYTE_RATE,
    ClientQuotas,
    QuotaError,
)
from ottla.protocol.errors import ErrorCode

OK = (ErrorCode.none, None)


def set_quota(quotas: ClientQuotas, entity: list, key: str, value: float) -> tuple:
    return quotas.alter([(entity, [(key, value, False)])], validate_only=False)[0]


def test_entities_and_values_are_checked_as_kafka_checks_them(tmp_path):
    quotas = ClientQuotas(str(tmp_path))
    refused = quotas.alter([
        ([], [(PRODUCER_BYTE_RATE, 1000, False)]),
        ([("group", "g")], [(PRODUCER_BYTE_RATE, 1000, False)]),
        ([("user", "a"), ("user", "b")], [(PRODUCER_BYTE_RATE, 1000, False)]),
        ([("ip", "10.0.0.1"), ("user", "a")], [("connection_creation_rate", 5, False)]),
        ([("ip", "not-an-ip")], [("connection_creation_rate", 5, False)]),
        ([("user", "a")], [("connection_creation_rate", 5, False)]),
        ([("user", "a")], [(PRODUCER_BYTE_RATE, 10.5, False)]),
        ([("user", "a")], [(PRODUCER_BYTE_RATE, -1, False)]),
        ([("user", "a")], [(PRODUCER_BYTE_RATE, 1, False), (PRODUCER_BYTE_RATE, 2, False)]),
    ], validate_only=False)
    assert [code for code, _ in refused] == [ErrorCode.invalid_request] * 9
    assert quotas.quotas == {}
    assert "whole number" in refused[6][1]
    # validate_only checks and keeps nothing; a double key takes a fraction.
    assert quotas.alter([([("user", "a")], [("request_percentage", 12.5, False)])], validate_only=True) == [OK]
    assert quotas.quotas == {}
    assert set_quota(quotas, [("user", "a")], "request_percentage", 12.5) == OK
    assert set_quota(quotas, [("ip", None)], "connection_creation_rate", 10) == OK


def test_describe_filters_exact_default_and_any_name_strictly_or_not(tmp_path):
    quotas = ClientQuotas(str(tmp_path))
    for entity in ([("user", "alice")], [("user", None)], [("client-id", "app")],
                   [("user", "alice"), ("client-id", "app")], [("user", None), ("client-id", None)]):
        assert set_quota(quotas, entity, PRODUCER_BYTE_RATE, 1000) == OK

    def names(components, strict=False):
        return [tuple(entity) for entity, _ in quotas.describe(components, strict)]

    assert names([("user", MATCH_EXACT, "alice")], strict=True) == [(("user", "alice"),)]
    assert names([("user", MATCH_EXACT, "alice")]) == [(("client-id", "app"), ("user", "alice")), (("user", "alice"),)]
    assert names([("user", MATCH_DEFAULT, None)], strict=True) == [(("user", None),)]
    assert names([("user", MATCH_SPECIFIED, None)], strict=True) == [(("user", "alice"),)]
    assert names([("client-id", MATCH_DEFAULT, None), ("user", MATCH_DEFAULT, None)]) == [
        (("client-id", None), ("user", None))]
    assert len(names([])) == 5 and names([], strict=True) == []
    for bad in ([("user", MATCH_EXACT, None)], [("user", MATCH_DEFAULT, "x")], [("user", 7, None)],
                [("user", MATCH_SPECIFIED, None), ("user", MATCH_DEFAULT, None)], [("colour", MATCH_SPECIFIED, None)]):
        with pytest.raises(QuotaError) as refused:
            quotas.describe(bad, False)
        assert refused.value.code is ErrorCode.invalid_request


def test_the_most_specific_quota_applies_and_who_shares_it(tmp_path):
    quotas = ClientQuotas(str(tmp_path))
    set_quota(quotas, [("client-id", None)], PRODUCER_BYTE_RATE, 1)
    assert quotas._quota_of(PRODUCER_BYTE_RATE, "bob", "app") == (1, None, "app")  # per client id
    set_quota(quotas, [("client-id", "app")], PRODUCER_BYTE_RATE, 2)
    assert quotas._quota_of(PRODUCER_BYTE_RATE, "bob", "app") == (2, None, "app")
    set_quota(quotas, [("user", None)], PRODUCER_BYTE_RATE, 3)  # any user quota beats client quotas
    assert quotas._quota_of(PRODUCER_BYTE_RATE, "bob", "app") == (3, "bob", None)
    set_quota(quotas, [("user", "bob")], PRODUCER_BYTE_RATE, 4)
    assert quotas._quota_of(PRODUCER_BYTE_RATE, "bob", "app") == (4, "bob", None)  # shared by bob's clients
    set_quota(quotas, [("user", "bob"), ("client-id", "app")], PRODUCER_BYTE_RATE, 5)
    assert quotas._quota_of(PRODUCER_BYTE_RATE, "bob", "app") == (5, "bob", "app")
    assert quotas._quota_of(PRODUCER_BYTE_RATE, "bob", "other") == (4, "bob", None)
    assert quotas._quota_of(CONSUMER_BYTE_RATE, "bob", "app") is None
    # Kept over a restart.
    assert ClientQuotas(str(tmp_path)).quotas == quotas.quotas


def test_a_rate_over_the_quota_earns_kafkas_throttle_time(tmp_path, monkeypatch):
    now = [1_000_000.0]
    monkeypatch.setattr(client_quotas.time, "time", lambda: now[0])
    quotas = ClientQuotas(str(tmp_path))
    set_quota(quotas, [("client-id", "app")], PRODUCER_BYTE_RATE, 1000)  # bytes/s
    # 5,000 bytes in the first instant, measured over the 10 s minimum window: 500 B/s.
    assert quotas.throttle_ms(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 5000) == 0
    # 20,000 bytes more: 2,500 B/s, 1.5 x over: 1.5 x 10 s, bounded by the 11 s window.
    assert quotas.throttle_ms(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 20_000) == 11_000
    assert quotas.throttle_ms(PRODUCER_BYTE_RATE, "ANONYMOUS", "other", 1 << 30) == 0  # no quota for it
    # A fetch over its quota is not counted: the next small one is measured without it.
    set_quota(quotas, [("client-id", "reader")], CONSUMER_BYTE_RATE, 1000)
    assert quotas.throttle_ms(CONSUMER_BYTE_RATE, "ANONYMOUS", "reader", 50_000, count_when_over=False) > 0
    assert quotas.throttle_ms(CONSUMER_BYTE_RATE, "ANONYMOUS", "reader", 100, count_when_over=False) == 0
    # Twelve seconds on, the old bytes have left the window.
    now[0] += 12
    assert quotas.throttle_ms(PRODUCER_BYTE_RATE, "ANONYMOUS", "app", 5000) == 0


def test_what_clients_can_make_the_quotas_hold_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(client_quotas, "MAX_ENTITIES", 3)
    monkeypatch.setattr(client_quotas, "MAX_RATES", 2)
    quotas = ClientQuotas(str(tmp_path))
    for name in ("a", "b", "c"):
        assert set_quota(quotas, [("client-id", name)], PRODUCER_BYTE_RATE, 10) == OK
    code, message = set_quota(quotas, [("client-id", "d")], PRODUCER_BYTE_RATE, 10)
    assert code is ErrorCode.invalid_request and "at most 3" in message
    assert set_quota(quotas, [("client-id", "a")], CONSUMER_BYTE_RATE, 10) == OK  # an entity already there
    # A default quota measures each client id apart; idle ones make room for new ones.
    (tmp_path / "rates").mkdir()
    quotas = ClientQuotas(str(tmp_path / "rates"))
    assert set_quota(quotas, [("client-id", None)], CONSUMER_BYTE_RATE, 1000) == OK
    now = [1_000_000.0]
    monkeypatch.setattr(client_quotas.time, "time", lambda: now[0])
    for client in ("x", "y"):
        quotas.throttle_ms(CONSUMER_BYTE_RATE, "ANONYMOUS", client, 10)
    now[0] += 20
    quotas.throttle_ms(CONSUMER_BYTE_RATE, "ANONYMOUS", "z", 10)
    assert [k[2] for k in quotas._rates] == ["z"]
