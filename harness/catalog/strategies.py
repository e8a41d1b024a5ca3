"""Every strategy compat runs, in one table: the ranks it takes, what trains it and how its cells
start, what it shards or offloads, and what `compat fit` models it as. The matrix, the runner,
the fit, the resolver and preflight look strategies up here, and the runner writes a cell's facts
into its spec, so the workloads keep no table of their own. Adding a strategy is one record here
(and the workload's branch that trains it); tests/unit/test_strategies.py adds one and follows it
through `compat list`, `compat fit` and a cell's spec.

The order of the table is the order of the strategy axis (matrix/axes.toml takes its values from
here), of `compat fit --strategy`, and, among the strategies `recommend` may choose, from the
fastest to the leanest.
"""

from __future__ import annotations

import dataclasses

TRAINER = "finetune"  # harness/workloads/finetune.py: the Hugging Face Trainer, as users run it
NATIVE = "native"  # harness/workloads/native.py: torch's own FSDP2 / DDP and a plain AdamW loop

NO_CPU_FSDP = (
    "accelerate has no FSDP on a CPU host: it turns FSDP on only for GPU-like devices, so the Trainer trains an FSDP "
    "config as DDP there (accelerate 1.15, state.py, AcceleratorState), and accelerate 1.6's FSDP plugin refuses "
    'outright ("There are currently no available devices found"). The torch-native path, strategy fsdp2_native, '
    "shards on a CPU"
)


@dataclasses.dataclass(frozen=True)
class Strategy:
    name: str
    min_ranks: int
    max_ranks: int | None  # None: no limit
    workload: str  # TRAINER or NATIVE
    zero_stage: int | None = None  # DeepSpeed ZeRO stage: passed to the Trainer as a config, launched by deepspeed
    offload: bool = False  # DeepSpeed offloads optimizer state and parameters to pinned CPU memory
    fsdp_version: int | None = None  # FSDP1 or FSDP2 (the Trainer's through accelerate; the native path's fully_shard)
    cpu_unsupported: str | None = None  # why a CPU host cannot run it (its cells are recorded unsupported)
    # compat fit: the strategy whose memory model it shares (itself when it has its own), and for
    # one that has its own: what it divides over the cards, whether DDP's gradient buckets add a
    # copy, and why, in a sentence ({n}: the cards)
    fit_as: str = ""
    shards: tuple[str, ...] = ()  # of "weights", "gradients", "optimizer"
    buckets: bool = False
    fit_why: str = ""
    recommend_rank: int | None = None  # recommend --model-size tries its strategies in this order (None: never)

    @property
    def fit_model(self) -> "Strategy":
        return get(self.fit_as or self.name)

    @property
    def deepspeed(self) -> bool:
        return self.zero_stage is not None

    @property
    def trainer_fsdp(self) -> bool:
        """The Trainer's FSDP, through accelerate (FSDP settings as users give them apply)."""
        return self.workload == TRAINER and self.fsdp_version is not None

    def takes(self, ranks: int) -> bool:
        return self.min_ranks <= ranks <= (self.max_ranks or ranks)

    def launcher(self, ranks: int) -> str:
        """How a cell with `ranks` ranks starts: the deepspeed launcher for DeepSpeed (1 rank too),
        torchrun for several ranks and for the native path (it makes its process group even for
        one), else one python process."""
        if self.deepspeed:
            return "deepspeed"
        return "torchrun" if ranks > 1 or self.workload == NATIVE else "python"

    def spec(self) -> dict:
        """What the workload needs to know of the strategy, written into a cell's spec."""
        return {
            "workload": self.workload,
            "zero_stage": self.zero_stage,
            "offload": self.offload,
            "fsdp_version": self.fsdp_version,
        }


