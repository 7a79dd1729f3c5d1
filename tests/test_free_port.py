"""delayed.testing.free_port: a cluster's node and bus ports are all picked before its first node starts."""
from delayed.testing import free_port


def test_a_port_is_never_handed_out_twice_in_one_process():
    """The kernel offers a closed probe's port again (2,000 raw probes repeat about a hundred times here),
    and two nodes of one cluster given the same port fail to start."""
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
