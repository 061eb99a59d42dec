from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from raftka.client.partitioner import murmur2, partition_for_key


def test_java_vectors():
    # Values of the Java client's Utils.murmur2.
    assert murmur2(b"21") == -973932308
    assert murmur2(b"foobar") == -790332482
    assert murmur2(b"abc") == 479470107


@given(st.binary(max_size=64))
def test_agrees_with_kafka_python(key):
    # kafka-python returns the unsigned-masked value; compare modulo 2**32.
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key) & 0xFFFFFFFF


@given(st.binary(max_size=32), st.integers(min_value=1, max_value=1000))
def test_partition_in_range(key, n):
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert p == (murmur2(key) & 0x7FFFFFFF) % n
