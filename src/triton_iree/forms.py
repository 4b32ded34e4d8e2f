"""The forms the analyses (`analysis`) write their facts in, and the facts.

- Polynomials over scalar atoms (SSA values, and `Carried` loop offsets), and affine forms of
  offset tiles: ``offset + sum_d index_d * stride_d``.
- Masks as boxes: per dim, ``lo <= index < hi``, plus scalar conditions.
- Accesses: structured (a slice) or gathers / scatters.
- The version plan's bounds and peeled loops, and `Facts`, all an analysis run says.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from . import tile as t
from .errors import InputError, tile_op_name


# --- polynomials over scalar atoms ---------------------------------------------------------


@dataclass(frozen=True)
class Carried:
    """A scalar the emitter adds to a loop: the offset of a loop-carried pointer tile.

    kind 'arg' is the value inside the body (block argument), 'result' the value after it.
    """
    loop: t.For
    index: int
    kind: str

    def key(self):
        return ("c", id(self.loop), self.index, self.kind)


Atom = Union[t.Value, Carried]


def _atom_key(a: Atom):
    return ("v", a.id) if isinstance(a, t.Value) else a.key()


class Poly:
    """An integer polynomial: {monomial (sorted atom keys): coefficient}."""
    __slots__ = ("terms", "atoms")

    def __init__(self, terms=None, atoms=None):
        self.terms: dict[tuple, int] = {k: c for k, c in (terms or {}).items() if c != 0}
        self.atoms: dict[tuple, Atom] = atoms or {}

    @staticmethod
    def const(c: int) -> "Poly":
        return Poly({(): c})

    @staticmethod
    def atom(a: Atom) -> "Poly":
        k = _atom_key(a)
        return Poly({(k,): 1}, {k: a})

    def _merge_atoms(self, other: "Poly") -> dict:
        return {**self.atoms, **other.atoms}

    def __add__(self, other: "Poly") -> "Poly":
        terms = dict(self.terms)
        for k, c in other.terms.items():
            terms[k] = terms.get(k, 0) + c
        return Poly(terms, self._merge_atoms(other))

    def __neg__(self) -> "Poly":
        return Poly({k: -c for k, c in self.terms.items()}, self.atoms)

    def __sub__(self, other: "Poly") -> "Poly":
        return self + (-other)

    def __mul__(self, other: "Poly") -> "Poly":
        terms: dict[tuple, int] = {}
        for k1, c1 in self.terms.items():
            for k2, c2 in other.terms.items():
                k = tuple(sorted(k1 + k2))
                terms[k] = terms.get(k, 0) + c1 * c2
        return Poly(terms, self._merge_atoms(other))

    def scale(self, c: int) -> "Poly":
        return Poly({k: v * c for k, v in self.terms.items()}, self.atoms)

    @property
    def is_const(self) -> bool:
        return all(k == () for k in self.terms)

    @property
    def const_value(self) -> Optional[int]:
        return self.terms.get((), 0) if self.is_const else None

    def is_zero(self) -> bool:
        return not self.terms

    def __eq__(self, other) -> bool:
        return isinstance(other, Poly) and self.terms == other.terms

    def __hash__(self):
        return hash(tuple(sorted(self.terms.items(), key=repr)))

    def atom_list(self) -> list[Atom]:
        return list(self.atoms[k] for k in {k for m in self.terms for k in m})

    def __repr__(self) -> str:
        if not self.terms:
            return "0"
        parts = []
        for mono, c in sorted(self.terms.items(), key=repr):
            names = [repr(self.atoms[k]) for k in mono]
            parts.append("*".join(([str(c)] if c != 1 or not names else []) + names))
        return " + ".join(parts)


ZERO = Poly()


@dataclass(frozen=True)
class Affine:
    """offset + sum_d index_d * strides[d] over a tile (strides of size-1 dims are 0)."""
    offset: Poly
    strides: tuple[Poly, ...]

    @property
    def uniform(self) -> bool:
        return all(s.is_zero() for s in self.strides)

    def __add__(self, o: "Affine") -> "Affine":
        return Affine(self.offset + o.offset, tuple(a + b for a, b in zip(self.strides, o.strides)))

    def __neg__(self) -> "Affine":
        return Affine(-self.offset, tuple(-s for s in self.strides))

    def __sub__(self, o: "Affine") -> "Affine":
        return self + (-o)

    def scale(self, p: Poly) -> "Affine":
        return Affine(self.offset * p, tuple(s * p for s in self.strides))


def _reshaped(f: Affine, src: tuple[int, ...], dst: tuple[int, ...]) -> Optional[Affine]:
    """`f`, a form over a tile of shape `src`, over the tile's row-major reshape to `dst`; None
    unless `f` is linear in the row-major position (each dim's stride is the last dim's times
    the number of elements after it), as the offsets of a contiguous row-major tile are."""
    unit = next((f.strides[d] for d in reversed(range(len(src))) if src[d] > 1), ZERO)
    after = 1
    for d in reversed(range(len(src))):
        if src[d] > 1 and f.strides[d] != unit.scale(after):
            return None
        after *= src[d]
    strides, after = [], 1
    for n in reversed(dst):
        strides.insert(0, unit.scale(after))
        after *= n
    return Affine(f.offset, tuple(strides))


# --- masks ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cond:
    """A scalar condition: `poly < 0` ('lt0') or a scalar i1 value ('val')."""
    kind: str
    poly: Optional[Poly] = None
    value: Optional[t.Value] = None


@dataclass(frozen=True)
class Box:
    """Valid region per dim: max(lo) <= index < min(hi) (empty lists: unbounded), and all conds."""
    lo: tuple[tuple[Poly, ...], ...]
    hi: tuple[tuple[Poly, ...], ...]
    conds: tuple[Cond, ...] = ()

    @staticmethod
    def full(rank: int) -> "Box":
        return Box(((),) * rank, ((),) * rank)

    def __and__(self, o: "Box") -> "Box":
        return Box(tuple(a + b for a, b in zip(self.lo, o.lo)),
                   tuple(a + b for a, b in zip(self.hi, o.hi)), self.conds + o.conds)

    @property
    def trivially_full(self) -> bool:
        return not self.conds and all(not x for x in self.lo) and all(not x for x in self.hi)

    def polys(self) -> list[Poly]:
        out = [p for dim in self.lo + self.hi for p in dim]
        out += [c.poly for c in self.conds if c.poly is not None]
        return out


# --- accesses ---------------------------------------------------------------------------


@dataclass
class StructuredAccess:
    """A slice: `offset + sum_d i_d * strides[d]`, valid where `box` holds (None: no mask)."""
    form: Affine
    box: Optional[Box]
    other: Optional[t.Value]   # scalar fill value for masked-off elements (loads only)

    def polys(self) -> list[Poly]:
        return [self.form.offset, *self.form.strides] + (self.box.polys() if self.box else [])


@dataclass
class GatherAccess:
    """Per-element offsets and mask: a gather (load) or a scatter (store)."""
    reason: str


Access = Union[StructuredAccess, GatherAccess]


@dataclass
class LoopOffset:
    """A pointer tile carried by a loop, as a scalar offset: init, and the step per iteration."""
    init: Poly
    step: Poly


@dataclass(frozen=True)
class Bound:
    """One condition for a tile to be wholly valid: ``poly <= 0``, or the scalar i1 `value`."""
    poly: Optional[Poly] = None
    value: Optional[t.Value] = None


def in_i64(p: Poly, op: t.Op, kernel: str) -> Poly:
    """`p`, an offset or bound that `op` computes, if its coefficients fit in i64: else the
    input's index arithmetic overflows (a coefficient is a product or sum of its constants)."""
    bad = next((c for c in p.terms.values() if not -2 ** 63 <= c < 2 ** 63), None)
    if bad is not None:
        raise InputError(f"integer overflow in the input: {tile_op_name(op)} makes an offset or bound whose "
                         f"constant term or multiplier {bad} does not fit in 64 bits (offsets multiplied or "
                         f"added with constants too large)", kernel=kernel, loc=op.loc or None)
    return p


