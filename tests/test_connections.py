"""Workers and sweepers reach Redis however it is secured: password, ACL user, TLS, unix socket; and
`delayed.connect()` and `connect_async()` reach the Redis $DELAYED_REDIS_URL names, in every URL form."""
import argparse
import asyncio
import subprocess

import pytest
import redis

from delayed import AsyncQueue, DelayedError, PyTask, Queue, RedisURLError, connect, connect_async
from delayed.runtime.command import add_connection_options
from delayed.testing import RedisServer

from .conftest import WAIT, results, spawn, wait_for


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory):
    """A throwaway CA, a server certificate and a client certificate it signed."""
    directory = tmp_path_factory.mktemp("tls")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.crt",
            "-days", "1", "-subj", "/CN=delayed test CA", cwd=directory)
    for name in ("server", "client"):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", "/CN=127.0.0.1", cwd=directory)
        (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "1", "-extfile", "san.ext", cwd=directory)
    return directory


def runs_a_task(url, *options, task_url=""):
    """Start a worker with url and options, enqueue a task, and see it run; returns what it recorded.

    task_url: how the task (and this test) reach Redis, when url alone does not say it all.
    """
    client = redis.Redis.from_url(task_url or url)
    client.flushall()
    worker = spawn("delayed.worker", *options, "tests.tasks", redis_url=url, task_redis_url=task_url)
    try:
        Queue("default", client).enqueue(PyTask("tests.tasks:record", ["secured"]))
        wait_for(lambda: results(client), what="the task to run")
    finally:
        worker.terminate()
        output, _ = worker.communicate(timeout=WAIT)
    assert worker.returncode == 0, output
    return results(client)


def test_password(tmp_path):
    with RedisServer(tmp_path, ["--requirepass", "s3cret"]) as server:
        url = f"redis://:s3cret@127.0.0.1:{server.port}/0"
        assert runs_a_task(url) == [repr(("secured", (), {}))]
        wrong = spawn("delayed.worker", "tests.tasks", redis_url=f"redis://:nope@127.0.0.1:{server.port}/0")
        output, _ = wrong.communicate(timeout=WAIT)
        assert wrong.returncode == 1
        assert output.count("\n") == 1 and "nope" not in output
        assert output.startswith(f"delayed.worker: Redis at redis://:***@127.0.0.1:{server.port}/0 refused the "
                                 "credentials: "), output


@pytest.mark.parametrize("credentials, says", [
    (":wrong@", "invalid username-password pair"),             # WRONGPASS
    ("", "Authentication required"),                           # NOAUTH
    ("worker:wrong@", "invalid username-password pair"),       # an ACL user's wrong password
    ("ghost:pw@", "invalid username-password pair"),           # no such ACL user
])
def test_a_refused_password_says_refused_not_unreachable(tmp_path, credentials, says):
    """Redis answered, and refused the credentials: every command's start says so, in one line, exit 1."""
    acl = ["--requirepass", "right", "--user", "worker", "on", ">pw", "~*", "&*", "+@all"]
    with RedisServer(tmp_path, acl) as server:
        url = f"redis://{credentials}127.0.0.1:{server.port}/0"
        for module, args in (("delayed", ["stats"]), ("delayed.worker", ["tests.tasks"]),
                             ("delayed.sweeper", [])):
            process = spawn(module, *args, redis_url=url)
            output, _ = process.communicate(timeout=10)
            assert process.returncode == 1 and output.count("\n") == 1, output
            shown = url.replace("wrong", "***").replace(":pw@", ":***@")
            assert output.startswith(f"{module}: Redis at {shown} refused the credentials: "), output
            assert says in output and "cannot reach" not in output and "wrong" not in output


def test_acl_user(tmp_path):
    acl = ["--user", "default", "off", "--user", "worker", "on", ">pw", "~*", "&*", "+@all"]
    with RedisServer(tmp_path, acl) as server:
        assert runs_a_task(f"redis://worker:pw@127.0.0.1:{server.port}/0") == [repr(("secured", (), {}))]


def tls_server(directory, certificates, verify_clients: bool) -> RedisServer:
    """A redis-server (to start with `with`) serving TLS only, with the test CA's server certificate;
    verify_clients: it asks clients for a certificate of that CA."""
    server = RedisServer(directory)
    server.extra_args = ["--port", "0", "--tls-port", str(server.port),
                         "--tls-cert-file", str(certificates / "server.crt"),
                         "--tls-key-file", str(certificates / "server.key"),
                         "--tls-ca-cert-file", str(certificates / "ca.crt"),
                         "--tls-auth-clients", "yes" if verify_clients else "no"]
    return server


