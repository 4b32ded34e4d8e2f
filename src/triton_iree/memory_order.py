"""Memory order inside one program: which loads must be copied when they execute.

Triton gives one program's loads and stores to the same address program order. The emitted
module does not get that for free:

- IREE bufferizes a ``dispatch.tensor.load`` of a read-write binding as a *view* of the binding,
  with no copy, and the op is pure. A loaded tile is read only where its consumers run, and
  IREE may move consumers: tile-and-fuse pulls producers into the loop nest of a later
  consumer, loop-invariant code motion hoists loads and their pure consumers out of loops, and
  empty-tensor elimination lets a consumer write straight into a store's destination.
- Gathers (``tensor.extract`` of the whole buffer inside a consumer) behave the same way.

So a load executes as a *snapshot*, ``bufferization.alloc_tensor() copy(...)`` right where
the program loads, when a store to its buffer (to any buffer, when arguments may share memory)
can come between the load and a read of its value:

- a store before the load: IREE may merge the load and its consumers with identical ones
  from before that store;
- a store in a loop around the load (the next iteration; code motion out of the loop), or in
  a loop that carries a value computed from the load;
- a store after the load and at or before its last (transitive) use.

A copy allocates, so IREE neither hoists, merges nor fuses it, and later stores cannot change
it. One case stays a view: the only such store writes, at exactly the addresses the load read,
values computed from it by elementwise ops alone, outside any loop (``x = load(p);
store(p, x * 2)``) or in the same loop body, at addresses that move with the loop's induction
variable (so that no load is hoisted out of the loop): every element is read before it is
written. Gathers and scatters have
unknown addresses: they count as touching the whole buffer and never take that exception.

On GPUs a program is a workgroup of threads, and a thread may read or write an element another
thread stored: ``stores_before_access`` are the stores followed by an access to memory they may
have written, after which the lowering puts a workgroup barrier.
"""
from __future__ import annotations

from . import tile as t
from .forms import Facts, StructuredAccess

# Ops through which an in-place store reads each element before writing it.
_ELEMENTWISE = (t.Elementwise, t.Splat, t.Broadcast, t.Constant)


class _Order:
    def __init__(self, kernel: t.Kernel):
        self.pos: dict[int, int] = {}      # id(op) -> preorder position
        self.end: dict[int, int] = {}      # id(op) -> last position inside its regions
        self.loops: dict[int, tuple[t.Op, ...]] = {}   # id(op) -> loops (for, while) around it
        self.branches: dict[int, dict[int, int]] = {}   # id(op) -> {id(if): its region holding op}
        n = 0

        def visit(b: t.Block, loops: tuple[t.Op, ...], branches: dict[int, int]) -> None:
            nonlocal n
            for op in b.ops:
                self.pos[id(op)] = n
                self.loops[id(op)] = loops
                self.branches[id(op)] = branches
                n += 1
                for i, r in enumerate(op.regions()):
                    visit(r, loops + (op,) if isinstance(op, (t.For, t.While)) else loops,
                          {**branches, id(op): i} if isinstance(op, t.If) else branches)
                self.end[id(op)] = n - 1

        visit(kernel.body, (), {})

    def inside(self, op: t.Op, region_op: t.Op) -> bool:
        return self.pos[id(region_op)] < self.pos[id(op)] <= self.end[id(region_op)]

    def exclusive(self, a: t.Op, b: t.Op) -> bool:
        """`a` and `b` are in different branches of one `if`: one execution of it runs one."""
        ba, bb = self.branches[id(a)], self.branches[id(b)]
        return any(bb.get(k, i) != i for k, i in ba.items())

    def last_read(self, user: t.Op, load: t.Load) -> int:
        """The last position at which `user` may read `load`'s value: the end of the outermost
        loop around the user that is not around the load (it reads again each iteration)."""
        outer = [lp for lp in self.loops[id(user)] if lp not in self.loops[id(load)]]
        return self.end[id(outer[0] if outer else user)]


