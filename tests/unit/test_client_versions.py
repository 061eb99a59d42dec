"""Version negotiation choice and the SDK's typed errors."""

from __future__ import annotations

import pytest

from raftka.client.errors import (
    KafkaError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_class,
    error_for_code,
    raise_for_code,
)
from raftka.client.protocol import ADVERTISED_VERSIONS, ApiKey
from raftka.client.versions import (
    CLIENT_VERSIONS,
    SHARE_GROUP_APIS,
    choose_versions,
    min_version_check,
    version_for,
)


def test_against_raftka_every_api_gets_its_highest_served_version() -> None:
    chosen = choose_versions({int(k): v for k, v in ADVERTISED_VERSIONS.items()})
    assert chosen[ApiKey.PRODUCE] == 9 and chosen[ApiKey.FETCH] == 11 and chosen[ApiKey.FIND_COORDINATOR] == 3
    assert chosen[ApiKey.METADATA] == ADVERTISED_VERSIONS[ApiKey.METADATA][1] and chosen[ApiKey.API_VERSIONS] == 2
    assert set(chosen) == set(CLIENT_VERSIONS) & set(ADVERTISED_VERSIONS)
    # Only the share-group APIs may be missing: the SDK speaks them before raftka advertises them.
    assert set(CLIENT_VERSIONS) - set(chosen) <= SHARE_GROUP_APIS


def test_against_kafka_4_4_the_share_group_apis_get_kafkas_versions() -> None:
    kafka = {int(ApiKey.SHARE_GROUP_HEARTBEAT): (1, 1), int(ApiKey.SHARE_FETCH): (1, 2),
             int(ApiKey.SHARE_ACKNOWLEDGE): (1, 2), int(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS): (0, 1)}
    chosen = choose_versions(kafka)
    assert chosen == {ApiKey.SHARE_GROUP_HEARTBEAT: 1, ApiKey.SHARE_FETCH: 2, ApiKey.SHARE_ACKNOWLEDGE: 2,
                      ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: 1}


def test_an_older_broker_lowers_the_choice_and_gaps_drop_the_api() -> None:
    newest_metadata = CLIENT_VERSIONS[ApiKey.METADATA][1]
    broker = {ApiKey.PRODUCE: (0, 5), ApiKey.FETCH: (0, 3), ApiKey.METADATA: (0, newest_metadata + 1),
              999: (0, 1)}
    chosen = choose_versions(broker)
    assert chosen == {ApiKey.PRODUCE: 5, ApiKey.METADATA: newest_metadata}
    with pytest.raises(UnsupportedVersionError, match="no version of FETCH"):
        version_for(chosen, ApiKey.FETCH)
    with pytest.raises(UnsupportedVersionError, match="zstd needs PRODUCE v7"):
        min_version_check(chosen, ApiKey.PRODUCE, 7, "zstd")


def test_produce_v0_to_v2_are_never_chosen() -> None:
    assert choose_versions({ApiKey.PRODUCE: (0, 2)}) == {}


def test_typed_errors_carry_code_name_and_retriable() -> None:
    err = error_for_code(6, "producing to t/0")
    assert isinstance(err, NotLeaderOrFollowerError) and isinstance(err, KafkaError)
    assert err.code == 6 and err.retriable and err.invalid_metadata
    assert "NOT_LEADER_OR_FOLLOWER" in str(err) and "t/0" in str(err)
    assert error_class(1) is OffsetOutOfRangeError and not OffsetOutOfRangeError.retriable
    assert TopicAlreadyExistsError.code == 36
    assert UnknownTopicOrPartitionError.retriable
    with pytest.raises(TopicAlreadyExistsError):
        raise_for_code(36, "x")
    raise_for_code(0)


def test_an_unknown_code_is_still_a_kafka_error() -> None:
    err = error_for_code(9999, "odd")
    assert type(err) is KafkaError and err.code == 9999 and not err.retriable