def test_tls_with_client_certificates(tmp_path, certificates):
    with tls_server(tmp_path, certificates, verify_clients=True) as server:
        files = {"ssl_ca_certs": str(certificates / "ca.crt"), "ssl_certfile": str(certificates / "client.crt"),
                 "ssl_keyfile": str(certificates / "client.key")}
        url = f"rediss://127.0.0.1:{server.port}/0"
        url_with_files = url + "?" + "&".join(f"{key}={value}" for key, value in files.items())
        assert runs_a_task(url_with_files) == [repr(("secured", (), {}))]
        assert runs_a_task(url, "--tls-ca", files["ssl_ca_certs"], "--tls-cert", files["ssl_certfile"],
                           "--tls-key", files["ssl_keyfile"], task_url=url_with_files) == [repr(("secured", (), {}))]
        no_cert = spawn("delayed.sweeper", "--tls-ca", files["ssl_ca_certs"], redis_url=url)
        output, _ = no_cert.communicate(timeout=WAIT)
        assert no_cert.returncode == 1 and output.count("\n") == 1 and "cannot reach Redis" in output


def test_unix_socket(tmp_path):
    socket = tmp_path / "redis.sock"
    with RedisServer(tmp_path, ["--unixsocket", str(socket)]):
        assert runs_a_task(f"unix://{socket}?db=0") == [repr(("secured", (), {}))]


def test_tls_flags_need_a_rediss_url(redis_server):
    process = spawn("delayed.sweeper", "--tls-ca", "/nonexistent", redis_url=redis_server.url)
    output, _ = process.communicate(timeout=WAIT)
    assert process.returncode == 2
    assert output.strip() == "delayed.sweeper: --tls-ca, --tls-cert and --tls-key need a rediss:// URL"


@pytest.mark.parametrize("url, status, says", [
    ("http://127.0.0.1/", 2, "not a valid Redis URL: http://127.0.0.1/: a Redis URL starts with one of "),
    ("redis://127.0.0.1:notaport", 2, "not a valid Redis URL: redis://127.0.0.1:notaport (Port could not be cast"),
    ("redis://127.0.0.1:6379/zero", 2, "not a valid Redis URL: redis://127.0.0.1:6379/zero: the path names a database "),
    ("unix:///nonexistent/redis.sock", 1, "cannot reach Redis at unix:///nonexistent/redis.sock: "),
])
def test_a_bad_or_dead_url_is_one_line(url, status, says):
    process = spawn("delayed.worker", "tests.tasks", redis_url=url)
    output, _ = process.communicate(timeout=WAIT)
    assert process.returncode == status
    assert output.count("\n") == 1 and output.startswith("delayed.worker: " + says), output


@pytest.mark.parametrize("url, says", [
    ("redis+sentinel://:s3cret@127.0.0.1:1", "give the master's name after the sentinels"),
    ("redis+cluster://:s3cret@127.0.0.1", "name each node as host:port"),
    ("redis+cluster://127.0.0.1:1/2", "a cluster has no databases but 0"),
])
def test_a_malformed_cluster_or_sentinel_url_is_one_line_without_its_password(url, says):
    process = spawn("delayed.sweeper", redis_url=url)
    output, _ = process.communicate(timeout=WAIT)
    assert process.returncode == 2
    assert output.count("\n") == 1 and says in output and "s3cret" not in output, output


def test_the_command_line_takes_cluster_and_sentinel_urls(cluster, sentinels):
    for url in (cluster.url, sentinels.url):
        process = spawn("delayed", "stats", "--json", redis_url=url)
        output, _ = process.communicate(timeout=30)
        assert process.returncode == 0, output


def enqueue_with_connect(url, monkeypatch, name="q"):
    """With $DELAYED_REDIS_URL set to url, enqueue m:f(1) through connect() and m:f(2) through connect_async()."""
    monkeypatch.setenv("DELAYED_REDIS_URL", url)
    client = connect()
    Queue(name, client).enqueue(PyTask("m:f", [1]))
    client.close()

    async def produce():
        client = connect_async()
        await AsyncQueue(name, client).enqueue(PyTask("m:f", [2]))
        await client.aclose()

    asyncio.run(produce())


def args_in(client, name):
    return [PyTask.deserialize(blob).args for blob in client.lrange(name, 0, -1)]