TABLE = (
    Strategy("single", 1, 1, TRAINER, shards=(), fit_why="one card holds everything", recommend_rank=1),
    Strategy(
        "ddp",
        2,
        None,
        TRAINER,
        buckets=True,
        recommend_rank=2,
        fit_why="DDP keeps the whole model, its gradients and optimizer state on each of the {n} cards; more cards add "
        "throughput but never lower the per-card peak",
    ),
    Strategy(
        "fsdp",
        2,
        None,
        TRAINER,
        fsdp_version=1,
        cpu_unsupported=NO_CPU_FSDP,
        shards=("weights", "gradients", "optimizer"),
        fit_why="FSDP full shard divides weights, gradients and optimizer state over {n} cards, gathering one "
        "layer at a time",
    ),
    Strategy(
        "fsdp2", 2, None, TRAINER, fsdp_version=2, cpu_unsupported=NO_CPU_FSDP, fit_as="fsdp"
    ),  # shards as FSDP1's full shard
    Strategy(
        "zero2",
        1,
        None,
        TRAINER,
        zero_stage=2,
        shards=("gradients", "optimizer"),
        recommend_rank=3,
        fit_why="ZeRO-2 divides gradients and optimizer state over {n} cards; every card still holds all weights",
    ),
    Strategy(
        "zero3",
        1,
        None,
        TRAINER,
        zero_stage=3,
        shards=("weights", "gradients", "optimizer"),
        recommend_rank=4,
        fit_why="ZeRO-3 divides weights, gradients and optimizer state over {n} cards, gathering one layer at a time",
    ),
    Strategy(
        "zero3_offload",
        1,
        None,
        TRAINER,
        zero_stage=3,
        offload=True,
        shards=("weights", "gradients", "optimizer"),
        recommend_rank=5,
        fit_why="ZeRO-3 with offload keeps parameters, gradients and optimizer state in host memory and gathers "
        "one layer "
        "at a time onto the card: least card memory, slowest steps",
    ),
    # fully_shard on a mesh of one shards nothing, and measures its cost; the native paths place
    # memory as the Trainer's strategies they mirror
    Strategy("fsdp2_native", 1, None, NATIVE, fsdp_version=2, fit_as="fsdp"),
    Strategy("ddp_native", 2, None, NATIVE, fit_as="ddp"),
)
BY_NAME = {s.name: s for s in TABLE}


def names() -> list[str]:
    return [s.name for s in TABLE]


def get(name: str) -> Strategy:
    """The strategy of that name (KeyError for a name the table does not have: callers check
    names against the axis first)."""
    return BY_NAME[name]


def modelled_as(name: str) -> str:
    """The strategy whose memory model `compat fit` uses for a cell's strategy (a name this table
    does not have is itself)."""
    found = BY_NAME.get(name)
    return (found.fit_as or found.name) if found else name


def fit_models(cards: int | None = None) -> tuple[str, ...]:
    """The strategies `compat fit` has a memory model of (with `cards`: those of for_cards), in
    the order recommend tries them, then the ones it never picks."""
    pool = TABLE if cards is None else for_cards(cards)
    ranked = sorted((s for s in pool if not s.fit_as), key=lambda s: (s.recommend_rank is None, s.recommend_rank or 0))
    return tuple(s.name for s in ranked)


def one_process() -> Strategy:
    """The strategy of one process on one card."""
    return next(s for s in TABLE if s.max_ranks == 1)


def data_parallel(ranks: int) -> Strategy:
    """A whole copy of the model per rank through the Trainer (one process for one rank): what
    accelerate's MULTI_GPU and a plain launcher mean."""
    if ranks == 1:
        return one_process()
    return next(s for s in TABLE if s.workload == TRAINER and s.buckets)


def full_shard(offload: bool = False) -> Strategy:
    """The leanest strategy on the cards (ZeRO-3), with or without offloading to the host."""
    return for_deepspeed(3, offload)


def for_deepspeed(stage: int, offload: bool) -> Strategy | None:
    """The strategy of a DeepSpeed config: its ZeRO stage and whether it offloads (only stage 3
    has an offloading strategy of its own)."""
    found = [s for s in TABLE if s.zero_stage == stage]
    return next((s for s in found if s.offload == offload), found[0] if found else None)


def for_trainer_fsdp(version: int) -> Strategy:
    """The Trainer's FSDP strategy of that FSDP version (1 unless it is 2)."""
    return next(s for s in TABLE if s.trainer_fsdp and s.fsdp_version == (2 if version == 2 else 1))


def for_cards(cards: int) -> list[Strategy]:
    """The strategies `compat fit` and `recommend` consider for `cards` cards, in table order: on
    one card the one-process strategy, on several every strategy that takes that many."""
    return [s for s in TABLE if s.takes(cards) and (cards == 1) == (s.max_ranks == 1)]


def recommendable(cards: int, offload: bool) -> list[str]:
    """The strategies `recommend --model-size` tries on `cards` cards, fastest first: those of
    for_cards that do not offload, or (with `offload`) those that do, on any number of cards."""
    pool = [s for s in TABLE if s.offload] if offload else [s for s in for_cards(cards) if not s.offload]
    return [s.name for s in sorted((s for s in pool if s.recommend_rank is not None), key=lambda s: s.recommend_rank)]
