"""copies.BufferPool: which buffers it keeps and hands out (plain objects stand for buffers;
launches through it are tested on a Vulkan device in test_vulkan.py)."""
from triton_iree.copies import BufferPool


def test_a_buffer_is_handed_out_only_for_its_kind_and_size_and_only_once():
    pool = BufferPool(limit=100)
    a, b, c = object(), object(), object()
    pool.give([(("staging", 10), a), (("device", 10), b), (("staging", 20), c)])
    assert pool.take("device", 20) is None and pool.take("staging", 30) is None
    assert pool.take("staging", 10) is a and pool.take("staging", 10) is None
    assert pool.take("device", 10) is b and pool.take("staging", 20) is c
    assert pool.bytes == 0 and not pool.free


def test_the_most_recently_given_back_buffer_comes_first():
    pool = BufferPool(limit=100)
    old, new = object(), object()
    pool.give([(("device", 8), old)])
    pool.give([(("device", 8), new)])
    assert pool.take("device", 8) is new and pool.take("device", 8) is old


def test_over_its_limit_the_pool_drops_the_oldest_buffers():
    pool = BufferPool(limit=25)
    first, second, third, huge = object(), object(), object(), object()
    pool.give([(("staging", 10), first), (("staging", 10), second)])
    pool.give([(("device", 10), third), (("device", 26), huge)])     # huge alone is over the limit
    assert pool.bytes == 20 and [b for _, b in pool.free] == [second, third]
    pool.clear()
    assert pool.bytes == 0 and pool.take("staging", 10) is None
