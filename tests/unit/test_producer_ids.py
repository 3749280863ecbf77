from ottla.coordinator.producer_ids import ProducerIdAllocator


def test_ids_are_never_handed_out_twice_across_restarts(tmp_path):
    first = ProducerIdAllocator(str(tmp_path), block_size=10)
    issued = [first.allocate() for _ in range(13)]
    # A crash now loses the in-memory position; the persisted block end is past it.
    second = ProducerIdAllocator(str(tmp_path), block_size=10)
    more = [second.allocate() for _ in range(25)]
    assert len(set(issued + more)) == len(issued) + len(more)
    assert min(more) > max(issued)