def test_connect_reaches_the_redis_delayed_redis_url_names(redis_server, monkeypatch):
    """Both tasks land in the database the variable names (3 here), not in database 0."""
    redis.Redis(port=redis_server.port).flushall()  # database 0 too: a test before may have left a queue q there
    enqueue_with_connect(f"redis://127.0.0.1:{redis_server.port}/3", monkeypatch)
    assert args_in(redis.Redis(port=redis_server.port, db=3), "q") == [[1], [2]]
    assert not redis.Redis(port=redis_server.port, db=0).exists("q")


def default_url_of_the_command_line() -> str:
    parser = argparse.ArgumentParser()
    add_connection_options(parser)
    return parser.parse_args([]).redis_url


def test_without_the_variable_connect_and_the_command_line_use_localhost(monkeypatch):
    monkeypatch.delenv("DELAYED_REDIS_URL", raising=False)
    for client in (connect(), connect_async()):
        assert {key: client.connection_pool.connection_kwargs[key] for key in ("host", "port", "db")} == \
            {"host": "localhost", "port": 6379, "db": 0}
    assert default_url_of_the_command_line() == "redis://localhost:6379/0"
    monkeypatch.setenv("DELAYED_REDIS_URL", "redis://elsewhere:1/2")
    assert default_url_of_the_command_line() == "redis://elsewhere:1/2"


def test_connect_takes_a_password_a_unix_socket_and_tls(tmp_path, certificates, monkeypatch):
    socket = tmp_path / "redis.sock"
    with RedisServer(tmp_path, ["--requirepass", "s3cret", "--unixsocket", str(socket)]) as server:
        mine = redis.Redis(port=server.port, password="s3cret")
        enqueue_with_connect(f"redis://:s3cret@127.0.0.1:{server.port}/0", monkeypatch, "password")
        enqueue_with_connect(f"unix://:s3cret@{socket}?db=0", monkeypatch, "socket")
        assert args_in(mine, "password") == args_in(mine, "socket") == [[1], [2]]
    with tls_server(tmp_path, certificates, verify_clients=False) as server:
        url = f"rediss://127.0.0.1:{server.port}/0?ssl_ca_certs={certificates / 'ca.crt'}"
        enqueue_with_connect(url, monkeypatch)
        assert args_in(redis.Redis.from_url(url), "q") == [[1], [2]]


def test_connect_takes_cluster_and_sentinel_urls(cluster, sentinels, monkeypatch):
    enqueue_with_connect(cluster.url, monkeypatch, "{q}")
    assert args_in(redis.Redis(port=cluster.primary_for("{q}").port), "{q}") == [[1], [2]]
    enqueue_with_connect(sentinels.url + "/2", monkeypatch)
    assert args_in(redis.Redis(port=sentinels.primary.port, db=2), "q") == [[1], [2]]


@pytest.mark.parametrize("url, says", [
    ("", "an empty URL: a Redis URL starts with one of redis://, rediss://, unix://, "),
    ("localhost:6379", "localhost:6379: a Redis URL starts with one of "),
    ("redis://:s3cret@127.0.0.1:notaport/0", "redis://:***@127.0.0.1:notaport/0"),
    ("redis://127.0.0.1:notaport", "redis://127.0.0.1:notaport (Port could not be cast to integer value"),
    ("redis://:s3cret@127.0.0.1:6379/db1", "redis://:***@127.0.0.1:6379/db1: the path names a database by its number"),
    ("redis://:s3/cret@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0: its password holds a '/': percent-encode"),
    ("redis+cluster://:s3cret@127.0.0.1", "redis+cluster://:***@127.0.0.1: name each node as host:port"),
    ("redis+sentinel://:s3cret@127.0.0.1:1", "redis+sentinel://:***@127.0.0.1:1: give the master's name after the sentinels"),
])
def test_a_url_that_does_not_parse_is_a_redis_url_error_without_its_password(url, says, monkeypatch):
    """Raised as the client is made, before anything is sent; from the variable as from the argument."""
    monkeypatch.setenv("DELAYED_REDIS_URL", url)
    for make in (lambda: connect(url), lambda: connect_async(url), connect, connect_async):
        with pytest.raises(RedisURLError) as raised:
            make()
        assert str(raised.value).startswith(says) and "s3" not in str(raised.value)
        assert isinstance(raised.value, ValueError) and isinstance(raised.value, DelayedError)