def _derived(load: t.Load, uses: dict[int, list[t.Op]], order: _Order):
    """The ops that read `load`'s value, directly or through values computed from it, and the
    loops that carry such a value across iterations. A scalar that a loop around the load
    yields is final when the loop ends, before anything after it: its readers are not followed."""
    seen: set[int] = set()
    users: dict[int, t.Op] = {}
    carriers: dict[int, t.Op] = {}
    work = [load.result]
    while work:
        v = work.pop()
        if v.id in seen:
            continue
        seen.add(v.id)
        for op in uses.get(v.id, []):
            users[id(op)] = op
            around = isinstance(op, t.For) and order.inside(load, op)
            work.extend(r for r in op.results if r.is_tile or not around)
            if isinstance(op, t.For):
                # As an init or a yielded value: every iteration may read it.
                carriers[id(op)] = op
                work.extend(op.iter_args)
            elif isinstance(op, t.While):
                carriers[id(op)] = op
                work.extend(op.before.args + op.after.args)
    return list(users.values()), list(carriers.values())


def snapshot_loads(kernel: t.Kernel, facts: Facts, may_alias: bool = False) -> set[int]:
    """ids of the Load ops that must copy what they read when they execute.

    `may_alias`: pointer arguments may share memory, so a store to any buffer counts as a
    store to every buffer."""
    # An atomic reads and then writes its addresses: it counts as a store (its own read is
    # per element, at its place in the program).
    stores = [op for op in kernel.walk() if isinstance(op, (t.Store, t.Atomic))]
    if not stores:
        return set()
    order = _Order(kernel)
    uses = t.uses(kernel)
    out: set[int] = set()
    for load in kernel.walk():
        if not isinstance(load, t.Load) or load.result.id not in facts.live:
            continue
        users, carriers = _derived(load, uses, order)
        at = order.pos[id(load)]
        last = max((order.last_read(u, load) for u in users), default=at)
        loops = order.loops[id(load)] + tuple(carriers)
        # Stores before the load (IREE may merge its view and consumers with identical ones
        # from before the store), in a loop around it or carrying it, or before its last use.
        # A store in the other branch of an `if` around the load is not before it, unless a
        # loop around both repeats the `if`.
        hazards = [s for s in stores if (may_alias or s.buffer is load.buffer)
                   and (order.pos[id(s)] <= last and not order.exclusive(s, load)
                        or any(order.inside(s, lp) for lp in loops))]
        if hazards and not _in_place(load, hazards, users, order, facts):
            out.add(id(load))
    return out


def _in_place(load: t.Load, hazards: list[t.Store | t.Atomic], users: list[t.Op], order: _Order,
              facts: Facts) -> bool:
    """The one store writes, element by element, values computed by elementwise ops from what
    the load read at the same addresses, as the load's last use, in the same iteration of the
    same loops, if any: then each element is read before it is overwritten."""
    if len(hazards) != 1 or not load.result.is_tile:
        return False
    store = hazards[0]
    loops = order.loops[id(load)]
    if (not isinstance(store, t.Store) or store.buffer is not load.buffer
            or order.pos[id(store)] < order.pos[id(load)] or order.loops[id(store)] != loops):
        return False
    la, sa = facts.access(load), facts.access(store)
    if not (isinstance(la, StructuredAccess) and isinstance(sa, StructuredAccess)):
        return False
    if loops and not (isinstance(loops[-1], t.For) and
                      any(("v", loops[-1].iv.id) in mono for mono in la.form.offset.terms)):
        # In a loop, the addresses must move with its induction variable: a load at the same
        # addresses in every iteration may be hoisted out of the loop, before the stores.
        return False
    if la.form != sa.form or load.result.shape != store.value.shape:
        return False
    return all(u is store or (isinstance(u, _ELEMENTWISE) and order.pos[id(u)] < order.pos[id(store)])
               for u in users)


def stores_before_access(kernel: t.Kernel, may_alias: bool = False) -> set[int]:
    """ids of the Store ops followed, in program order or in a later iteration of a loop around
    them, by a load or store of their buffer (of any buffer, when arguments may share memory)."""
    stores = [op for op in kernel.walk() if isinstance(op, t.Store)]
    if not stores:
        return set()
    order = _Order(kernel)
    accesses = [op for op in kernel.walk() if isinstance(op, (t.Load, t.Store, t.Atomic))]
    out: set[int] = set()
    for s in stores:
        for a in accesses:
            if a is s or not (may_alias or a.buffer is s.buffer):
                continue
            if order.pos[id(a)] > order.pos[id(s)] or any(order.inside(a, lp) for lp in order.loops[id(s)]):
                out.add(id(s))
                break
    return out
