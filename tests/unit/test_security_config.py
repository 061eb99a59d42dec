"""Security config cores: JAAS, principal mapping rules, PEM fix-up, listener security (tables)."""

from __future__ import annotations

import pytest

from raftka.raft_meta.config.security_config import (
    is_security_key,
    normalise_pem,
    parse_jaas,
    parse_protocol_map,
    parse_security,
)
from raftka.raft_meta.security.principal_mapping import NoMatchingRule, map_principal, parse_rules

JAAS_CASES = [
    ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
     'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";',
     ("org.apache.kafka.common.security.plain.PlainLoginModule", "required",
      {"username": "admin", "password": "admin-secret", "user_admin": "admin-secret",
       "user_alice": "alice-secret"})),
    ('org.apache.kafka.common.security.scram.ScramLoginModule required\n  username="a b" password="p;\\"q" ;',
     ("org.apache.kafka.common.security.scram.ScramLoginModule", "required", {"username": "a b", "password": 'p;"q'})),
    ('M optional /* c */ k=v // note\n ;', ("M", "optional", {"k": "v"})),
]


@pytest.mark.parametrize(("text", "expected"), JAAS_CASES)
def test_jaas(text, expected):
    jaas = parse_jaas(text)
    assert (jaas.login_module, jaas.flag, dict(jaas.options)) == expected


@pytest.mark.parametrize("text", ['M required k="v"', 'M always k="v";', 'M required k=;', "", 'M required /* x ;'])
def test_jaas_refusals(text):
    with pytest.raises(ValueError):
        parse_jaas(text)


RULE_CASES = [
    ("DEFAULT", "CN=alice,OU=Eng,O=Acme,C=US", "CN=alice,OU=Eng,O=Acme,C=US"),
    ("RULE:^CN=(.*?),OU=Svc.*$/$1/,DEFAULT", "CN=b1,OU=Svc,O=Acme", "b1"),
    ("RULE:^CN=(.*?),OU=Svc.*$/$1/,DEFAULT", "CN=alice,OU=Eng", "CN=alice,OU=Eng"),
    ("RULE:^CN=(.*?),.*$/$1/U", "CN=alice,O=x", "ALICE"),
    ("RULE:^CN=(.*?),.*$/$1@x\\/y/L", "CN=Bob,O=x", "bob@x/y"),
    ("RULE:^CN=([a-z]+)$/user-$1/", "CN=carol", "user-carol"),
]


@pytest.mark.parametrize(("rules", "dn", "principal"), RULE_CASES)
def test_principal_mapping(rules, dn, principal):
    assert map_principal(parse_rules(rules), dn) == principal


def test_no_matching_rule():
    with pytest.raises(NoMatchingRule, match="no ssl.principal.mapping.rules rule"):
        map_principal(parse_rules("RULE:^CN=x$/y/"), "CN=z")


@pytest.mark.parametrize("rules", ["", "RULE:abc", "FOO", "RULE:(/x/", "DEFAULT RULE:a/b/"])
def test_bad_rules(rules):
    with pytest.raises(ValueError):
        parse_rules(rules)


def test_inline_pem_from_one_java_properties_line():
    body = "MIIBszCCAVmgAwIBAgIU" * 5
    joined = f"-----BEGIN CERTIFICATE----- {body[:40]} {body[40:]} -----END CERTIFICATE-----"
    fixed = normalise_pem(joined)
    lines = fixed.splitlines()
    assert lines[0] == "-----BEGIN CERTIFICATE-----" and lines[-1] == "-----END CERTIFICATE-----"
    assert "".join(lines[1:-1]) == body and all(len(line) <= 64 for line in lines)


@pytest.mark.parametrize(("key", "ok"), [
    ("ssl.keystore.location", True), ("listener.name.sasl_ssl.ssl.client.auth", True),
    ("listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config", True), ("listener.name.x.bogus", False),
    ("sasl.mechanism.inter.broker.protocol", True), ("ssl.bogus", False),
])
def test_is_security_key(key, ok):
    assert is_security_key(key) is ok


def test_protocol_map():
    assert parse_protocol_map("external:sasl_ssl, INTERNAL:SSL") == (("EXTERNAL", "SASL_SSL"), ("INTERNAL", "SSL"))
    with pytest.raises(ValueError, match="PROTOCOL one of"):
        parse_protocol_map("A:KERBEROS")


BASE = {"ssl.keystore.location": "/k.pem", "ssl.truststore.location": "/ca.pem"}
JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="b" password="p";'