@dataclass
class Peel:
    """A loop whose accesses `accesses` are full in a prefix of its iterations: those whose
    induction variable iv has ``c + d * iv <= 0`` for every (c, d) in `conds` (d > 0, c computable
    at program entry)."""
    loop: t.For
    conds: list[tuple[Poly, int]] = field(default_factory=list)
    accesses: set[int] = field(default_factory=set)


@dataclass
class VersionPlan:
    """When the masked tile accesses of a program are wholly valid.

    Where every `top` bound holds at program entry, the accesses in `full` are full wherever
    they run, and those of each `peels` entry are full in the loop's leading iterations.
    Accesses in neither stay masked.
    """
    top: list[Bound] = field(default_factory=list)
    full: set[int] = field(default_factory=set)
    peels: dict[int, Peel] = field(default_factory=dict)   # id(loop) -> Peel

    def __bool__(self) -> bool:
        return bool(self.full or self.peels)


@dataclass
class Facts:
    accesses: dict[int, Access] = field(default_factory=dict)        # id(op) -> access
    loop_offsets: dict[tuple[int, int], LoopOffset] = field(default_factory=dict)  # (id(for), j)
    live: set[int] = field(default_factory=set)                      # value ids
    live_ops: set[int] = field(default_factory=set)                  # id(op) of For/If to emit
    carried_used: set[tuple[int, int]] = field(default_factory=set)  # loop offsets to emit
    entry: set[int] = field(default_factory=set)   # scalar value ids computable at program entry
    plan: VersionPlan = field(default_factory=VersionPlan)

    def access(self, op: t.Op) -> Access:
        return self.accesses[id(op)]

    def at_entry(self, p: Poly) -> bool:
        """Whether `p` only mentions values computable at program entry."""
        return all(isinstance(a, t.Value) and a.id in self.entry for a in p.atom_list())
