"""The mysql:// URL: where the server is, and the one parameter it takes, the CA bundle; TLS cannot
be turned off through it."""

from __future__ import annotations

import ssl

import pytest

from adapters.mysql.database import MysqlTarget, tls_context, with_database
from adapters.settings import Settings


def test_a_url_gives_the_server_the_credentials_and_the_ca() -> None:
    target = MysqlTarget.parse("mysql://admin:p%40ss%2Fw%3Ard@db.internal:3307/crashes?ssl_ca=/etc/my%20certs/ca.pem")
    assert target == MysqlTarget(host="db.internal", port=3307, user="admin", password="p@ss/w:rd",
                                 database="crashes", ca_file="/etc/my certs/ca.pem")


def test_without_a_ca_the_system_trust_store_is_used() -> None:
    target = MysqlTarget.parse("mysql://blackbox:s3cret@proxy.internal/blackbox")
    assert (target.port, target.ca_file) == (3306, None)


@pytest.mark.parametrize("query", ["ssl_disabled=1", "ssl_mode=DISABLED", "ssl-ca=/ca.pem", "ssl_ca=",
                                   "ssl_ca=/a.pem&ssl_ca=/b.pem", "ssl_ca=/ca.pem&ssl_verify_cert=0"])
def test_no_other_parameter_is_taken(query: str) -> None:
    with pytest.raises(ValueError, match=r"TLS is always on"):
        MysqlTarget.parse(f"mysql://blackbox:blackbox@127.0.0.1:13306/blackbox?{query}")


def test_a_url_of_another_scheme_is_refused_without_repeating_its_password() -> None:
    with pytest.raises(ValueError) as refused:
        MysqlTarget.parse("postgres://admin:hunter2@db/blackbox")
    assert "hunter2" not in str(refused.value)


def test_another_database_keeps_the_server_the_user_and_the_ca() -> None:
    url = "mysql://blackbox:blackbox@127.0.0.1:13306/blackbox?ssl_ca=/work/.services/tls/ca.pem"
    assert with_database(url, "t123") == "mysql://blackbox:blackbox@127.0.0.1:13306/t123?ssl_ca=/work/.services/tls/ca.pem"


@pytest.mark.parametrize("ca_file", [None, ssl.get_default_verify_paths().cafile])
def test_the_certificate_and_the_host_name_are_always_verified(ca_file: str | None) -> None:
    context = tls_context(ca_file)
    assert context.verify_mode == ssl.CERT_REQUIRED
    assert context.check_hostname


def test_the_migrations_deadline_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert 0 < Settings().mysql_migrate_deadline_s < 600  # inside the custom resource's timeout
    monkeypatch.setenv("BLACKBOX_MYSQL_MIGRATE_DEADLINE_S", "42.5")
    assert Settings().mysql_migrate_deadline_s == 42.5