def security(props, mapping, listeners=("SASL_SSL",), inter="SASL_SSL"):
    return parse_security(props, dict(mapping), listeners, inter)


def test_sasl_ssl_listener():
    props = {**BASE, "sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
             "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
             "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": JAAS,
             "listener.name.sasl_ssl.plain.sasl.jaas.config":
                 'org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="a";',
             "ssl.client.auth": "required"}
    settings = security(props, {"SASL_SSL": "SASL_SSL"})
    listener = settings.listener("SASL_SSL")
    assert listener.sasl_mechanisms == ("SCRAM-SHA-256", "PLAIN")
    assert listener.ssl.client_auth == "none"  # KIP-684: unprefixed ssl.client.auth ignored on SASL_SSL
    assert listener.plain_users() == {"alice": "a"}
    assert settings.inter_broker_mechanism == "SCRAM-SHA-256"


SECURITY_ERRORS = [
    ({"sasl.jaas.config": "x"}, "ignore the unprefixed key"),
    ({**BASE, "ssl.keystore.type": "JKS"}, "expected PEM"),
    ({**BASE, "ssl.keystore.password": "x"}, "not used with PEM"),
    ({"ssl.truststore.location": "/ca.pem"}, "no key and certificate"),
    ({**BASE, "ssl.keystore.key": "x"}, "got only one"),
    ({**BASE, "listener.name.sasl_ssl.ssl.client.auth": "maybe"}, "expected one of"),
    ({**BASE}, "sasl.enabled.mechanisms' is unset"),
    ({**BASE, "sasl.enabled.mechanisms": "GSSAPI"}, "expected some of"),
    ({**BASE, "sasl.enabled.mechanisms": "PLAIN"}, "PLAIN is enabled but"),
    ({**BASE, "sasl.enabled.mechanisms": "SCRAM-SHA-512"}, "sasl.mechanism.inter.broker.protocol"),
    ({**BASE, "sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"},
     "the broker's own username"),
    ({**BASE, "listener.name.other.ssl.client.auth": "none"}, "no listener named 'OTHER'"),
    ({**BASE, "sasl.enabled.mechanisms": "SCRAM-SHA-256", "connections.max.reauth.ms": "60000"}, "not supported"),
]


@pytest.mark.parametrize(("props", "error"), SECURITY_ERRORS)
def test_security_refusals(props, error):
    with pytest.raises(ValueError, match=error):
        security(props, {"SASL_SSL": "SASL_SSL"})


def test_ssl_client_auth_on_ssl_listener():
    props = {**BASE, "ssl.client.auth": "required", "ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/,DEFAULT"}
    listener = security(props, {"SSL": "SSL"}, ("SSL",), "SSL").listener("SSL")
    assert listener.ssl.client_auth == "required" and listener.protocol == "SSL"


def test_spark_security_options():
    from raftka.spark_source.options import SourceOptionError, parse_options

    base = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}
    assert parse_options(base).security is None
    options = parse_options({**base, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "PLAIN",
                             "kafka.sasl.jaas.config": 'x.PlainLoginModule required username="u" password="p";',
                             "kafka.ssl.truststore.location": "/ca.pem"})
    assert (options.security.sasl_username, options.security.ssl_cafile) == ("u", "/ca.pem")
    with pytest.raises(SourceOptionError, match="kafka.ssl.bogus|unknown client security property"):
        parse_options({**base, "kafka.ssl.bogus": "1"})


CLIENT_PROPS = [
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "a",
      "sasl.password": "b", "ssl.ca.location": "/ca"}, ("SASL_SSL", "SCRAM-SHA-512", "a", "/ca", True)),
    ({"security.protocol": "ssl", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca",
      "ssl.endpoint.identification.algorithm": ""}, ("SSL", None, None, "/ca", False)),
]


@pytest.mark.parametrize(("props", "expected"), CLIENT_PROPS)
def test_client_properties(props, expected):
    from raftka.client.security import ClientSecurity

    s = ClientSecurity.from_properties(props)
    assert (s.security_protocol, s.sasl_mechanism, s.sasl_username, s.ssl_cafile, s.ssl_check_hostname) == expected


@pytest.mark.parametrize(("props", "error"), [
    ({"security.protocol": "KERBEROS"}, "is not one of"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl_mechanism"),
    ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, "needs sasl_username"),
    ({"ssl.truststore.type": "JKS"}, "expected PEM"),
    ({"sasl.jass.config": "x"}, "unknown client security property"),
])
def test_client_properties_refused(props, error):
    from raftka.client.security import ClientSecurity

    with pytest.raises(ValueError, match=error):
        ClientSecurity.from_properties(props)
