"""What a log says besides a known issue's exact wording, for `compat explain` (issue 21): the
exception and the package whose code raised it, the library versions and GPUs the log prints
(pip freeze / pip list lines, `transformers-cli env`, `accelerate env`, `ds_report`,
`python -m torch.utils.collect_env`, LLaMA-Factory's env banner, nvidia-smi), and the failure
family the error belongs to, with what usually causes it and the next step.

    facts = read(text, gpu_db)         # Facts: exception, package, versions, gpus, cc
    family = classify(text, facts)     # Family answer: never None for a log with an error line

A family answer is not a matched known issue and says so. Every pattern here is RE2 (linear in
the log, whatever the log), searched over the log's last lines where the error is, and over the
whole kept log for versions and GPUs.
"""

from __future__ import annotations

import collections
import dataclasses
import re

from harness.catalog import gpus as gpu_names
from harness.catalog import known_issues, outcome, strategies

TAIL_LINES = 400  # the family is read from the log's end, where the error is

# a library the log names with a version: what pip, the env reports and the banners print
LIBRARIES = {
    "pytorch": "torch",
    "torch": "torch",
    "transformers": "transformers",
    "peft": "peft",
    "accelerate": "accelerate",
    "bitsandbytes": "bitsandbytes",
    "deepspeed": "deepspeed",
    "trl": "trl",
    "flash-attn": "flash-attn",
    "flash_attn": "flash-attn",
    "xformers": "xformers",
    "datasets": "datasets",
    "tokenizers": "tokenizers",
    "numpy": "numpy",
    "triton": "triton",
    "vllm": "vllm",
    "llamafactory": "llamafactory",
    "unsloth": "unsloth",
    "axolotl": "axolotl",
    "safetensors": "safetensors",
    "optimum": "optimum",
    "auto-gptq": "auto-gptq",
}
_LIB = "|".join(sorted((re.escape(k) for k in LIBRARIES), key=len, reverse=True))
VERSION = known_issues.Signature(
    r"(?i)(?:^|[\s\[`'\"(-])(?P<name>" + _LIB + r")[`'\"]?(?:\s+(?:version|info))?(?:\s*\(GPU\?\))?"
    r"(?:\s*==\s*|\s*:\s*|\s*\.{3,}\s*|[ "
    r"\t]{2,}|\s+v?)(?P<version>\d+\.\d+(?:\.\d+)?(?:(?:rc|a|b|\.dev|\.post)\d+)?(?:\+[\w.]+)?)"
)
GPU_NAME = known_issues.Signature(
    r"(?:GPU \d+: |GPU type: |GPU model: |device name: |Device \d+ \[|^\|\s+\d+\s+)"
    r"(?P<name>(?:NVIDIA |Tesla |Quadro |GeForce )[A-Za-z0-9][A-Za-z0-9 "
    r".-]{1,40}?)(?:\s+(?:On|Off)\b|\s*\(|\s*\]|\s*$|\s{2,})"
)
CAPABILITY = known_issues.Signature(
    r"(?i)(?:CUDA capability sm_|compute capability[: ]{1,3}(?:\(CC\) )?)(?P<cc>\d{1,2}\.?\d)"
)
ZERO3 = strategies.for_deepspeed(3, False).name
# the mixed precision a log's command line, arguments or config shows (a flag at the end of a line or before another
# option, or set true); where it shows both, neither is taken
PRECISION = tuple(
    (
        name,
        known_issues.Signature(
            rf"--{name}(?:[ =](?:True|true|1)\b|[ \t]*$|[ \t]+--)|\b{name}\s*[=:]\s*(?:True|true|1)\b|"
            rf'"{name}":\s*\{{\s*"enabled":\s*true|mixed_precision\s*[=:]\s*[\'"]?{name}\b|'
            rf"torch_dtype\s*[=:]\s*(?:torch\.)?{dtype}\b"
        ),
    )
    for name, dtype in (("fp16", "float16"), ("bf16", "bfloat16"))
)
# the strategy a log shows, most specific first: a ZeRO stage, FSDP, else several ranks (DDP)
STRATEGY = (
    (ZERO3, known_issues.Signature(r'(?i)zero[_ -]?(?:stage[_ -]?)?3\b|"stage":\s*3|stage3_|zero_stage\s*[:=]\s*3')),
    (
        strategies.for_deepspeed(2, False).name,
        known_issues.Signature(r'(?i)zero[_ -]?(?:stage[_ -]?)?2\b|"stage":\s*2|zero_stage\s*[:=]\s*2'),
    ),
    (strategies.for_trainer_fsdp(1).name, known_issues.Signature(r"FullyShardedDataParallel|fsdp_config|\bFSDP\b")),
    (
        strategies.data_parallel(2).name,
        known_issues.Signature(r"DistributedDataParallel|\[rank[1-9]\d{0,4}\]|\brank\s*:\s*[1-9]|local_rank: [1-9]"),
    ),
)
# an out-of-memory on one card with no sign of another process (a launcher, a rank, a world size
# above one, torch.distributed): the strategy is one process on one card, so a cause of several
# ranks (DDP's replica, a sharded strategy's leftovers) does not hold
CUDA_OOM_ON = known_issues.Signature(
    r"CUDA out of memory\. Tried to allocate [^\n]{0,80}? GPU (?P<card>\d+) has a total"
)
SEVERAL = known_issues.Signature(
    r"(?i)\brank\s*[:=]?\s*[1-9]|\[rank\d|world[_ ]size\s*[:=]?\s*[2-9]|torchrun|torch\.distributed|"
    r"deepspeed|accelerate[ -]launch|nproc|local_rank|multi_gpu|distributed_type"
)
# a traceback's frame: Python's own, IPython's (8: `File PATH:LINE, in f`; 7 and Colab: `PATH in f(...)`,
# Colab making the path a link) and rich's (`│ PATH:LINE in f │`); frame_path() gives its file
FRAME = known_issues.Signature(
    r'File "(?P<path>[^"\n]{1,400})", line \d+'
    r'|(?m:^\s*File (?P<ipython>[^\s"][^\n]{0,400}?\.pyc?):\d+, in \w)'
    r"|(?m:^\[?(?P<ipython7>(?:/|~|[A-Za-z]:\\)[^\s\[\]()]{1,400}\.pyc?)\]?(?:\([^)\n]{0,200}\))? in \w)"
    r"|\x{2502} (?P<rich>\S{1,400}\.pyc?):\d+ in \w"
)

# a package's folder, or a one-file module
PACKAGE_DIR = re.compile(r"(?:site|dist)-packages/([A-Za-z0-9_]+)(?:/|\.pyc?$)")
REMOTE_CODE = re.compile(r"transformers_modules/(.+)/[^/]+\.py$")  # a hub model's own modeling_*.py (trust_remote_code)
# a library's own module run from a source checkout or a copy inside a project (huggingface/transformers#38294:
# /home/marc/transformers/src/transformers/...; jianzhnie/LLamaTuner#2: Chinese-Guanaco/transformers/modeling_utils.py):
# that library's code, not the project's; its examples, scripts and tests are scripts a user runs
LIBRARY_CHECKOUT = re.compile(
    r"/(transformers|peft|trl|accelerate|deepspeed|diffusers|bitsandbytes)/(?!examples/|scripts/|tests?/|docs/)"
    r"(?:[\w.-]+/){0,6}[\w.-]+\.py$"
)


def _library_dir(path: str):
    """The match naming the library whose code `path` is: an installed package (PACKAGE_DIR) or a library's source
    checkout (LIBRARY_CHECKOUT); group 1 is its name. None for a project's file or Python's own."""
    return PACKAGE_DIR.search(path) or LIBRARY_CHECKOUT.search(path)


# Python's own modules, <frozen ...>, eggs
PYTHON_OWN = re.compile(
    r"^<|/lib/python\d[\d.]*/[^/]+\.py$|/lib/python\d[\d.]*/(?!site-packages|dist-packages)[^/]+/|\.egg/"
)


# Training frameworks and libraries that check a configuration themselves, by the module folder a
# traceback's path shows (installed, or a source checkout's src/NAME/): the project, and the page
# that documents its options.
FRAMEWORKS = {
    "llamafactory": ("LLaMA-Factory", "https://github.com/hiyouga/LLaMA-Factory/tree/main/src/llamafactory/hparams"),
    "llmtuner": ("LLaMA-Factory", "https://github.com/hiyouga/LLaMA-Factory/tree/main/src/llamafactory/hparams"),
    "axolotl": ("axolotl", "https://github.com/axolotl-ai-cloud/axolotl/blob/main/docs/config-reference.qmd"),
    "trl": ("trl", "https://huggingface.co/docs/trl/index"),
    "peft": ("peft", "https://huggingface.co/docs/peft/index"),
    "swift": ("ms-swift", "https://swift.readthedocs.io/en/latest/"),
    "unsloth": ("unsloth", "https://docs.unsloth.ai/"),
    "torchtune": ("torchtune", "https://pytorch.org/torchtune/stable/index.html"),
    "transformers": ("transformers", "https://huggingface.co/docs/transformers/main_classes/trainer"),
    "accelerate": ("accelerate", "https://huggingface.co/docs/accelerate/index"),
    "deepspeed": ("DeepSpeed", "https://www.deepspeed.ai/docs/config-json/"),
}
FRAMEWORK_DIR = re.compile(r"[/\\](" + "|".join(FRAMEWORKS) + r")[/\\]")
# how a project's own check words what it refuses: an option that needs another, two that do not go
# together, a value it must have (a missing package or file is another failure: NOT_CONFIG)
CONFIG_WORDS = re.compile(
    r"\b(?:requires?|is required (?:when|for|if|with)|cannot be (?:used|combined|set|enabled)|can ?not be used|"
    r"can only be used|(?:are|is) (?:mutually exclusive|incompatible|not compatible)|not (?:yet )?supported "
    r"(?:for|with|in|when|by|on)|only (?:supports?|accepts?|works? with)|is only (?:supported|available|compatible)|"
    r"must (?:be|have|set|specify|not)|should (?:be|not)|please (?:set|specify|use|provide|pass|add|remove|disable|"
    r"enable)|you (?:must|should|need to|have to|cannot|can't)|needs? to be (?:set|specified|enabled|disabled)|"
    r"(?:is|are) not allowed|does(?: not|n't) support)\b",
    re.IGNORECASE,
)
NOT_CONFIG = re.compile(
    r"pip install|please install|is not installed|No module named|No such file|does not exist|not found|out of "
    r"memory|CUDA error|version|(?:setup|GPU|device|card|hardware|platform|system) does(?: not|n't) support|"
    r"must be (?:an? )?(?:str|string|int|integer|float|bool|list|dict|tuple|tensor)\b",
    re.IGNORECASE,
)
CONFIG_EXCEPTIONS = ("ValueError", "AssertionError", "NotImplementedError", "TypeError", "RuntimeError")
OPTION = re.compile(
    r"`(?P<tick>-{0,2}[\w.-]{2,60})`|'(?P<quote>--?[\w.-]{2,60})'|(?<![\w-])(?P<flag>--[a-z][\w-]{1,60})"
    r"|\b(?P<snake>[a-z][a-z0-9]*(?:_[a-z0-9]+){1,6})\b"
)


def frame_path(m) -> str:
    """The file of a FRAME match, whichever traceback style printed it."""
    return m.group("path") or m.group("ipython") or m.group("ipython7") or m.group("rich")


@dataclasses.dataclass
class Facts:
    exception: tuple[str, str] | None = None  # (type, message) of the last Python exception
    package: str | None = None  # the installed package whose frame is last before it
    remote_model: str | None = None  # the hub model whose own code (trust_remote_code) raised it
    project_file: str | None = (
        None  # the file of the project's own code (not an installed package's, not Python's) that raised it
    )
    framework: str | None = None  # the training framework whose code raised it (a key of FRAMEWORKS), installed or not
    strategy: str | None = (
        None  # a ZeRO stage, FSDP, or data parallel where several ranks show (STRATEGY); None: not shown
    )
    strategy_why: str = ""  # where the strategy was inferred, not printed: from what
    precision: str | None = None  # fp16 or bf16 where the log's arguments or config show one (PRECISION)
    versions: dict = dataclasses.field(default_factory=dict)  # package -> version as printed
    gpus: list = dataclasses.field(default_factory=list)  # card names, as the database names them where it knows them
    cc: str | None = None  # compute capability "X.Y": printed, or the database's for the card

    def merge(self, other: "Facts") -> None:
        """Take what another source (an --env report) says where this log says nothing."""
        for k, v in other.versions.items():
            self.versions.setdefault(k, v)
        self.gpus += [g for g in other.gpus if g not in self.gpus]
        self.cc = self.cc or other.cc
        self.strategy = self.strategy or other.strategy
        self.precision = self.precision or other.precision

    def axes(self) -> dict[str, str]:
        """The cell axes the log shows, for a known issue's conditions."""
        shown = {"strategy": self.strategy, "precision": self.precision}
        return {k: v for k, v in shown.items() if v}

    def packages(self) -> dict[str, str]:
        """The versions of the packages a known issue's conditions name, without local tags."""
        return {k: v.split("+")[0] for k, v in self.versions.items() if k in known_issues.PACKAGES}

    def describe(self) -> list[str]:
        out = []
        if self.versions:
            out.append("versions in the log: " + ", ".join(f"{k} {v}" for k, v in sorted(self.versions.items())))
        if self.strategy:
            out.append(
                f"strategy the log shows: {self.strategy}" + (f" ({self.strategy_why})" if self.strategy_why else "")
            )
        if self.precision:
            out.append(f"mixed precision the log shows: {self.precision}")
        if self.gpus or self.cc:
            out.append(
                "GPU: "
                + ", ".join(self.gpus or ["not named"])
                + (f" (compute capability {self.cc})" if self.cc else "")
            )
        return out


def read(text: str, gpu_db=None) -> Facts:
    """The facts of a cleaned log (known_issues.clean)."""
    facts = Facts(exception=outcome.raised_in_log(text))
    lowered = text.lower()  # one lower-cased copy for every pattern's needles
    for m in VERSION.finditer(text, lowered):
        name = LIBRARIES[m.group("name").lower()]
        facts.versions.setdefault(name, m.group("version"))  # the first mention: the env report comes first
    raised = _where_raised(text, facts)
    for m in GPU_NAME.finditer(text, lowered):
        name = _card(m.group("name").strip(), gpu_db)
        if name not in facts.gpus:
            facts.gpus.append(name)
    # what ran, not what the error's message refuses ("... with ZeRO-3 disabled" is no ZeRO-3 run)
    scan, scan_lowered = text, lowered
    if raised and len(raised[1]) > 20 and raised[1] in text:
        scan, scan_lowered = text.replace(raised[1], ""), lowered.replace(raised[1].lower(), "")
    facts.strategy = next((name for name, pattern in STRATEGY if pattern.search(scan, scan_lowered)), None)
    precisions = [name for name, pattern in PRECISION if pattern.search(scan, scan_lowered)]
    facts.precision = precisions[0] if len(precisions) == 1 else None
    if facts.strategy is None and len({m.group("card") for m in CUDA_OOM_ON.finditer(text, lowered)}) == 1:
        if not SEVERAL.search(text, lowered) and len(facts.gpus) <= 1:
            facts.strategy = strategies.one_process().name
            facts.strategy_why = "one card out of memory, and no sign of another process"
    cc = CAPABILITY.search(text, lowered)
    if cc:
        raw = cc.group("cc")
        facts.cc = raw if "." in raw else f"{raw[:-1]}.{raw[-1]}"
    elif gpu_db is not None and facts.gpus:
        known = [g for g in gpu_db.gpus if g.name in facts.gpus]
        facts.cc = (known[0].cc_text or None) if known else None  # a non-CUDA card has none
    return facts


def _where_raised(text: str, facts: Facts) -> tuple[str, str] | None:
    """The exception the log ends with, and (into facts) whose code raised it: a hub model's own code, an
    installed package, or the project's own file, and the training framework among them."""
    raised = facts.exception or _bare_exception(_tail(text))
    if raised:
        at = text.rfind(raised[0].rsplit(".", 1)[-1] + ":")
        frames = [frame_path(m) for m in FRAME.finditer(text[max(0, at - 20000) : at if at > 0 else len(text)])]
        last = frames[-1].replace("\\", "/") if frames else ""
        remote, installed = REMOTE_CODE.search(last), _library_dir(last)
        facts.framework = next(reversed(FRAMEWORK_DIR.findall(last)), None) if not remote else None
        if remote:
            facts.remote_model = "/".join(p for p in remote.group(1).split("/") if not re.fullmatch(r"[0-9a-f]{40}", p))
        elif installed:
            facts.package = installed.group(1)
        elif last and not PYTHON_OWN.search(last):
            facts.project_file = last.rsplit("/", 1)[-1]
    return raised


def _card(name: str, gpu_db) -> str:
    """The database's name for a card as a log prints it ('NVIDIA A100-SXM4-80GB' -> 'A100'):
    the longest alias its normalized name starts with; else the name as printed."""
    if gpu_db is None:
        return name
    wanted = gpu_names.normalize(name)
    best = None
    for gpu in gpu_db.gpus:
        for alias in (gpu.name, *gpu.aliases):
            a = gpu_names.normalize(alias)
            if a and wanted.startswith(a) and (best is None or len(a) > best[0]):
                best = (len(a), gpu.name)
    return best[1] if best else name


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    pattern: known_issues.Signature  # searched in the log's last lines
    cause: str
    step: str  # the next step; {name} fields come from the pattern's groups and the facts


# the module-missing family's pattern, read again for the module where another installed package imports it
# Python 3 quotes the name; Python 2 does not ("ImportError: No module named functions.ctc")
MISSING_MODULE = re.compile(r"(?m)No module named (?:'(?P<module>[\w.]{1,100})'|(?P<module2>[\w.]{0,99}\w)\r?$)")


def _f(name, pattern, cause, step) -> Family:
    return Family(name, known_issues.Signature(pattern), cause, step)


# Most specific first: the first family whose pattern is in the log's last lines answers.
FAMILIES = (
    _f(
        "undefined-symbol",
        r"(?P<lib>[\w./-]{1,200}\.so)[\w.]{0,10}: undefined symbol: (?P<symbol>\S{1,300})",
        "a compiled extension was built against another version of the library it links to (most often another torch, "
        "or another C++ ABI, CUDA or Python)",
        "rebuild or reinstall {lib} for the torch you have (torch {v_torch}): a prebuilt wheel must match torch's "
        "major.minor, CUDA major and C++ ABI; or install the torch it was built for",
    ),
    # a compiled module checks NumPy's C API version when it loads: built against a newer NumPy than the one
    # installed, it refuses ("module compiled against API version 0x10 but this version of numpy is 0xe"); built
    # against another one, its array structs differ in size ("numpy.dtype size changed"); its import_array() then
    # raises "numpy.core.multiarray failed to import" (https://numpy.org/doc/stable/user/troubleshooting-importerror.html)
    _f(
        "numpy-abi",
        r"module compiled against (?:ABI|API) version 0x[0-9a-fA-F]{1,8} but this version of numpy is "
        r"0x[0-9a-fA-F]{1,8}|numpy\.(?:dtype|ndarray) size changed, may indicate binary incompatibility"
        r"|numpy\.core\.(?:_multiarray_umath|multiarray|umath) failed to import",
        "a compiled module (a package's C extension) was built against another NumPy than the one installed now: "
        "installing or pinning one package moved numpy to an older or newer release than the one the others' wheels "
        "were built for",
        'install the numpy those wheels were built for: most often the newer one (`pip install -U "numpy<2"`, or the '
        "version a package's requirements pin), or reinstall the package that fails to load against the numpy you "
        'have; `pip check` and `python -c "import numpy; print(numpy.__version__)"` show what is installed',
    ),
    _f(
        "no-kernel-image",
        r"no kernel image is available for execution on the device|is not compatible with the current PyTorch "
        r"installation",
        "the installed torch (or extension) has no compiled kernels for this GPU's architecture",
        "install a torch build whose kernel list covers this card ({gpu}): `compat recommend --gpu CARD` names one "
        "and its index URL",
    ),
    _f(
        "no-gpu-visible",
        r"can only be used on CUDA|Torch not compiled with CUDA enabled|No CUDA GPUs are available|no CUDA-capable "
        r"device is detected|Found no NVIDIA driver on your system|CUDA driver version is insufficient for CUDA "
        r"runtime version|The NVIDIA driver on your system is too old|module 'torch\._C' has no attribute '_cuda_",
        "torch sees no GPU it can use: a CPU-only torch build (its version ends in +cpu, torch.version.cuda is None), "
        "a driver older than the CUDA that torch build needs, CUDA_VISIBLE_DEVICES set to none, or a machine, "
        "container or notebook runtime without a GPU attached; options that need a GPU (fp16/bf16 mixed precision, "
        "4- and 8-bit loading) are refused then, though they are right for a GPU",
        'run `python -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available())"` '
        "and `nvidia-smi` where the job runs: install a CUDA build of torch that the driver supports (`compat "
        "recommend --gpu CARD` names one), update the driver, or attach a GPU (a notebook: change the runtime type); "
        "to train on the CPU, drop the GPU-only options",
    ),
    # a device type the installed build was not made for: torch without XPU or MPS support (or a release older than
    # autocast on that device), a framework's CPU build asked for a GPU; torch's own "Torch not compiled with CUDA
    # enabled" is no-gpu-visible's, above
    _f(
        "device-not-built",
        r"is not linked with support for (?P<dev>\w{1,20}) devices|unsupported autocast device_type "
        r"'(?P<dev2>\w{1,20})'|\b[Nn]ot compiled with (?P<dev3>CUDA|ROCm|XPU|NPU|MPS|cuDNN)\b",
        "the code asks for a device ({dev}{dev2}{dev3}) that the installed framework build has no support for: a build "
        "made for another device (a CPU-only or CUDA build of torch has no Intel XPU; a CPU build of Paddle has no "
        "CUDA), or a release older than that device's support (autocast on Apple's MPS needs torch 2.5 or newer)",
        "set the script's device (its --device option or the device it hard-codes) to one this build has, or install "
        "the build made for {dev}{dev2}{dev3} (torch's own index for XPU or CUDA builds, the framework's GPU package, "
        "a newer torch for MPS autocast) in a clean environment; where the code calls autocast itself, skip it on "
        "that device",
    ),
    # built-in generics in annotations (dict[str, str]) need Python 3.9 (PEP 585) and `X | None` needs 3.10 (PEP 604):
    # an older Python evaluates them when the module or function is defined, so the TypeError comes at import time
    _f(
        "python-too-old",
        r"in <module>\n(?:[^\n]{0,300}\n){0,2}?(?P<line>(?:\w{1,30}\.)?TypeError: '(?:type|ABCMeta)' object is not "
        r"subscriptable)"
        r"|TypeError: unsupported operand type\(s\) for \|: '(?:type|ABCMeta|NoneType)' and "
        r"'(?:type|ABCMeta|NoneType)'",
        "the code uses typing newer than this Python: built-in generics in annotations (dict[str, str], list[int]) "
        "need Python 3.9 and `X | None` needs 3.10; an older Python evaluates them when the module is imported",
        "run the job with the Python the project requires (its README, setup.py's python_requires or pyproject.toml): "
        "a new environment with Python 3.10 or newer; or, to keep this Python, add `from __future__ import "
        "annotations` at the top of the file the traceback names",
    ),
    # protobuf 4.21 (May 2022) refuses _pb2 modules generated by protoc older than 3.19, as its own message says and
    # the page it names: https://developers.google.com/protocol-buffers/docs/news/2022-05-06#python-updates
    _f(
        "protobuf-generated",
        r"Descriptors cannot (?:not )?be created directly|protocol-buffers/docs/news/2022-05-06|"
        r"protobuf\.dev/news/2022-05-06",
        "the installed protobuf (4.21 or newer) cannot use the _pb2 code a package generated with an older protoc "
        "(before 3.19): a package here ships such code (tensorboard, onnx or an older tensorflow, for example)",
        "install protobuf 3.20.x (`pip install 'protobuf<3.21'`), or upgrade the package whose _pb2.py the traceback "
        "names to a release generated with a newer protoc; as a stopgap, PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python "
        "makes the pure-Python protobuf accept it (slower)",
    ),
    _f(
        "syntax-error",
        r"(?m)^\s*(?P<kind>SyntaxError|IndentationError|TabError): (?P<msg>[^\n]{1,200})$",
        "Python could not parse the source file the traceback names last: the code uses syntax newer than this Python "
        "(f-strings need 3.6, `:=` 3.8, `match` 3.10), the installed release is broken, or the file is not Python at "
        "all (an HTML page or a git-lfs pointer that a failed download saved in place of the code)",
        "look at the file and line shown above the error: if it is HTML or a pointer, download that file again; else "
        "compare your Python (`python --version`) with the one the package or project requires (`Requires-Python` on "
        "PyPI, or its README) and run it with that Python, or reinstall the package the file belongs to ({pkg}) with "
        "`pip install --force-reinstall --no-cache-dir`, or its release before if the newest is broken; if the file is "
        "the project's own code (not under site-packages), update the project to its latest commit: a published file "
        "that does not parse is fixed there",
    ),
    # a script that imports its own package relatively (`from .data import *`) started as a file: Python's import
    # system knows no package for it (https://docs.python.org/3/reference/import.html#package-relative-imports;
    # acbull/pyHGT#12: the repository moved its modules and the example kept the relative import)
    _f(
        "relative-import",
        r"attempted relative import with no known parent package",
        "the script imports from its own package with a relative import (`from .x import ...`) and was started as a "
        "file (`python path/to/script.py`), so Python does not know which package it belongs to; or the project "
        "moved its modules and this script's import was not updated",
        "run it as a module of its package, from the folder above the package (`python -m package.script`, the form "
        "the project's README gives), or install the project (`pip install -e .`); if the README runs it as a file, "
        "update the project to its latest commit (its imports were fixed there) or change the import to the "
        "absolute one (`from package.x import ...`)",
    ),
    _f(
        "shadowed-module",
        r"cannot import name '(?P<name>[\w.]{1,100})' from (?:partially initialized module )?"
        r"'(?P<module>[\w.]{1,100})' \((?:most likely due to a circular import|unknown location)\)",
        "Python found something other than the installed {module} under that name: a file or folder of yours named "
        "like "
        "it ({module}.py, or a folder {module}/ in the directory you run from or on PYTHONPATH) comes first on the "
        "path, "
        "so the import loops into your file or finds an empty folder; less often the package's install is partial "
        "(a failed upgrade) or a package it imports fails while it loads",
        'look at what Python found (the path at the end of the message, or `python -c "import {module}; '
        'print({module}.__path__)"` run from the same directory): rename your file or folder of that name and delete '
        "its __pycache__, or run from another directory; if it is the installed package, reinstall it (`pip install "
        "--force-reinstall --no-deps {top}`) and check that the libraries it imports load on their own",
    ),
    _f(
        "package-needed",
        r"(?:You need to have|make sure you have|Please make sure you have|Could not import) `?(?P<need>[A-Za-z][\w.-]"
        r"{1,60})`? (?:installed|python package)|requires the (?P<need2>[A-Za-z][\w.-]{1,60}) library but it was not "
        r"found in your environment|No package metadata was found for (?P<need3>[A-Za-z][\w.-]{0,60}\w)",
        "the code needs {need}{need2}{need3}, and this environment does not have it (or has it where this Python does "
        "not look: installed into another environment, or after the process or notebook started)",
        "install it in the environment that runs the job (`python -m pip install {need}{need2}{need3}`), then start "
        "the process again (in a notebook, restart the runtime: a module imported before the install is not loaded "
        "again); if it is installed, check that this Python sees it (`python -m pip show {need}{need2}{need3}` with "
        "the same python); if it does not install on this platform, the model or option that needs it does not run "
        "here",
    ),
    _f(
        "hub-access",
        r"(?:401|403) Client Error[^\n]{0,200}huggingface\.co|GatedRepoError|Cannot access gated repo|You are trying "
        r"to access a gated repo|Invalid user token|Invalid token passed",
        "the Hugging Face hub refused the request: no token was given (not logged in where the job runs), the token "
        "lacks the right (a read token used to create or push a repository), or the model is gated and its terms were "
        "not accepted with this account",
        "log in where the job runs (`huggingface-cli login`, or HF_TOKEN in its environment) with a token that has "
        "write access if the job pushes (push_to_hub, hub_model_id), or turn pushing off; for a gated model accept its "
        "terms on the model's page with the same account",
    ),
    _f(
        "import-name",
        r"cannot import name '(?P<name>[\w.]{1,100})' from '(?P<module>[\w.]{1,100})'"
        r"|(?m:from (?P<module2>[\w.]{1,100}) import [^\n]{0,300}\n\s{0,20}ImportError: cannot import name "
        r"'?(?P<name2>\w{1,100})'?\s*$)",
        "the installed {module} has no {name}: it was removed or renamed in a newer {module}, or added after the "
        "installed one (an example script from the library's main branch run against a released version), or "
        "{module} exports it only when an optional package it needs is installed (scikit-learn for transformers' "
        "metrics)",
        "compare your {top} version ({v_top}) with the one your training code was written for: upgrade {top} if the "
        "code is newer (for a script from its main branch, install it from source, or take the script from your "
        "release's tag), or pin the version the code names; if {name} needs an optional package, install that",
    ),
    # pkg_resources is setuptools' module, not a package of its own: setuptools 82.0.0 removed it (its NEWS,
    # https://setuptools.pypa.io/en/latest/history.html#v82-0-0), and a venv of Python 3.12+ has no setuptools
    # (https://docs.python.org/3/library/venv.html); bmaltais/kohya_ss#3492 (setuptools==81.0.0 fixed it), #2421
    _f(
        "pkg-resources",
        r"No module named '?pkg_resources(?:'|\r?$)",
        "the code imports pkg_resources, which is not a package of its own but a module of setuptools: this "
        "environment has no setuptools that ships it (setuptools 82 and newer removed pkg_resources, and a virtual "
        "environment of Python 3.12 or newer gets no setuptools at all), or the Python is newer than the one the "
        "project supports",
        "install a setuptools that still ships it in the environment that runs the job (`python -m pip install "
        '"setuptools<82"`), or use the Python version the project\'s README names; `pip install pkg_resources` '
        "installs nothing useful; a newer release of the project may no longer import it",
    ),
    # a package's compiled part (quant_cuda, exllamav2_ext, amp_C, mmcv._ext, a repo's ops._C): the package or
    # repository is there, its C++/CUDA extension was not built
    _f(
        "extension-not-built",
        r"No module named '(?P<ext>(?:[\w.]{1,100}\.)?(?:_C|_ext|[A-Za-z]\w{0,60}_(?:cuda|ext|C|cpp|kernels?)))'",
        "{ext} is the compiled (C++/CUDA) part of a package or repository, and it was not built or not installed: "
        "a source install that skipped or failed its extension build (no CUDA toolkit or GPU seen at install time, "
        "the build option not given), a pure-Python wheel, or a build left in another folder than the one imported "
        "(Python run from inside the package's source folder imports that unbuilt folder, not the installed copy)",
        "reinstall that package with its extension built, in the environment that runs the job: a prebuilt wheel made "
        "for your torch, CUDA and Python, or a source build with nvcc and CUDA_HOME of torch's CUDA (`pip install "
        "--no-build-isolation ...`, with the build option its README names, such as apex's --cuda_ext or "
        "MMCV_WITH_OPS=1; a repository's own ops: its `python setup.py develop` or `build_ext --inplace` step); "
        'read the build output for its first error; then `python -c "import {ext}"` must pass; where the '
        "traceback's path for it is the package's source folder and the package is installed, run from another "
        "directory",
    ),
    _f(
        "module-missing",
        MISSING_MODULE.pattern,
        "a package the code imports is not installed in this environment (or a submodule moved in a newer release); "
        "where {top} is a module of the project itself, not a package, the project's commit and the script disagree "
        "(the module was renamed or not yet added) or the script runs from another folder than the project's; where "
        "the project's installer or setup script ran, it stopped part-way or has a bug and left packages out; where "
        "an installed package's own code imports {module}, that release may have shipped without it; where {top} is "
        "a git submodule of the repository (a folder under submodules/ or third_party/), it was not cloned; or the "
        "import misspells the package's name",
        "check the name's spelling first (a misspelled name can install an unrelated package); for a git submodule "
        "of the repository, `git submodule update --init --recursive`, then install it as the README says; else "
        "install {dist} in the environment that runs the job (`python -m pip install {dist}`), or, if {top} is "
        "installed, check whether {module} moved between its versions; if {top} belongs to the project you run, run "
        "from the project's root (or `pip install -e .` there), update the project to its latest commit, or use the "
        "script its README names for this model (an old example may import what the project no longer has); after an "
        "installer or setup script, read its output for the first step that failed and run it again, or take the "
        "project's fixed installer (its latest release); for a package's own missing module, install its release "
        "before, or the fixed one its issues name",
    ),
    _f(
        "model-class",
        r"Unrecognized configuration class\s{1,4}<class\s{1,4}'(?P<cfg>[\w.]{1,200})'>\s{1,4}for this kind of "
        r"AutoModel:\s{1,4}"
        r"(?P<auto>\w{1,60})",
        "{auto} cannot build this model: its configuration ({cfg}) is of an architecture that class does not "
        "map: most often a vision-language or audio model loaded through the text-only class, a model newer "
        "than the installed transformers ({v_transformers}), or a model with its own code (trust_remote_code) whose "
        "config maps only other Auto classes (its config.json's auto_map lists them: ChatGLM's maps AutoModel)",
        "load it with the class its model card names (AutoModelForImageTextToText or AutoModelForVision2Seq, or "
        "the model's own class, such as Qwen2VLForConditionalGeneration, or the Auto class its auto_map lists, with "
        "trust_remote_code=True), and in a training framework choose the model's multimodal template or stage, or "
        "the framework release that supports this model; if the card asks for a newer transformers than yours, "
        "upgrade it",
    ),
    _f(
        "registry-missing",
        r"(?P<name>[\w.]{1,100}) is not in the (?P<registry>[\w.:]{1,100}) registry",
        "{name} is not registered in the {registry} registry: the module that defines and registers it was not "
        "imported before the config was built (a class of your own, or of a plugin, needs its import or the config's "
        "custom_imports), or the installed release of the package has no {name} (added in a later release, or it "
        "exists only in a modified copy of the package that the project ships)",
        "install the versions the project names (mmcv, mmdet, mmengine and the like go in matching sets) or the copy "
        "of the package the project ships (`pip install -e .` in its folder); for a class of your own, import its "
        "module or list it in custom_imports; check the type's spelling in the config",
    ),
    _f(
        "unexpected-kwarg",
        r"(?P<callee>[\w.]{1,100})\(\) got an unexpected keyword argument '(?P<arg>\w{1,100})'"
        r"|'(?P<arg2>\w{1,100})' is an invalid keyword argument for (?P<callee2>[\w.]{1,100}\(\)|this function)",
        "{callee} does not take {arg}: the argument was renamed or removed in the installed version of its library, or "
        "added after it; or {callee} is overridden in your code or in a model's own code (trust_remote_code) written "
        "for an older release that did not pass {arg}; or {arg} is misspelled where you gave it (a command-line "
        "option or config key passed on to {callee} as a keyword)",
        "check {arg}'s spelling against the options {callee} takes, where you set it; find which library defines "
        "{callee} ({pkg}) and compare its version ({v_pkg}) with the one "
        "your code or config was written for; rename or drop {arg}, or install that version; if a model's own code "
        "defines {callee}, take the model repository's latest revision or the transformers version it names",
    ),
    # IPython's traceback printer (ultratb) failing while it shows the error of the code: its own TypeError hides the
    # real one; a guess (GUESSES): it names no cause
    _f(
        "traceback-hidden",
        r"is_recursion_error\(etype, value, records\)|IPython[\\/]core[\\/]ultratb\.py",
        "the last error was raised by IPython's own traceback printer (ultratb) while it printed the error of your "
        "code, so it is not the failure: that is the first exception above it, where the log shows one (before "
        "`During handling of the above exception`), else it is hidden",
        "read the log's first exception; where it is not shown, run the failing code again where IPython does not "
        "print the traceback (`python script.py`, or the cell's code in a plain `python` shell), or upgrade IPython, "
        "to see it; then explain that log",
    ),
    _f(
        "none-value",
        r"'NoneType' object (?:has no attribute '(?P<attr>\w{1,100})'|is not (?:subscriptable|callable|iterable))"
        r"|cannot unpack non-iterable NoneType object|argument of type 'NoneType' is not iterable|object of type "
        r"'NoneType' has no len\(\)|(?m:TypeError: [^\n]{1,200}, not 'NoneType'$)|unsupported operand type\(s\) "
        r"for [^:|\n]{1,5}: (?:'\w{1,30}' and 'NoneType'|'NoneType' and '\w{1,30}')",
        "a value the code uses is None where it expected an object: something that should have been loaded or set was "
        "not: a part that failed to load earlier in the log (a compiled library, a tokenizer, a vision tower, a "
        "checkpoint or its optimizer state that was not found), a config field this model or version lacks, or a "
        "function that returns None in the installed release of {pkg}",
        "look above the traceback for what failed to load or was not found (a warning, a `None` path) and fix that "
        "first; else find in the last frame which variable is None and where it is set, and compare {pkg} ({v_pkg}) "
        "and the code that calls it with the versions the project pins",
    ),
    # Hydra and OmegaConf configs in struct mode refuse a key they do not define (locuslab/open-unlearning#5: the
    # code read gradient_accumulation_steps, which the repo's LoRA config lacked); Hydra: "Could not override 'x'.
    # To append to your config use +x=..." (https://hydra.cc/docs/advanced/override_grammar/basic/)
    _f(
        "config-key",
        r"Key '(?P<key>[\w.]{1,100})' is not in struct|Could not override '(?P<key2>[\w.]{1,100})'",
        "the code or a command-line override uses the setting {key}{key2}, which the loaded config (Hydra or "
        "OmegaConf, in struct mode) does not define: the config file is from another version of the project than "
        "its code, or the key is misspelled or sits at another level of the config",
        "add {key}{key2} to the config file the run loads, at the level the code reads it, or pass it as "
        "`+{key}{key2}=VALUE` (Hydra's syntax for a key the config lacks); compare your config with the project's "
        "example configs of the same commit",
    ),
    # unpickling (torch.load of a whole model or object, pickle.load) looks up each object's class by module and name:
    # few-shot-NER-benchmark/BaselineCode#2 (a checkpoint saved under transformers 3.4 loaded under 2.8)
    _f(
        "pickle-class",
        r"Can't get attribute '(?P<name>\w{1,100})' on <module '(?P<module>[\w.]{1,100})'",
        "the file was pickled (a whole model or object saved with torch.save or pickle) by code where {module} had "
        "{name}; the installed {module} has none: the file was saved with another version of that library (or "
        "{name} was defined in the saving script itself, `__main__`)",
        "install the version of {top} the file was saved with (the project's requirements or README name it), or, "
        "where it loads, save the weights alone (`torch.save(model.state_dict(), ...)`), which load across versions; "
        "for `__main__`, import or define {name} in the loading script before loading",
    ),
    _f(
        "attribute-missing",
        r"(?:AttributeError: |AttributeError\([\"']|^)(?:module '(?P<module>[\w.]{1,100})'|'(?P<type>\w{1,100})' "
        r"object|type object "
        r"'(?P<cls>\w{1,100})') has no attribute '(?P<attr>\w{1,100})'?",
        "code expects an attribute the installed library does not have: an API that changed between versions; or "
        "the calling code (often a project's example or training script) reads an attribute its own package or "
        "object never had; for a module: another package of the same name imported in its place, or a submodule "
        "the package does not import by itself",
        "compare the version of the library that defines it ({pkg} {v_pkg}) with the one the calling code was written "
        "for (the project's requirements) and install that one; if they already agree, the calling code has the bug: "
        "update the project to its latest commit and search its issues for this attribute; for a module, "
        '`python -c "import M; print(M.__file__)"` shows which package is imported (uninstall a same-named one), '
        "and a submodule may need its own `import M.sub`",
    ),
    _f(
        "signature-mismatch",
        r"(?P<callee>[\w.]{1,100})\(\)(?: takes (?:from )?\d+ (?:to \d+ )?positional arguments? but \d+ "
        r"(?:positional arguments? )?(?:\(and \d+ keyword-only arguments?\) )?(?:was|were) given| missing \d+ "
        r"required (?:positional|keyword-only) arguments?|: incompatible function arguments)",
        "{callee} is called with other arguments than it takes: the caller and the definition it reaches come from "
        "different releases (a library now passes one more argument to a method that your code, or a library that "
        "patches it, overrides with the old signature; or the reverse); where nothing overrides it, a bug of that "
        "release of {pkg} (its own code calling its own function wrongly)",
        "find where {callee} is defined (the last frame: {pkg} {v_pkg}) and which package calls it; install the "
        "releases "
        "that go together (the caller's release notes name the change), or give the override the new signature; "
        "where nothing overrides it, upgrade {pkg} to the release that fixes it (its issues name it) or go back one",
    ),
    # Hydra's instantiate could not import the config's _target_ (hydra/_internal/instantiate/_instantiate2.py:
    # "Error locating target '{target}'" raised from _locate's error, which the chained exception shows)
    _f(
        "hydra-locate",
        r"Error locating target '(?P<tpkg>\w{1,100})(?P<trest>[\w.]{0,200})'",
        "Hydra could not find {tpkg}{trest}, the class or function a config's _target_ names: the installed {tpkg} "
        "has no such name (renamed or removed in a newer release, or added after the installed one: a config "
        "written for another version of the code), the path is misspelled or is not importable from where the job "
        "runs, or importing its module failed (the chained exception above says which)",
        "read the chained exception above it (HYDRA_FULL_ERROR=1 prints the whole chain): an import error there is "
        "the cause to fix; else compare the _target_ with what the installed {tpkg} provides, and use the configs "
        "of the project's release that goes with it (after upgrading {tpkg}, the project's updated configs), or "
        "install the {tpkg} version the config was written for; for the project's own module, run from the folder "
        "its README says (or put it on PYTHONPATH)",
    ),
    _f(
        "name-not-defined",
        r"(?:NameError: |^)name '(?P<name>\w{1,100})' is not defined|local variable '(?P<name2>\w{1,100})' "
        r"referenced before assignment|cannot access local variable '(?P<name3>\w{1,100})' where it is not "
        r"associated with a value",
        "{name} is used where it was never defined: most often the code imports it only when an optional package is "
        "installed (a guarded import), and that package is missing or too old to have {name}; or the code sets {name} "
        "only in some branches (for some models or options) and this run took another; in your own script or "
        "notebook, a misspelled name or a cell that defines it not run (again, after a restart); else the release of "
        "{pkg} that raised it has a bug",
        "look where the raising code defines {name}: an import (inside try/except or an availability check) names "
        "the package to install or upgrade in the environment that runs the job; an assignment inside if/elif means "
        "that code does not handle this model or option: update the project, or use a model or option it names; in "
        "your own code, compare {name} with the name you defined and run the cell that defines it first; if "
        "{name} is {pkg}'s own, upgrade {pkg} ({v_pkg}) or go back to the release before",
    ),
    _f(
        "cli-usage",
        r"invalid choice: '(?P<cmd>[\w.-]{1,60})'|No such command '(?P<cmd2>[\w.-]{1,60})'|unrecognized arguments: "
        r"\S|No such option: \S|Some specified arguments are not used by the HfArgumentParser",
        "the command line names a subcommand or option the installed program does not have: its version differs from "
        "the one the instructions were written for, or another package installed a command of the same name",
        "check which program runs (`which` it, `pip show` its package) and its version against the docs or "
        "tutorial you "
        "follow; upgrade or pin it, or use what its --help lists",
    ),
    # pip's note after an install that left installed packages with requirements it broke ("X requires Y, but you
    # have Y 1.0 which is incompatible"): what was asked installed; open-compass/VLMEvalKit#100 (can be ignored for
    # the job run), allenai/open-instruct#172 (the project's pins re-made as one consistent set)
    _f(
        "pip-broke-installed",
        r"pip's dependency resolver does not currently take into account all the packages that are installed",
        "pip installed what this command asked for, and that left packages already installed with requirements it "
        "no longer meets: each `X requires Y, but you have Y ... which is incompatible` line names one (most often "
        "a project's pins moved a library, such as torch or transformers, that another installed package needs)",
        "if the job does not use the packages named first on those lines, the message can be left (or uninstall "
        "them); else install one set of versions that agrees (the project's updated requirements, or the versions "
        "those lines ask for), or keep the two projects in separate environments; `pip check` lists what is broken",
    ),
    # a package that checks, at import, the version of another it was released with and names the window it
    # accepts: OpenMMLab's (mmdet/__init__.py: "MMCV==2.1.0 is used but incompatible. Please install mmcv>=2.0.0rc4,
    # <2.1.0."; mmdetection's and mmpose's FAQ pages: install the MMCV their compatibility table gives), and others
    # written after them (pypose: "PyTorch==... is used but incompatible. Please install torch>=2.0"); the checker is
    # named from the traceback (_version_window)
    _f(
        "version-window",
        r"(?P<lib>[\w-]{1,60})==(?P<have>[\w.+-]{1,40}) is used but incompatible\.? {0,2}(?:Please install "
        r"(?P<want>[^\n]{0,119}[^\n.]))?",
        "{checker} checks, when it is imported, the version of {lib} it was released with, and refuses the installed "
        "{lib} {have}: it accepts {want}; OpenMMLab's packages (mmcv, mmengine, mmdet, mmseg, mmaction2, mmdet3d, "
        "mmpose) each accept a window of the others' releases, so installing or upgrading one of them moves another "
        "out of its window",
        "install a {lib} in that window in the environment that runs the job (for mmcv, the build for your torch and "
        'CUDA: `mim install "mmcv..."`, or the wheel index its install guide gives), or the {checker} release made '
        "for the {lib} you have (the compatibility table in its docs); where {lib} {have} is newer than the window "
        "and {checker}'s maintainers say it works, raising the bound in {checker}'s __init__.py is their own fix",
    ),
    _f(
        "version-requirement",
        r"(?i)(?P<req>[\w-]{1,60}(?:>=|==|<=|>|<)[\d.]{1,20}) is required|requires? (?P<req2>[\w-]{1,60} "
        r"?(?:>=|==)[\d.]{1,20})|version (?:mismatch|conflict)|(?:an )?incompatible version of (?P<req3>[\w-]{1,60})",
        "a library checks the version of another at import or start and refuses the one installed",
        "install the version of the library that the message names, in the environment that runs the job",
    ),
    _f(
        "oom-gpu",
        r"CUDA out of memory|HIP out of memory|OutOfMemoryError|CUDA error: out of "
        r"memory|CUBLAS_STATUS_ALLOC_FAILED|No executable batch size found, reached zero",
        "the GPU ran out of memory: the model, its gradients and optimizer state, or the activations of this "
        "sequence length and batch do not fit the card (or memory is fragmented)",
        "check what fits before the next try: `compat fit` (model size, method, strategy, cards, sequence length); "
        "then "
        "lower the micro-batch or sequence length, turn on gradient checkpointing, use LoRA/QLoRA, or shard "
        "(ZeRO-3/FSDP) "
        "across cards, offloading to CPU if that is still short; if it fails while loading, before the first step, "
        "load in the training dtype without building the whole model on each card; if the message shows much memory "
        "reserved but unallocated, set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
    ),
    _f(
        "killed",
        r"exitcode\s{0,4}: -9|Signal 9 \(SIGKILL\)|return code = -9|^Killed\s*$|DefaultCPUAllocator: can't "
        r"allocate memory",
        "the process was killed from outside Python, nearly always by the Linux OOM killer when host RAM ran out",
        "confirm with `dmesg | grep -i oom` (or the scheduler's report) and lower the host memory peak: fewer "
        "ranks per "
        "node, load in the training dtype with low_cpu_mem_usage, ZeRO-3 / FSDP loading, fewer dataloader workers",
    ),
    _f(
        "collective-timeout",
        r"Watchdog caught collective operation timeout|ran for \d+ milliseconds before timing out"
        r"|Timed out waiting \d+ms for (?:recv|send) operation",
        "a collective (an all-reduce, all-gather or barrier) waited longer than the process group's timeout: one "
        "rank did not reach it: it is busy with work the others do not do (rank 0 alone mapping the dataset, "
        "evaluating or saving), the ranks disagree on how many steps there are (uneven batches), a rank hung "
        "or died without the others noticing, or the transport between cards or nodes hung (InfiniBand, the "
        "network, P2P): then a longer timeout does not help",
        "find the rank that did not reach the collective (each rank's log, or TORCH_DISTRIBUTED_DEBUG=DETAIL and "
        "NCCL_DEBUG=INFO): run slow one-rank work before the process group starts or on every rank, give every "
        "rank the same number of batches (drop_last), or raise the timeout (the Trainer's ddp_timeout, "
        "init_process_group(timeout=...)) where the work is only slow; if even a first small collective hangs, test "
        "the transport (NCCL_DEBUG=INFO; NCCL_IB_DISABLE=1 or NCCL_P2P_DISABLE=1 for one run tells which)",
    ),
    _f(
        "launcher-env",
        r"(?m)KeyError: '(?P<var>MASTER_ADDR|MASTER_PORT|LOCAL_RANK|RANK|WORLD_SIZE|LOCAL_WORLD_SIZE)(?:'|$)"
        r"|environment variable (?P<var2>MASTER_ADDR|MASTER_PORT|RANK|WORLD_SIZE) expected, but not set"
        r"|_env_error\(\"(?P<var3>MASTER_ADDR|MASTER_PORT|RANK|WORLD_SIZE)\"\)",
        "the code reads {var}{var2}{var3}, which a distributed launcher sets for each process it starts (torchrun, "
        "deepspeed, accelerate launch): the script was started with plain python, or by a launcher that sets other "
        "variables (mpirun sets OMPI_COMM_WORLD_*)",
        "start it as the project's README or launch script does: `torchrun --nproc_per_node=N script.py ...` (N=1 "
        "for one GPU), deepspeed or accelerate launch; for one process without a launcher set them yourself (RANK=0 "
        "LOCAL_RANK=0 WORLD_SIZE=1 MASTER_ADDR=localhost MASTER_PORT=29500); under mpirun map its variables to these",
    ),
    # os.environ[...] of a variable not set: os.py's __getitem__ raises KeyError(key) (Python's own frame shows it)
    _f(
        "env-var-missing",
        r"os\.py\"?, line \d{1,5}, in __getitem__\n(?:[^\n]{0,200}\n){0,3}?[^\n]{0,40}(?P<line>KeyError: "
        r"'(?P<env>[\w.-]{1,100})')",
        "the code reads the environment variable {env}, which is not set where the job runs: the project's launch "
        "script, README or .env file sets it, or a launcher or scheduler (torchrun, accelerate, SLURM, a notebook "
        "service) that this run was started without",
        "find where the project sets {env} (grep its scripts and README) and set it before the command (`export "
        "{env}=...`, or `{env}=... python ...`), or start the job the way the README does; the frame above os.py "
        "is the line that reads it",
    ),
    _f(
        "rendezvous",
        r"The client socket has timed out after|The server socket (?:on \S{1,100} )?has (?:timed out|failed to "
        r"listen)|Rendezvous\w{0,20}(?:Timeout|Connection|Closed)Error|DistNetworkError|Timed out initializing "
        r"process group|failed to connect/validate to|EADDRINUSE|[Aa]ddress already in use|DistStoreError: Socket "
        r"Timeout|The client socket has failed to connect to any network address|Timed out after \d+ seconds "
        r"waiting for clients",
        "the ranks could not meet: a rank waited for the rendezvous store at the master's address and port and "
        "never reached it, or could not open it: an address other nodes cannot reach (a hostname they cannot "
        "resolve, an interface without an address, a firewall), a port an earlier run still holds, the other "
        "nodes or ranks not started in time, or code that sets MASTER_ADDR / MASTER_PORT itself after the "
        "launcher chose them",
        "launch every node with the same master address and port (torchrun --master_addr/--master_port or "
        "--rdzv_endpoint) reachable from all of them (`nc -zv ADDR PORT` from a worker), take a free port, "
        "start all nodes within the timeout, and look for a rank that died before the rendezvous (its own "
        "error comes first); on one machine, let the launcher choose (torchrun --standalone)",
    ),
    _f(
        "launcher-platform",
        r"PyTorch was buil[dt] without libuv support|Distributed package doesn't have "
        r"NCCL built in",
        "torch's distributed launcher asks for something this torch build lacks: Windows (and macOS) wheels have no "
        "NCCL, Windows wheels no libuv, which torch.distributed's store uses by default from torch 2.4, and a "
        "CPU-only torch build (on any system: torch.version.cuda is None) has no NCCL either",
        "on Windows set USE_LIBUV=0 in the environment of the launch; for several GPUs use the gloo backend "
        "(slow) or train under Linux or WSL2, where NCCL is built in; on Linux, check that torch is a CUDA build "
        '(`python -c "import torch; print(torch.version.cuda)"`) and install one if not; for one GPU run the '
        "script without a launcher",
    ),
    _f(
        "nccl-error",
        r"NCCL error|ncclSystemError|ncclInternalError|ncclInvalidUsage|ncclRemoteError|ProcessGroupNCCL"
        r"|nccl\w{0,30} failed: unhandled (?:cuda|system) error",
        "a collective between ranks failed: another rank died first, the ranks disagree on the work, the "
        "transport (shared memory, P2P, InfiniBand, network) failed, or the NCCL library loaded does not fit the "
        "CUDA or driver in use (a system NCCL built for another CUDA)",
        "find the first rank that failed and its own error (higher up in the log); rerun with NCCL_DEBUG=INFO to see "
        "the transport and the NCCL version (it must be built for the CUDA that torch uses); in containers give "
        "/dev/shm room (--ipc=host)",
    ),
    _f(
        "cuda-busy",
        r"all CUDA-capable devices are busy or unavailable|CUDA-capable device\(s\) is/are busy or unavailable",
        "the card is taken: it is in exclusive-process compute mode and another process holds it (an earlier run "
        "still alive, or two ranks put on one card because each rank is not given its own), or the card or its "
        "driver is in a bad state (nvidia-smi itself errors or shows no process)",
        "look at `nvidia-smi` for the processes on the card and at its compute mode (`nvidia-smi -q -d "
        "COMPUTE`): end a leftover run, give each rank its own card (torchrun sets LOCAL_RANK; "
        "torch.cuda.set_device(local_rank) before any CUDA work, and no more ranks than visible cards), or set "
        "the default compute mode (`nvidia-smi -c 0`, as root); if nvidia-smi fails or shows the card free, reload "
        "the driver or reboot the machine",
    ),
    _f(
        "cuda-error",
        r"CUDA error: (?P<what>[^\n]{1,120})|CUBLAS_STATUS_\w{1,40}|CUDNN_STATUS_\w{1,40}|device-side assert triggered",
        "a CUDA kernel failed; CUDA reports its errors asynchronously, so the line in the traceback may not be the "
        "one that failed, and its message does not say why: on the real reports compat is measured on, the causes "
        "ranged from an index out of range to a library's kernel bug, a launcher's config and memory",
        "rerun with CUDA_LAUNCH_BLOCKING=1 on one card and a small batch to see the failing operation; there, a "
        "device-side assert is most often an index out of range (token ids beyond the embedding size, labels outside "
        "the classes), and an error inside one library's kernel (flash-attn, a model's attention) is that library's "
        "release: search its issues with its version; if one card passes where several fail, check the launcher",
    ),
    _f(
        "device-mismatch",
        r"Expected all tensors to be on the same device|Expected object of device type cuda but got device type "
        r"cpu|Input type \(torch\.(?:cuda\.)?\w{1,20}\) and weight type \(torch\.(?:cuda\.)?\w{1,20}\) "
        r"should be the same|indices should be either on cpu or on the same device",
        "two tensors of one operation live on different devices: a batch or label tensor not moved to the model's "
        "device, part of the model on the CPU or another card (device_map='auto', CPU offload of ZeRO/FSDP), or a "
        "tensor "
        "that custom code creates on the default device; two cards named (cuda:0 and cuda:1) in a run started "
        "without a launcher on a machine with several GPUs: the Trainer spread the model with DataParallel, which "
        "some training code does not support",
        "for several GPUs start one process per card (`torchrun --nproc_per_node=N`), or expose one card "
        "(CUDA_VISIBLE_DEVICES=0); move every batch tensor to the model's device (model.device, or let accelerate / "
        "the Trainer do it); do not "
        "combine device_map='auto' with a multi-process launcher or ZeRO/FSDP; if it began with an upgrade of {pkg} "
        "({v_pkg}), compare with the release before: offload code paths regress between releases",
    ),
    _f(
        "shape-mismatch",
        r"size mismatch for [\w.]{1,200}: copying a param with shape|Error\(s\) in loading state_dict for \w{1,100}",
        "the checkpoint was saved from a model of another shape than the one built now: a vocabulary resized for added "
        "tokens, another size or revision of the model, or adapters trained on a resized embedding",
        "build the model exactly as when the checkpoint was saved (same config and tokenizer; resize the embeddings to "
        "the tokenizer's length before loading adapters), and check that the checkpoint path belongs to this model",
    ),
    _f(
        "dtype-mismatch",
        r"expected scalar type \w{1,20} but found \w{1,20}|must have the same dtype|not implemented for "
        r"'(?:Half|BFloat16|Float)'|Cannot convert a MPS Tensor to float64 dtype",
        "two tensors of different precision meet in one operation, or an operation has no kernel for this dtype on "
        "this device",
        "train with mixed precision through the Trainer's --bf16/--fp16 (autocast) rather than casting "
        "the model by hand; on a card without bf16 ({gpu}) use fp16 or fp32",
    ),
    _f(
        "negative-dimension",
        r"Trying to create tensor with negative dimension (?P<dim>-\d{1,12})",
        "a size the model or data code computed is negative ({dim}): a config field left at its placeholder (-1: "
        "vocab_size set from a tokenizer that did not load, a size not given), or a size computed from others that do "
        "not fit (a maximum length shorter than the prompt, a division of dimensions)",
        "print the config the model is built from where it fails: fill the field that is -1 (load the tokenizer from "
        "the path the config names, so vocab_size is set, or give the sizes), and check the lengths the data code "
        "computes",
    ),
    _f(
        "data-format",
        r"num_samples should be a positive integer value, but got num_samples=0"
        r"|KeyError: '(?P<column>text|input_ids|labels|attention_mask|messages|conversations|instruction|input|output"
        r"|prompt|response|completion|chosen|rejected|query|content|role|image|images)'"
        r"|Column (?:to remove )?\[?'?(?P<column2>\w{1,60})'?\]? not in the dataset|Cannot find valid samples",
        "the data does not have the shape the training code reads: a field it expects ({column}{column2}) is "
        "missing or named otherwise, or the dataset is empty after loading, filtering or formatting",
        "print the column names and the first example of the dataset as the trainer receives it; map or rename the "
        "fields to what the code and its template expect, check that the dataset argument names the prepared data, and "
        "that length filtering leaves examples",
    ),
    # Python opens a text file with the locale's codec unless told otherwise: on Windows a code page (cp1252, gbk),
    # under LANG=C ascii; a UTF-8 file then fails to decode (aizpy/chatglm-finetune#3, UKPLab/emnlp2017-bilstm-cnn-
    # crf#33), and printing to a console fails to encode; 'utf-8' itself failing is another failure (a binary file)
    _f(
        "text-encoding",
        r"Unicode(?:De|En)codeError: '(?P<codec>gbk|gb2312|gb18030|big5|cp\d{3,5}|charmap|mbcs|ascii|shift_jis|"
        r"euc_\w{2,5}|latin-1)' codec can't (?:de|en)code",
        "a text file (or text printed to the console) was read or written with the system's locale codec, {codec} "
        "(on Windows a code page such as cp1252 or gbk, under LANG=C ascii), not UTF-8: the code opens it without "
        "`encoding=`, and the file, often a dataset, vocabulary or embeddings file, is UTF-8",
        "run Python in UTF-8 mode (`set PYTHONUTF8=1` on Windows, `export PYTHONUTF8=1` elsewhere, or `python -X "
        'utf8 ...`), or open the file the traceback reads with `encoding="utf-8"`; a file that is not UTF-8 needs '
        "converting to it first",
    ),
    _f(
        "json-invalid",
        r"JSONDecodeError|Expecting (?:value|property name enclosed in double quotes|',' delimiter): line \d+ column "
        r"\d+|Extra data: line \d+ column \d+",
        "a JSON file (or a response) the code reads is not valid JSON where the message says (line, column): a data "
        "file in another layout than the loader expects (JSON lines, one object per line, read as one JSON document, "
        "or the reverse), a hand-edited file (a trailing comma, single quotes), a file cut short or empty, or an "
        "HTML error page saved in its place",
        "open the file the traceback reads at that line and column (`python -m json.tool FILE` checks a JSON "
        "document; JSON lines need one object on each line): convert the data to the layout of the project's example "
        "data or the loader's docs, or download the file again if it is cut short or HTML",
    ),
    _f(
        "nan-loss",
        r"(?i)'loss': nan|loss(?: is|=) ?nan|\bloss:? nan\b|Loss scale already at minimum|inf checks",
        "the loss overflowed or diverged: fp16 range overflow, a learning rate too high, or bad data; where an "
        "unchanged official recipe diverges in its first steps, a bug of the training code's release",
        "try bf16 instead of fp16 on a card that has it, a lower learning rate, gradient clipping, and check the data "
        "for empty or masked-out examples; if the project's own recipe diverges unchanged, update the project to its "
        "latest release or commit and search its issues",
    ),
    # a file's first bytes are not its format's magic number: torch's legacy loader ("Invalid magic number; corrupt
    # file?"), DGL's graph files (anonymousaabc/DRGCN#2: a stored dataset re-downloaded)
    _f(
        "corrupt-file",
        r"Error while deserializing header: (?:HeaderTooLarge|MetadataIncompleteBuffer|InvalidHeaderDeserialization)"
        r"|PytorchStreamReader failed reading zip archive|invalid load key, '(?P<key>[^']{1,4})'"
        r"|incomplete metadata, file not fully covered|[Ii]nvalid magic number|Check failed: magic\w{0,20} ?==",
        "a model or checkpoint file is not what it should be: a download cut short, a git-lfs pointer left in "
        "its place (git clone without git-lfs: the file starts with 'version https://git-lfs', which reads as "
        "load key 'v'), an HTML error page saved instead (key '<'), or a checkpoint written while the disk filled "
        "up or the job was killed; less often the file is whole and the installed torch or safetensors is too old "
        "for its format",
        "look at the file the traceback loads (`ls -l` against the size the hub lists; `head -c 200 FILE` shows "
        "a pointer or HTML): delete it, and its copy in the hub cache, and download it again (`git lfs pull`, or "
        "huggingface-cli download); a checkpoint of your own: check free disk space and save again; if the size and "
        "the file's start are right, upgrade torch and safetensors to the releases the model card names",
    ),
    _f(
        "build-header",
        r"fatal error: (?P<header>[\w./+-]{1,200}): No such file or directory|fatal error: '(?P<header2>[\w./+-]"
        r"{1,200})' file not found|fatal error C1083: Cannot open include file: '(?P<header3>[\w./+-]{1,200})'",
        "compiling a native extension failed: the header {header}{header2}{header3} is not in the toolchain it builds "
        "with: a CUDA toolkit older than the package's kernels need (cuda/ headers come with the toolkit), Python's "
        "development headers (Python.h) or another library's -dev package not installed, on Windows a Visual Studio "
        "Build Tools install without its C++ workload or Windows SDK (the C runtime's headers), or the build found "
        "another CUDA than torch's",
        "install a prebuilt wheel of the package for your torch and CUDA, or its release before, which still builds "
        "with your toolkit; else install what provides the header: the CUDA toolkit version the package asks for "
        "(`nvcc --version` shows the one used, CUDA_HOME selects it), python3-dev, or the library's -dev package; on "
        'Windows, the Build Tools\' "Desktop development with C++" workload with a Windows SDK',
    ),
    # torch's own libraries (libtorch_cuda_cpp.so, libc10_cuda.so ...) differ between its releases and builds: an
    # extension that asks for one this torch lacks was built for another torch
    # torchaudio reads and writes audio through a backend library it does not install itself (soundfile, sox, ffmpeg);
    # with none, its backend/no_backend.py raises the first message (C0untFloyd/bark-gui#6 quotes that frame)
    _f(
        "audio-backend",
        r"No audio I/O backend is available|Backend \"\w{1,20}\" is not one of available backends",
        "torchaudio finds no library to read or write audio files with: it uses soundfile, sox or ffmpeg, which it "
        "does not install itself, and the one it was asked for is not installed in this environment",
        "install one in the environment that runs the job: `pip install soundfile` (on Linux also the system's "
        'libsndfile1), or ffmpeg or sox; `python -c "import torchaudio; print(torchaudio.list_audio_backends())"` '
        "shows what torchaudio finds",
    ),
    _f(
        "torch-library-missing",
        r"(?P<so>(?:libtorch|libc10)\w{0,40}\.so(?:\.\d{1,4}){0,3}): cannot open shared object file",
        "a compiled extension was built for another torch: it links to {so}, a library of the torch it was built "
        "against, which the installed torch does not ship (torch renamed or merged its libraries between releases, "
        "and a CPU-only build has no CUDA ones)",
        "reinstall the extension for the torch you have (a prebuilt wheel for torch's major.minor and CUDA, or a "
        "source build against it: `pip install --no-build-isolation ...`), or install the torch it was built for; "
        '`python -c "import torch; print(torch.__version__, torch.version.cuda)"` shows what you have',
    ),
    # a library checks the cuDNN it loads against the one it was compiled with (XLA: "Loaded runtime CuDNN library:
    # 8.4.1 but source was compiled with: 8.6.0"; torch: "PyTorch was compiled against (8, 9, 2) but found runtime
    # version (8, 5, 0)")
    _f(
        "cudnn-version",
        r"Loaded runtime CuDNN library: (?P<have>[\d.]{1,12}) but source was compiled with: (?P<built>[\d.]{1,12})|"
        r"cuDNN version incompatibility: PyTorch was compiled\s{1,4}against (?P<built2>\([\d, ]{1,20}\)) but found "
        r"runtime version (?P<have2>\([\d, ]{1,20}\))",
        "the library was built against cuDNN {built}{built2}, and the cuDNN it loads at run time is {have}{have2}: "
        "another cuDNN (a system one, a conda one or another pip wheel's) comes first on the loader's path, or the "
        "wheel installed is the build for another cuDNN",
        "install the build of the package made for the cuDNN you have (jax[cudaXX_cudnnYY], torch's index for your "
        "CUDA), or a cuDNN of the same major and at least that minor (pip: nvidia-cudnn-cu11 or -cu12), and take "
        "the older one off LD_LIBRARY_PATH; `ldconfig -p | grep cudnn` and `pip list | grep cudnn` show which are "
        "installed",
    ),
    # Docker asks the NVIDIA Container Toolkit (its runtime, hook and nvidia-container-cli) for a GPU container;
    # Docker 19.03+ takes `--gpus all` and registers no "nvidia" runtime unless configured (Xilinx/Vitis-AI#28); the
    # toolkit's parts from mismatched releases (NVIDIA/nvidia-container-runtime#68); a WSL distro's own docker
    # without runc (domesticatedviking/TextyMcSpeechy#47). Install guide:
    # https://docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html
    _f(
        "docker-gpu",
        r"Unknown runtime specified nvidia|could not select device driver \S{0,20} with capabilities: \[\[gpu\]\]|"
        r"nvidia-container-cli: (?:initialization error|requirement error|mount error)|failed to create NVIDIA "
        r"Container Runtime|nvidia-container-runtime(?:-hook)?[^\n]{0,80}(?:did not terminate|no such file|executable "
        r"file not found)",
        "Docker could not give the container a GPU: the NVIDIA Container Toolkit (the runtime and hook Docker calls "
        "for a GPU container) is not installed on the host, not registered with this Docker daemon, or installed "
        "from releases that do not go together; Docker 19.03 and newer take `--gpus all` where older setups used "
        "`--runtime=nvidia`, inside WSL the GPU comes through Docker Desktop's engine, not a distro's own docker, and "
        "the toolkit loads the host's NVIDIA driver (libnvidia-ml), which must be installed on the host",
        "install the NVIDIA Container Toolkit on the host (its packages from one release), register it with "
        "`sudo nvidia-ctk runtime configure --runtime=docker` and restart Docker, then start the container with "
        "`--gpus all`; `nvidia-smi` on the host, then `docker run --rm --gpus all ubuntu nvidia-smi`, test it (on WSL: "
        "Docker Desktop with WSL integration)",
    ),
    # Windows loads a package's DLLs at import (torch's torch/lib/*.dll, an extension's .pyd): one it cannot load names
    # no missing file (intel/ipex-llm#12268: the generic ipex-llm[xpu] build on a Lunar Lake machine, libuv missing)
    _f(
        "windows-dll",
        r"Error loading \"(?P<dll>[^\"\n]{1,300}\.dll)\" or one of its dependencies|DLL load failed(?: while importing "
        r"(?P<dll2>[\w.]{1,100}))?:",
        "Windows could not load a DLL of the package ({dll}{dll2}) or one it depends on: a build of the package made "
        "for another device or processor (its other variant or index), an install that is incomplete or mixed (two "
        "builds of torch in one environment, an interrupted install), the Microsoft Visual C++ Redistributable "
        "missing, or a runtime DLL it needs (CUDA, libuv, oneAPI) not on PATH",
        "install the build made for your device from the index or extra its docs name, in a fresh environment "
        "(uninstall every copy first); install the latest Microsoft Visual C++ Redistributable (x64); then "
        '`python -c "import torch"` must pass; a tool that lists a DLL\'s dependencies (Dependencies, dumpbin '
        "/dependents) shows which one is missing",
    ),
    _f(
        "native-library",
        r"(?P<so>[\w+-]{1,80}\.so(?:\.\d{1,4}){0,3}): cannot open shared object file",
        "a native library that is loaded at run time ({so}) is not installed or not on the dynamic loader's path: "
        "most often the CUDA, cuDNN or NCCL runtime of the version a package was built for (the number in the name: "
        "libcudart.so.12 is CUDA 12, libcudnn*.so.8 is cuDNN 8), or a system library (libGL for OpenCV)",
        "install the runtime of that version (pip: nvidia-cudnn-cu12, nvidia-cuda-runtime-cu12 ...; conda; or the "
        "system package), or the build of the package made for the CUDA you have; if it is installed, put its lib "
        "folder on LD_LIBRARY_PATH (`ldconfig -p | grep NAME` shows what the loader finds)",
    ),
    # bash names the line it ran as a command: an option (--x) there is the rest of a command whose line above lost
    # its trailing backslash (or has a space or a Windows \r after it)
    _f(
        "shell-continuation",
        r"(?m): line \d{1,6}: (?P<opt>--?[A-Za-z][\w.-]{0,60}): command not found\r?$",
        "the shell ran a line that starts with an option ({opt}) as a command of its own: the multi-line command "
        "above it lost its line continuation (the trailing `\\` is missing, or a space or a Windows line ending "
        "follows it), so that command ran without the options below the break",
        "end every line of the command except the last with `\\` and nothing after it, and save the script with Unix "
        "line endings (`dos2unix script.sh`, or your editor's LF setting); then run it again",
    ),
    # a build runs nvcc from CUDA_HOME: none there (MhLiao/DB#21: CUDA_HOME set to a colon-separated list of paths)
    _f(
        "nvcc-missing",
        r"unable to execute '(?P<nvcc>[^'\n]{0,200}nvcc)': No such file or directory|command '(?P<nvcc2>[^'\n]{0,200}"
        r"nvcc)' failed: No such file or directory",
        "the build runs {nvcc}{nvcc2} to compile CUDA code, and there is no such program: CUDA_HOME (or the CUDA "
        "the build found) points at a wrong place (a list of paths, a runtime-only install without the toolkit), or "
        "no CUDA toolkit is installed",
        "set CUDA_HOME to one CUDA toolkit folder whose bin/nvcc exists and whose version matches torch's "
        '(`ls $CUDA_HOME/bin/nvcc`; `python -c "import torch; print(torch.version.cuda)"`), installing the toolkit '
        "if there is none (conda: cuda-nvcc or cuda-toolkit), then build again; or install a prebuilt wheel",
    ),
    # the linker of a native extension finds no library to link (nerfstudio-project/nerfstudio#2748: conda's CUDA has
    # libcudart in $CUDA_HOME/lib, torch 2.0's extension builder looks in lib64 only; torch 2.1 looks in both)
    _f(
        "link-library",
        r"(?:/ld|\bld(?:\.\w{1,10})?): cannot find -l(?P<lib>[\w.+-]{1,80})",
        "linking a native extension failed: the linker finds no lib{lib}: the library is not installed, or it is "
        "where the build does not look (conda's CUDA puts libcudart in $CUDA_HOME/lib, where torch releases before "
        "2.1 do not look; a library's -dev package adds the unversioned .so the linker needs)",
        "install the library (its -dev package, or the CUDA toolkit of torch's version), or point the linker at it "
        "(`export LIBRARY_PATH=$CUDA_HOME/lib:$LIBRARY_PATH`, or a lib64 link to lib), or build with a torch whose "
        "extension builder looks there (2.1 and newer for $CUDA_HOME/lib); then build again",
    ),
    # a path that is the word None: a setting never set, turned into a string on its way (huggingface/accelerate#79:
    # `accelerate test` passed --config_file=None, read as a file named 'None')
    _f(
        "path-none",
        r"No such file or directory: '(?:None|none|null)'|(?:does not exist|not found): '?(?:None|null)'?$",
        "the path the code opens is the word None: a setting it needs (a config file, a model, data or output path) "
        "was never given, and the missing value reached the code as the string 'None' (a command line or config "
        "that writes None, or a script or launcher that passes str(None) on)",
        "give that path (the option the traceback's line reads: a --config_file, model_name_or_path, a data path), "
        "or create what it names (`accelerate config` writes accelerate's config file); if you did give it, the "
        "script or launcher drops it on the way: update that tool to a release that passes it on",
    ),
    # pip's own hint where Windows' 260-character path limit stopped an install (pip's page
    # https://pip.pypa.io/warnings/enable-long-paths; Microsoft's "Maximum Path Length Limitation": LongPathsEnabled);
    # Python's own "[WinError 206] The filename or extension is too long"
    _f(
        "windows-long-path",
        r"does not have Windows Long Path support enabled|\[WinError 206\] The filename or extension is too long",
        "a path the install or job writes is longer than Windows' 260-character limit: a package with deep folders "
        "under a long site-packages path (the Microsoft Store Python's, under AppData\\Local\\Packages, or a "
        "project deep in the user's folders), and this Windows does not have long path support enabled",
        "enable long paths (as administrator: set LongPathsEnabled to 1 under "
        "HKLM\\SYSTEM\\CurrentControlSet\\Control\\FileSystem, e.g. `New-ItemProperty -Path "
        '"HKLM:\\SYSTEM\\CurrentControlSet\\Control\\FileSystem" -Name LongPathsEnabled -Value 1 -PropertyType '
        "DWORD -Force`, as pip's page https://pip.pypa.io/warnings/enable-long-paths says) and run the install again; "
        "or install into an environment with a short path (a venv at C:\\venv, or python.org's Python rather than "
        "the Microsoft Store's)",
    ),
    _f(
        "command-missing",
        r"(?m)(?P<cmd>[\w.+-]{1,60}): command not found$|sh: \d+: (?P<cmd2>[\w.+-]{1,60}): not found$|'(?P<cmd3>[\w.+-]"
        r"{1,60})' is not recognized as an internal or external command|^make(?:\[\d{1,3}\])?: "
        r"(?P<cmd4>[\w.+-]{1,60}): Command not found|raise child_exception_type\([^\n]{0,100}(?:\n[^\n]{0,120}){0,6}"
        r"\n[^\n]{0,60}FileNotFoundError: \[Errno 2\] No such file or directory: '(?P<cmd5>[\w.+-]{1,60})'",
        "a program the job runs is not installed, or not on the PATH of the shell that runs it: "
        "{cmd}{cmd2}{cmd3}{cmd4}{cmd5} (a command-line tool a script or Makefile calls, a program a library starts "
        "as a subprocess, or the launcher itself where the environment is not activated)",
        "install what provides {cmd}{cmd2}{cmd3}{cmd4}{cmd5} (pip, conda or the system's package manager; some tools "
        "are built from source, as the project's README says; a `python3-config` comes with the Python development "
        "package) in the environment that runs the job, or activate that environment; where the program is an "
        "installed Python package's own command and its install did not put it on the PATH, upgrade or reinstall "
        "that package; `which {cmd}{cmd2}{cmd3}{cmd4}{cmd5}` shows what the shell finds",
    ),
    _f(
        "file-missing",
        r"FileNotFoundError|No such file or directory|does not appear to have a file named|Can't load tokenizer|is "
        r"not a local folder and is not a valid model identifier|(?i:\b(?:path|file|directory|folder)\b[^\n]{0,300}?"
        r"\b(?:not found|does not exist)\b)",
        "a file the job needs is not where it looks: a path, a model or dataset name, or a file of the repository; "
        "a file an earlier step of the project writes (preprocessing, a first training stage, a download script) "
        "that was not run; where the path is one the job writes itself (a checkpoint or output folder), more than "
        "one process wrote or moved it at once, the path was built wrongly (a relative path joined twice), or the "
        "library's saving changed in its installed release",
        "check the path or model id the message names, and, offline, that the files are in the cache (HF_HUB_OFFLINE=1 "
        "needs them there); where the project's README has a step that produces that file, run it first; for a path "
        "under your output folder, check that one process saves (or that every rank sees the same shared folder), "
        "give the output folder as an absolute path, and try the release before of the library that saves it",
    ),
    _f(
        "network-hub",
        r"(?i)couldn't connect to 'https://huggingface\.co'|Max retries "
        r"exceeded|ConnectionError|ReadTimeout|LocalEntryNotFoundError",
        "the job tried to download from the hub and could not reach it",
        "download the model and data ahead of time and run with HF_HUB_OFFLINE=1, or set HF_ENDPOINT to a mirror",
    ),
    # pip's own failures last: a log that goes on past the install to a Python error is answered by that error
    _f(
        "pip-no-distribution",
        r"Could not find a version that satisfies the requirement (?P<req>[^\s(]{1,120})|No matching distribution "
        r"found for (?P<req2>\S{1,120})",
        "pip found no release of {req}{req2} that installs here: that version is not published for this Python (too "
        "new or too old for it, or a 32-bit Python) or this platform, it is only on another index (torch's +cuXXX "
        "builds are on download.pytorch.org, not on PyPI), the only index given does not carry it (with "
        "`--index-url`, a dependency that index does not mirror), or the name or version does not exist (a pinned "
        "nightly or dev build the index has since deleted), or not published yet (a package's wheels for a torch or "
        "Python released days ago come later); `(from versions: ...)` lists what this Python can install",
        "compare the pin with the versions the message lists: run a Python that the pinned release has wheels for (its "
        "PyPI page lists them), add the package's own index for its CUDA builds with `--extra-index-url` (PyPI stays "
        "for the dependencies: `--extra-index-url https://download.pytorch.org/whl/cu121` for torch), pin a version "
        "from the list, or, for a nightly or dev pin, take the project's current requirements or lock file; for wheels "
        "not yet published for your torch, use the package's nightly index or the torch release before",
    ),
    _f(
        "pip-conflict",
        r"ResolutionImpossible|because these package versions have conflicting dependencies",
        "pip cannot install every requirement at once: two of them pin the same dependency to versions that do not "
        "overlap (most often torch, through torchvision, xformers or a project's requirements file); the lines after "
        "`The conflict is caused by:` name them",
        "install the versions that go together: move the pin the message names to the one the other package depends on "
        "(xformers, torchvision and torchaudio each need one exact torch), or take the set the project tested, in a "
        "fresh environment; forcing past it leaves a package that breaks at import",
    ),
    # pip's resolver gives up backtracking (pip 23.1+ wording), with no one conflict to name; ms-swift#4080: `pip
    # install -e .[all]` on loose pins, fixed by installing without the [all] extra
    _f(
        "pip-resolution-deep",
        r"resolution-too-deep|Dependency resolution exceeded maximum depth|ResolutionTooDeep",
        "pip gave up resolving the requirements: they leave so many versions open (loose or missing pins, many "
        "optional extras at once) that its backtracking went past its limit; no single conflict is the cause",
        "pin the versions the project tested (its lock or requirements file, `pip install -r` it first), install "
        "fewer extras at once (`pip install -e .`, then only the extras you need), or install the published release "
        "instead of a source checkout; `uv pip install` resolves such sets faster",
    ),
    # conda's solver: a pin with a build string or a version the channels no longer carry for this platform, or two
    # pins whose dependencies do not overlap
    _f(
        "conda-unsolvable",
        r"ResolvePackageNotFound:|PackagesNotFoundError:|UnsatisfiableError:|LibMambaUnsatisfiableError|Package "
        r"(?P<cpkg>[\w.-]{1,80}) conflicts for:|Could not solve for environment specs|Found conflicts! Looking for "
        r"incompatible packages",
        "conda cannot make the environment the file or command asks for: a package pinned with a build string "
        "(`numpy==1.14.3=py36h14a74c5_0`: builds are removed from channels and exist for one platform only) or a "
        "version no channel given has for this platform, or two pins whose dependencies do not overlap (the lines "
        "after `conflicts for:` name them: a torch release needs its own cudatoolkit range)",
        "drop the build strings from the environment file (keep `name==version`; `conda env export --no-builds` writes "
        "one without them), relax the pin the message names or set it to the version the other package needs, add "
        "the channel that carries it (pytorch, nvidia, conda-forge), and create the environment again",
    ),
    # pip's summary of a source build that failed (the cause is in the build output above it, which a shorter paste
    # leaves out): CUDA-extension packages (flash-attn, mamba-ssm, causal-conv1d, ...) ship few prebuilt wheels
    _f(
        "wheel-build-failed",
        r"Failed building wheel for (?P<pkg_b>[\w.-]{1,80})|Failed to build installable wheels for some "
        r"pyproject\.toml based projects \((?P<pkg_b2>[^)\n]{1,120})\)|Could not build wheels for "
        r"(?P<pkg_b3>[\w.-]{1,80})",
        "pip built {pkg_b}{pkg_b2}{pkg_b3} from source, because no prebuilt wheel fits this Python, torch and CUDA, "
        "and the build failed; a CUDA extension's build fails when torch is not in pip's isolated build "
        "environment, when nvcc or CUDA_HOME is missing or of another CUDA than torch's, or when its release does "
        "not compile against this torch",
        "read the first `error:` line of the build output above this one; install a prebuilt wheel that matches "
        "your torch, CUDA and Python (the package's releases page), or the torch its release was built for; to build "
        "from source, install torch first and run `pip install {pkg_b}{pkg_b2}{pkg_b3} --no-build-isolation` with "
        "CUDA_HOME set to a CUDA toolkit of torch's major version",
    ),
)


# or any class named with its module path
BARE_EXCEPTION = known_issues.Signature(
    r"^(?:\[rank\d{1,5}\]:\s*)?\s*(?P<type>[A-Za-z_][\w.]{0,120}(?:Error|Exception|Exit|Interrupt)"
    r"|(?:[a-z_]\w{0,40}\.){1,10}[A-Z]\w{1,80}): (?P<message>[^\n]{1,1000})$"
)
ERROR_LINE = known_issues.Signature(r"(?i)^[^\n]{0,300}\b(?:error|fatal|failed|abort(?:ed)?)\b[^\n]{0,300}$")
# a logger's warning, or Python's own (UserWarning: ..., FutureWarning: ...)
WARNING_LINE = known_issues.Signature(r"(?i)^[^\n]{0,300}(?:\bwarn(?:ing)?\b|[a-z]Warning:)[^\n]{0,300}$")
DIGITS = re.compile(r"\d+")


def _shape(line: str) -> str:
    """A log line with every digit run masked: repeats of one warning with other counts, or from
    other ranks ([rank3]), are one shape (outcome.signature masks only whole-token numbers, so it
    would keep rank0 and rank1 apart)."""
    return DIGITS.sub("N", line)


def _bare_exception(tail: str) -> tuple[str, str] | None:
    """The last `SomeError: message` line, for a log pasted without its traceback header."""
    found = [(m.group("type"), m.group("message").strip()) for m in BARE_EXCEPTION.finditer(tail)]
    return found[-1] if found else None


FAMILY_BY_NAME = {f.name: f for f in FAMILIES}


# the catch-all answers, which know no cause: the exception alone (with the library that raised it, where one
# did), a CUDA error (judged right on none of the 5 reports of the measuring set that it answered), the last error
# line, a cut traceback, no error at all; they say what the log shows and where to look,
# never a cause
GUESSES = (
    "python-exception",
    "library-raised",
    "cuda-error",
    "traceback-hidden",
    "error-line",
    "traceback-cut",
    "no-error-line",
)


@dataclasses.dataclass(frozen=True)
class Answer:
    family: str
    matched: str
    cause: str  # for a guess: what the log shows, not a cause
    step: str
    facts: Facts

    @property
    def confidence(self) -> str:
        """ "family" where the log is of a failure family compat recognises; "guess" where it is not."""
        return "guess" if self.family in GUESSES else "family"


WARNINGS_CAUSE = "the log ends in warnings, not an error: the job did not stop on an exception here"
WARNINGS_STEP = (
    "if the run misbehaves (a loss of 0 or nan, no learning, a hang), start from this warning: it names "
    "what the code skipped or fell back from; search its fixed wording with your library versions. "
    "If the job did fail, paste the log from the first error down"
)
REMOTE_CODE_CAUSE = (
    "the error is raised in {model}'s own code from the hub (trust_remote_code), which was written for "
    "the transformers of its release: a newer transformers renamed, moved or removed what it uses, or "
    "the model repository's revision changed"
)
REMOTE_CODE_STEP = (
    "install the transformers version the model names (its config.json's transformers_version, or its "
    "README), or take the model repository's latest revision, whose maintainers update the code for new "
    "transformers; the fix belongs to the model's code, not to transformers"
)


# families about two packages' releases that, raised in the project's own code, are most often that code's own bug
# or code written for another model or data: a call between its own functions with other arguments than they take,
# or an attribute read on a plain Python value (a function, a bool, a str) that the code expected to be an object
OWN_CODE_TYPES = {"function", "method", "bool", "int", "float", "str", "list", "dict", "tuple", "set", "bytes"}
PROJECT_CODE_CAUSE = (
    "the error is raised in the training project's own code ({file}), not in an installed library: "
    "that code expects its input in a particular layout (a data or metadata file with its fields and "
    "columns, a model, arguments as its README gives them) and particular versions of its libraries; "
    "either the input differs from that, or the code has a bug that a later commit of the project fixes"
)
PROJECT_CODE_STEP = (
    "look at what the failing line in {file} reads: check your data files, model and arguments against "
    "the format and usage the project's README documents (a line with fewer fields, a dataset of another "
    "kind, another model); if they match, install the versions the project pins (its requirements file) in "
    "a clean environment, update the project to its latest commit or release, and search the project's own "
    "issues for this exception"
)


# a signature mismatch at a call in the project's code, to a function named bare or through self: defined in the
# project, or imported into it from a package or a repository cloned beside it (the log does not say which)
PROJECT_CALL_CAUSE = (
    "{callee} is called in the project's own code ({file}) with other arguments than its definition takes: the call "
    "and the definition come from different revisions: of a package or a repository cloned beside the project that "
    "{file} imports {callee} from (installed at another release than the project was written for), or of the project "
    "itself (one side of a change its commit made)"
)
PROJECT_CALL_STEP = (
    "find where {callee} comes from (the import at the top of {file}): if from a package or another repository, "
    "install the release or commit of it that the project's README or requirements name, or update both to their "
    "latest together; if it is the project's own, update the project to its latest commit and search its issues "
    "for this TypeError"
)


ZERO3_CAUSE = (
    "the run shards parameters with ZeRO-3: outside the engine's own forward each parameter is an empty "
    "placeholder (torch.Size([0])) on every rank, gathered only while its module runs, so code that reads, "
    "loads, copies or moves weights itself (loading a pretrained part, a custom initialisation, a module "
    "built after the model, the model's or the project's own code) meets empty tensors, or tensors left on "
    "the CPU"
)
ZERO3_STEP = (
    "run the same job once with ZeRO-2: if it passes, the code needs ZeRO-3 support: gather the parameters it "
    "touches (`with deepspeed.zero.GatheredParameters(params, modifier_rank=0)`), load weights before "
    "deepspeed.initialize or inside zero.Init, or take the project's release that supports ZeRO-3; else "
    "train with ZeRO-2 (with offload if memory is short)"
)
ZERO3_SUSPECT = {
    "python-exception",
    "library-raised",
    "shape-mismatch",
    "device-mismatch",
    "project-code",
    "remote-code",
}
# a parameter of torch.Size([0]): a ZeRO-3 placeholder read outside the gather; a tensor of size 0 in an
# operation is one too where the log shows DeepSpeed (without it, an empty batch or label list gives the same words)
ZERO_SIZE = re.compile(r"torch\.Size\(\[0\]\)")
ZERO_OPERAND = re.compile(r"size of tensor [ab] \(0\)")
DEEPSPEED_SEEN = re.compile(r"(?i)deepspeed")

# merging adapters into a quantized base (issue 44, kind 3): the traceback runs through a merge, and the log
# shows 4- or 8-bit weights
MERGING = re.compile(
    r"merge_and_unload|merge_adapter|_merge\(|merge_lora|def merge\b|in merge\b|llamafactory-cli export"
)
QUANTIZED = re.compile(
    r"load_in_[48]bit|Linear4bit|Linear8bitLt|Params4bit|Int8Params|quantization_bit|bnb_4bit|BitsAndBytesConfig",
    re.IGNORECASE,
)
MERGE_SUSPECT = ZERO3_SUSPECT | {"dtype-mismatch", "attribute-missing", "configuration"}
MERGE_CAUSE = (
    "LoRA adapters are being merged into a base loaded in 4 or 8 bits: those weights are packed (and scaled), so "
    "adding the adapters' update to them fails on their packed shape or dtype, or rounds it away"
)
MERGE_STEP = (
    "load the base model again in fp16 or bf16, without quantization (no quantization_config, "
    "load_in_4bit or quantization_bit), load the adapter on it and merge there; quantize the merged model "
    "afterwards if you need it small"
)

# a state-dict mismatch of the embeddings or the output layer (issue 44, kind 3)
VOCAB_MISMATCH = re.compile(
    r"size mismatch for [\w.]{0,200}(?:embed_tokens|lm_head|wte|word_embeddings|embed_out|output)[\w.]{0,40}: "
    r"copying a param with shape torch\.Size\(\[(?P<rows>\d+), (?P<cols>\d+)\]\) from checkpoint, the shape in "
    r"current model is torch\.Size\(\[(?P<rows2>\d+), (?P<cols2>\d+)\]\)"
)
VOCAB_CAUSE = (
    "the vocabulary differs between the checkpoint and the model ({rows}): tokens were added on one side "
    "(the tokenizer used in training, and resize_token_embeddings) and not on the other, the checkpoint or "
    "adapter was trained on another variant of the base (a chat, vision or extended-vocabulary variant), or "
    "vocab_size in config.json was edited to the tokenizer's length where the checkpoint's rows are padded past it"
)
VOCAB_STEP = (
    "build the model as in training: load the tokenizer saved with the checkpoint (with its added tokens) and "
    "call model.resize_token_embeddings(len(tokenizer)) before loading the checkpoint or adapter; for adapters, "
    "save the resized embeddings and output layer with them (modules_to_save); check that the base is the one it was "
    "trained on (an adapter's adapter_config.json names it: base_model_name_or_path); a vocab_size you edited in "
    "config.json goes back to the checkpoint's row count (padded rows the tokenizer never emits are harmless)"
)


# a submodule of one installed package missing where another installed package imports it (issue 44, kind 5)
MISMATCH_CAUSE = (
    "{pkg} ({v_pkg}) imports {module}, which the installed {top} ({v_top}) does not have: the two releases do not "
    "go together ({module} was added, moved or removed in another {top} release)"
)
MISMATCH_STEP = (
    "install releases that go together: the {top} that this {pkg} requires (`pip show {pkg}` and its release "
    "notes name the range; `pip check` lists mismatches), or the {pkg} release made for your {top}; in a project, "
    "take the pair its requirements pin"
)


# an attribute missing on a model or layer object: torch's Module.__getattr__ raised it, so the object is
# not the model the code expects; torch's release is not the question
MODULE_GETATTR = re.compile(r"torch[/\\]nn[/\\]modules[/\\]module\.py\"?, line \d+, in __getattr__")
OBJECT_ATTR = re.compile(r"'(?P<type>\w{1,100})' object has no attribute '(?P<attr>\w{1,100})'")
MODEL_ATTR_CAUSE = (
    "{type} (a model or a layer of it) has no {attr}: the object is not the model the code was written for: a "
    "wrapper around it (DistributedDataParallel, DeepSpeed's engine, a PeftModel: the model is inside it), another "
    "model or another library's implementation of it, or another revision of its code (a model's own code, "
    "trust_remote_code, older or newer than the script that uses it); where {type} is a library's own class "
    "(SentenceTransformer, peft's LoraModel), the installed release of that library has no {attr} (added later, or "
    "removed)"
)
MODEL_ATTR_STEP = (
    "print type(model) where the code reads .{attr}: unwrap a wrapper (model.module, "
    "accelerator.unwrap_model(model), model.get_base_model()); else load the model the script was written for "
    "(the checkpoint, revision and library its README names), or take the model code's revision the script "
    "expects; where the project supports several models, a line written for one of them may read an attribute "
    "this one names otherwise: update the project, or change that line to this model's module (print(model) "
    "lists them); for a library's own class, install the release of that library the script was written for "
    "(its requirements)"
)


# an exception raised in an installed library's code that no family reads (issue 44, kind 5): a guess, not a cause
# (on the third round's held-out draw the two causes it weighs were each right about as often as wrong): it says
# which library raised it, its version and its caller, and what to check, message first; an error in torch's,
# numpy's or a dataframe library's own code is about the values passed to it and stays the plain guess
LIBRARY_CAUSE = (
    "{kind} raised inside {pkg} ({v_pkg}), called from {caller}; no known issue and no family compat knows matches "
    "its message"
)
LIBRARY_STEP = (
    "read the message first: where it names a path, option, field or value that {pkg} refused, fix that in your "
    "config, data or call; else the usual cause is code written for another {pkg} release than the one installed: "
    "install the {pkg} release the project you run pins (its requirements file or README), or try the release before "
    "yours (where a compat cell reproduces the failure, `compat bisect CELL --package {pkg}` finds the first bad "
    "release)"
)
VALUE_LIBRARIES = {"torch", "numpy", "pandas", "pyarrow", "scipy", "packaging"}

# a KeyError raised where a dataset returns an example (a __getitem__ of the project's own code, not of Python's or an
# installed package's mappings, or a DataLoader worker): the example lacks the field the code reads: data-format
DATASET_ITEM = re.compile(
    r'File "(?P<path>[^"\n]{1,400})", line \d+, in __getitem__|Caught KeyError in DataLoader worker process'
)

# a file of an installed package itself missing (the path is inside its folder under site-packages)
PACKAGE_FILE = re.compile(
    r"No such file or directory: '(?P<path>[^'\n]{0,400}?(?:site|dist)-packages[/\\](?P<pkg>\w{1,100})[/\\]"
    r"[^'\n]{1,300})'"
)
PACKAGE_FILE_CAUSE = (
    "the installed {pkg} lacks a file of its own ({path}): its install is incomplete (interrupted, or a release or git "
    "install that did not ship that file: a packaging bug of that release)"
)
PACKAGE_FILE_STEP = (
    "reinstall it (`pip install --force-reinstall --no-deps {pkg}`); if the file is still missing, install a release "
    "that ships it (the fixed one its issues name, or the release before)"
)

# an exception raised while handling another (Python's "During handling of the above exception"): a NameError or
# UnboundLocalError there is the cleanup code tripping over what the first failure left undone: the first one is read
FOLLOW_ON = "During handling of the above exception, another exception occurred"
FOLLOW_ON_KINDS = ("NameError", "UnboundLocalError")


def classify(text: str, facts: Facts) -> Answer:
    """The family-level answer for a log (`_classify`); where the model's own code raised the
    error, the answer points at that model's repository, not at the library: a family of its
    own where nothing more specific is known, else the family's step prefixed. Under ZeRO-3 (or
    with a parameter of torch.Size([0]) in the error, or an operand of size 0 in a DeepSpeed log),
    an error that is not a library's version or the data's points at code that touches partitioned
    parameters. A submodule missing where another installed package imports it is a release mix, and
    an attribute missing on a torch module is the model object, not torch's release. A NameError raised while
    handling an earlier exception is answered by the earlier one."""
    first = _first_failure(text, _tail(text), facts)
    return _classify_log(*first) if first is not None else _classify_log(text, facts)


def _classify_log(text: str, facts: Facts) -> Answer:
    tail = _tail(text)
    answer = _bare_import_name(_answer(tail, facts), tail, facts)
    if answer.family in MERGE_SUSPECT and MERGING.search(tail) and QUANTIZED.search(text):
        return _as(answer, "merge-quantized")
    if answer.family in ZERO3_SUSPECT and (
        facts.strategy == ZERO3 or ZERO_SIZE.search(tail) or (ZERO_OPERAND.search(tail) and DEEPSPEED_SEEN.search(text))
    ):
        return _as(answer, "zero3-partitioned")
    if answer.family in HYDRA_SUSPECT:
        return _hydra_target(answer, tail)
    if answer.family == "shape-mismatch":
        return _head_size(_state_keys(_vocabulary(answer, tail), tail), tail)
    if answer.family == "import-name":
        return _extension_name(_project_import(answer, tail), tail, facts)
    if answer.family == "shadowed-module":  # "partially initialized module": an extension's name is its build's
        return _extension_name(answer, tail, facts)
    if answer.family == "version-window":
        return _version_window(answer, tail, facts)
    if answer.family == "pip-no-distribution":
        return _pip_dependency(answer, tail)
    if answer.family == "module-missing":
        return _mismatched(answer, tail, facts)
    if answer.family == "file-missing":
        return _package_file(answer, tail)
    if answer.family == "attribute-missing" and MODULE_GETATTR.search(tail):
        found = [m.groupdict() for m in OBJECT_ATTR.finditer(tail)]
        if found:
            return _as(answer, "model-attribute", found[-1])
    return answer


# "ImportError: cannot import name SummaryWriter" (Python 2) or "cannot import name 'Checkpoint'" (a REPL, a Python
# that does not name the module): the module is the one the failing `from M import ...` line names
# (ai-adv-lab/deepspeech.mxnet#15, pytorch/ignite#1262)
BARE_IMPORT_NAME = re.compile(r"(?m)^\s{0,20}ImportError: cannot import name '?(?P<name>\w{1,100})'?\s*$")


def _bare_import_name(answer: Answer, tail: str, facts: Facts) -> Answer:
    """A name an import cannot find, where the message does not say from which module: import-name's answer with the
    module of the last `from M import ... NAME` line above it; else the answer as it is."""
    found = list(BARE_IMPORT_NAME.finditer(tail)) if answer.family in GUESSES else []
    if not found:
        return answer
    name = found[-1].group("name")
    above = re.findall(r"\bfrom ([\w.]{1,100}) import [^\n]{0,300}?\b" + name + r"\b", tail[: found[-1].start()])
    if not above:
        return answer
    fields = _fields_of({"module": above[-1], "name": name}, facts)
    return _as(answer, "import-name", fields, matched=found[-1].group(0).strip()[:200])


# Hydra's instantiate builds an object from a config node (`_target_` and its keys): an argument error there is the
# config's ("Error in call to target 'x.Y':", hydra 1.1+; "Error instantiating 'x.Y' :", 1.0; the node's
# "full_key: model.module"): SalesforceAIResearch/uni2ts#91 (a fine-tuning run given the config for another mode)
HYDRA_TARGET = re.compile(r"Error (?:in call to target|instantiating) '(?P<target>[\w.]{1,200})'")
HYDRA_KEY = re.compile(r"full_key: (?P<key>[\w.]{1,200})")
HYDRA_SUSPECT = {"signature-mismatch", "unexpected-kwarg", "project-call"}
HYDRA_CAUSE = (
    "Hydra built {target} from the config{at}, and the keys that config gives do not fit its arguments: a config "
    "file for another mode or version of the project (a fine-tuning config where a pretraining one is expected, or "
    "the reverse), a key misspelled, missing or left over, or code whose signature changed after the config was "
    "written"
)
HYDRA_STEP = (
    "open that config node{at} and compare its keys with {target}'s arguments; use the config file the project's "
    "README gives for this command (its conf/ folder has one per mode or model) and override single keys on the "
    "command line (key=value) rather than changing its _target_; if the config is the project's own and unchanged, "
    "install the versions the project pins"
)


def _hydra_target(answer: Answer, tail: str) -> Answer:
    """An argument error Hydra's instantiate reports for a config node (HYDRA_TARGET): the config's keys, not a
    release mix; else the answer as it is."""
    targets = [m.group("target") for m in HYDRA_TARGET.finditer(tail)]
    if not targets:
        return answer
    key = [m.group("key") for m in HYDRA_KEY.finditer(tail)]
    said = _Fields(target=targets[-1], at=f" ({key[-1]})" if key else "")
    return _as(answer, "hydra-target", said)


def _version_window(answer: Answer, tail: str, facts: Facts) -> Answer:
    """version-window's texts naming the package that checked: the folder of the `__init__.py` the traceback's last
    frame above the message is in (mmaction/__init__.py: mmaction), else the package that frame is in."""
    m = FAMILY_BY_NAME["version-window"].pattern.search(answer.matched)
    at = tail.rfind(answer.matched)
    paths = [frame_path(f).replace("\\", "/") for f in FRAME.finditer(tail[: max(at, 0)])]
    checker = "the package imported"
    if paths:
        parts = paths[-1].split("/")
        installed = _library_dir(paths[-1])
        if parts[-1] == "__init__.py" and len(parts) > 1 and parts[-2]:
            checker = parts[-2]
        elif installed:
            checker = installed.group(1)
    fields = _fields(m, facts) if m else _Fields()
    fields["checker"] = checker
    fields["lib"] = fields.get("lib", "").lower()
    return _as(answer, "version-window", fields)


# pip's "(from X)" after the requirement it cannot find: X's own requirement, not one the user asked for
# (OpenMined/PySyft#5134: "torch~=1.4.0 (from syft)"; a CUDA build's dependency named for one CUDA, "cumm-cu100
# (from spconv-cu100==2.0.1)"); "(from -r requirements.txt (line 3))" and "(from versions: ...)" are not
PIP_REQUIRED_BY = re.compile(
    r"(?:satisfies the requirement|No matching distribution found for) (?P<req>[^\s(]{1,120}) \(from "
    r"(?P<by>[A-Za-z0-9][\w.-]{0,80})(?:\[[\w,.-]{0,80}\])?(?:[=<>!~]=?[^)\n]{0,60})?\)"
)
PIP_DEPENDENCY_CAUSE = (
    "{by} requires {req}, and pip finds no release of {req} that installs here: {by}'s requirement is for another "
    "Python, platform or CUDA than this one (an old {by} that pins a release with no wheel for this Python; a package "
    "built for one platform only; a build for one CUDA, named like `name-cuXXX`, published only for other CUDA "
    "versions), {req} is published on another index than PyPI (torch's own builds and their dependencies are on "
    "download.pytorch.org) or not yet published, or {by}'s install guide has {req} built or installed first"
)
PIP_DEPENDENCY_STEP = (
    "read {by}'s install guide for {req} and install that first as it says (a build from source, the package's own "
    "index with `--index-url` or `--extra-index-url`, or a wheel for your CUDA), then {by}; else install a {by} "
    "release whose requirements install here (a newer {by} for a newer Python, torch or CUDA, or an older one where "
    "{req}'s release is not published yet: `pip install {by}==VERSION --no-deps`, then `pip show {by}` lists what it "
    "requires), or use the Python, platform or CUDA that {by}'s release supports"
)


def _pip_dependency(answer: Answer, tail: str) -> Answer:
    """A requirement pip cannot find that another package asked for (PIP_REQUIRED_BY): that package's requirement
    and its install guide, not the user's pin; else the answer as it is."""
    found = list(PIP_REQUIRED_BY.finditer(tail))
    if not found:
        return answer
    said = _Fields(req=found[-1].group("req"), by=found[-1].group("by"))
    return _as(answer, "pip-dependency", said)


def _first_failure(text: str, tail: str, facts: Facts) -> tuple[str, Facts] | None:
    """The log up to the first exception, and its facts, where the last one (a NameError, an UnboundLocalError)
    was raised while handling it; else None."""
    raised = facts.exception or _bare_exception(tail)
    cut = text.rfind(FOLLOW_ON)
    if not raised or raised[0].rsplit(".", 1)[-1] not in FOLLOW_ON_KINDS or cut < 0:
        return None
    before = text[:cut]
    earlier = dataclasses.replace(
        facts,
        exception=outcome.raised_in_log(before),
        package=None,
        remote_model=None,
        project_file=None,
        framework=None,
    )
    _where_raised(before, earlier)
    return before, earlier


def _package_file(answer: Answer, tail: str) -> Answer:
    """A file missing inside an installed package's own folder: that install is incomplete; else the answer as it is."""
    found = list(PACKAGE_FILE.finditer(tail))
    if not found:
        return answer
    said = found[-1].groupdict()
    return _as(answer, "package-file", said)


def _data_field(answer: Answer, tail: str) -> Answer:
    """A KeyError raised where a dataset returns an example: the data-format family, naming the key; else the
    answer as it is."""
    kind, _, key = answer.matched.partition(": ")
    if answer.family != "python-exception" or kind.rsplit(".", 1)[-1] != "KeyError":
        return answer
    own = [m.group("path") for m in DATASET_ITEM.finditer(tail)]
    if not any(p is None or not (PYTHON_OWN.search(p) or PACKAGE_DIR.search(p.replace("\\", "/"))) for p in own):
        return answer
    return _as(answer, "data-format", {"column": key.strip().strip("'\"")})


def _library_raised(answer: Answer, tail: str, facts: Facts) -> Answer:
    """An exception in an installed library's code that no family reads (not torch's or numpy's, whose errors are
    about the values passed): a guess naming that library, its version and its caller, and what to check."""
    pkg = facts.package
    if answer.family != "python-exception" or not pkg or pkg in VALUE_LIBRARIES:
        return answer
    caller = "code the log does not show"
    for m in reversed(list(FRAME.finditer(tail))):
        path = frame_path(m).replace("\\", "/")
        installed = _library_dir(path)
        if (installed and installed.group(1) == pkg) or PYTHON_OWN.search(path):
            continue
        caller = installed.group(1) if installed else path.rsplit("/", 1)[-1]
        break
    said = _Fields(
        kind=answer.matched.split(":", 1)[0].rsplit(".", 1)[-1],
        pkg=pkg,
        v_pkg=_version(facts, pkg, "version not in the log"),
        caller=caller,
    )
    return _as(answer, "library-raised", said)


# unpickling looks a pickled object's module up by name (pickle's find_class; torch.load, joblib and dill through it):
# pyannote/pyannote-audio#1040 (a hub checkpoint re-saved under a newer torch: 'torch.torch_version'); NumPy 2 moved
# numpy.core to numpy._core, so a pickle made under NumPy 2 names a module NumPy 1 lacks
UNPICKLING = re.compile(r"find_class|[Uu]npickl|pickle\.load|torch\.load|joblib|dill\.load|cloudpickle")
PICKLE_MODULE_CAUSE = (
    "the file being loaded was pickled (a whole model, tokenizer, dataset or object saved with torch.save, pickle or "
    "joblib) by code where the module {module} existed; the installed {top} has no such module: the file was saved "
    "under another version of {top} ('numpy._core': saved under NumPy 2, read under NumPy 1)"
)
PICKLE_MODULE_STEP = (
    "install the version of {top} the file was saved with (the project's requirements or the model card name it; "
    "often the newer release, where the module exists); or make the file again with the code you have (a "
    "preprocessed dataset or cache: run that step again); or load it where it was saved and keep the weights or data "
    "alone (a state_dict, safetensors, JSON), which load across versions; for a hub checkpoint, an earlier revision "
    "may suit the {top} you have"
)


def _mismatched(answer: Answer, tail: str, facts: Facts) -> Answer:
    """`No module named 'a.b'` raised while unpickling: the file was saved under another version of `a`. Raised in
    another installed package's code: `a` is installed (else Python names `a` alone), without the submodule that
    package's release expects: a release mix; else the answer as it is."""
    found = [m.group("module") or m.group("module2") for m in MISSING_MODULE.finditer(tail)]
    module = found[-1] if found else ""
    top = module.split(".")[0]
    if module and UNPICKLING.search("\n".join(tail.splitlines()[-12:])):
        said = _Fields(module=module, top=top)
        return _as(answer, "pickle-module", said)
    importer = facts.package
    if "." not in module or not importer or LIBRARIES.get(importer, importer) == LIBRARIES.get(top, top):
        return answer
    said = _Fields(
        module=module,
        top=top,
        pkg=importer,
        v_top=_version(facts, top, "version not in the log"),
        v_pkg=_version(facts, importer, "version not in the log"),
    )
    return _as(answer, "release-mix", said)


# a state dict whose names differ from the model's, with no size mismatch (zai-org/ChatGLM-6B#557: loading code that
# stripped too much of each key; mlfoundations/open_clip#775: an image tower's weights given as the whole model's;
# data2ml/all-clip#27: a Chinese-CLIP checkpoint into OpenAI's CLIP class)
KEYS_DIFFER = re.compile(r"(?:Missing|Unexpected) key\(s\) in state_dict")
SIZES_DIFFER = re.compile(r"size mismatch for")
KEYS_CAUSE = (
    "the checkpoint's parameter names do not match the model built now: it was saved from another model or "
    "architecture (another text or image tower, another class of the same name), from only a part of it, or from a "
    "wrapper (a `module.` prefix from DataParallel or DDP, a PEFT or prefix-encoder prefix), or the loading code "
    "renamed its keys"
)
KEYS_STEP = (
    "compare a few missing with a few unexpected names: where they differ by a prefix, strip or add it before "
    "load_state_dict; where the checkpoint is one part (an image tower), load it into that submodule or through the "
    "option the library has for it; where it is another architecture, build the model with the code and config it "
    "came from; `strict=False` skips the names that differ, which is right only where those weights are meant to "
    "stay as the model initialises them"
)


def _state_keys(answer: Answer, tail: str) -> Answer:
    """A state dict loaded with names the model does not have and no size mismatch: another model, part or wrapper
    than the checkpoint's; else the answer as it is."""
    if answer.family != "shape-mismatch" or not KEYS_DIFFER.search(tail) or SIZES_DIFFER.search(tail):
        return answer
    return _as(answer, "state-dict-keys")


# a size mismatch in the output layer alone (a classifier's, a detector's box head): a checkpoint trained for another
# number of labels (huggingface/transformers#20327: 9 labels into a model built for 5; transformers' own hint names
# ignore_mismatched_sizes, https://huggingface.co/docs/transformers/main_classes/model)
MISMATCHED_KEY = re.compile(r"size mismatch for ([\w.]{1,200}):")
HEAD_KEY = re.compile(
    r"(?:^|\.)(?:classifier|score|qa_outputs|fc|head|cls_score|bbox_pred|logits)(?:\.\w{1,40})?\.(?:weight|bias)$"
)
HEAD_CAUSE = (
    "the checkpoint's output layer ({key}) was trained for another number of classes or labels than the model built "
    "now: the number of labels (num_labels, num_classes) the model is built with differs from the checkpoint's"
)
HEAD_STEP = (
    "to fine-tune on your own labels, load the checkpoint without that layer so that it starts fresh: in "
    "transformers `from_pretrained(..., num_labels=N, ignore_mismatched_sizes=True)`; in plain torch, drop its keys "
    "from the state dict and load the rest with `load_state_dict(..., strict=False)`; to use the checkpoint's layer "
    "as trained, build the model with the checkpoint's number of labels (its config's id2label)"
)


def _head_size(answer: Answer, tail: str) -> Answer:
    """A state-dict size mismatch in the output layer alone (HEAD_KEY): a checkpoint trained for another number of
    labels; else the answer as it is."""
    keys = MISMATCHED_KEY.findall(tail)
    if answer.family != "shape-mismatch" or not keys or not all(HEAD_KEY.search(k) for k in keys):
        return answer
    return _as(answer, "head-size", {"key": keys[0]})


# "cannot import name 'X' from 'scripts.mergers.mergers' (.../sd-webui-supermerger/scripts/mergers/mergers.py)": Python
# names the file it imported; where that file is of the same project tree as the file importing it, not an installed
# package, the project's own files disagree (hako-mikan/sd-webui-supermerger#160: an update shipped a stale
# mergers.py)
IMPORT_FROM_FILE = re.compile(
    r"cannot import name '(?P<name>[\w.]{1,100})' from '(?P<module>[\w.]{1,100})' \((?P<path>[^()\n]{1,400}\.py)\)"
)
PROJECT_IMPORT_CAUSE = (
    "{module} is a module of the project itself ({root}), and it has no {name}: the project's files are from "
    "different versions: an update that replaced some files and not others (a stale or locally edited file, an "
    "update that shipped one file late), a file copied in from another release, or a script newer than its modules; "
    "or {module} defines {name} only when its own imports succeed (a try/except around them hides that error)"
)
PROJECT_IMPORT_STEP = (
    "bring the whole project to one version: in its folder, `git status` shows files you changed and `git pull` "
    "updates the rest (or clone or install it again from its latest release); if that release itself lacks {name}, "
    "take the commit before, or the fix its issues name; where the files agree, import {module} on its own "
    '(`python -c "import {module}"` in the project\'s folder) to see an error it hides'
)


SELF_IMPORT_CAUSE = (
    "the installed {pkg} cannot import {name} from its own module {module}: its files are from different releases or "
    "its install is incomplete (an upgrade or uninstall cut short, two installs of it in one environment, a release "
    "that shipped without that part or without its compiled part)"
)
SELF_IMPORT_STEP = (
    "reinstall {pkg} at the version your project pins (its requirements file: `python -m pip install "
    "--force-reinstall --no-deps {pkg}==VERSION`), after removing any second copy (`pip uninstall {pkg}` until none "
    "is left; conda's too); if a fresh install of that release still fails, the release is broken: install the one "
    "before, or the fixed one its issues name"
)


def _project_import(answer: Answer, tail: str) -> Answer:
    """A name missing from a module of the same project tree as the file importing it (IMPORT_FROM_FILE): the
    project's files disagree, not a library's release. An installed package that imports a name from itself and
    lacks it is an incomplete install or release of that package (nerfstudio-project/nerfstudio#1405:
    nerfacc 0.3.4's wheel without its csrc backend). Else the answer as it is."""
    found = list(IMPORT_FROM_FILE.finditer(tail))
    if not found:
        return answer
    m = found[-1]
    path = m.group("path").replace("\\", "/")
    frames = (frame_path(f).replace("\\", "/") for f in FRAME.finditer(tail[: m.start()]))
    importers = [f for f in frames if not PYTHON_OWN.search(f)]
    installed, by = _library_dir(path), _library_dir(importers[-1]) if importers else None
    if installed and by and installed.group(1) == by.group(1):
        said = _Fields(pkg=installed.group(1), module=m.group("module"), name=m.group("name"))
        return _as(answer, "package-self-import", said)
    if installed or PYTHON_OWN.search(path) or path.startswith("..."):
        return answer
    module = m.group("module").replace(".", "/")
    root = next((path[: -len(end)] for end in (f"/{module}.py", f"/{module}/__init__.py") if path.endswith(end)), None)
    if not root or not importers or not importers[-1].startswith(root + "/"):
        return answer
    said = _Fields(module=m.group("module"), name=m.group("name"), root=root.rsplit("/", 1)[-1] or root)
    return _as(answer, "project-import", said)


# "cannot import name 'deform_conv_ext' from 'basicsr.models.ops.dcn'" (XPixelGroup/BasicSR#280: `python setup.py
# develop` not run; open-mmlab/mmdetection#3005: corner_pool_ext; lzccccc/SMOKE#40: '_ext' from 'smoke' (unknown
# location)): the name is a compiled extension of the package or repository, as extension-not-built's module names are
EXTENSION_NAME = re.compile(r"^(?:_C|_ext|[A-Za-z]\w{0,60}_(?:cuda|ext|C|cpp|kernels?))$")
CANNOT_IMPORT = re.compile(
    r"cannot import name '?(?P<name>\w{1,100})'?(?: from (?:partially initiali[sz]ed module )?'?"
    r"(?P<module>[\w.]{1,100})'?)?"
)


def _extension_name(answer: Answer, tail: str, facts: Facts) -> Answer:
    """A name an import cannot find that is a compiled extension's (EXTENSION_NAME): extension-not-built's answer
    for MODULE.NAME, whichever tree the module is in; else the answer as it is."""
    found = list(CANNOT_IMPORT.finditer(tail))
    if not found or not EXTENSION_NAME.match(found[-1].group("name")):
        return answer
    name, module = found[-1].group("name"), found[-1].group("module")
    fields = _fields_of({"ext": f"{module}.{name}" if module else name}, facts)
    return _as(answer, "extension-not-built", fields)


def _vocabulary(answer: Answer, tail: str) -> Answer:
    """A state-dict size mismatch of the embeddings or the output layer that differs in its rows alone:
    the vocabulary, resized on one side (issue 44, kind 3); else the answer as it is."""
    m = VOCAB_MISMATCH.search(tail)
    if not m or m.group("cols") != m.group("cols2") or m.group("rows") == m.group("rows2"):
        return answer
    rows = f"{m.group('rows')} rows in the checkpoint, {m.group('rows2')} in the model built now"
    return _as(answer, "vocab-resized", {"rows": rows})


def _answer(tail: str, facts: Facts) -> Answer:
    answer = _data_field(_classify(tail, facts), tail)
    if facts.remote_model and answer.family == "python-exception":
        return _as(answer, "remote-code", {"model": facts.remote_model})
    if facts.project_file and (answer.family == "python-exception" or _own_code(answer, tail)):
        if answer.family == "signature-mismatch":  # called bare or through self, in the project's code
            said = _Fields(file=facts.project_file, callee=_callee(answer.matched))
            return _as(answer, "project-call", said)
        return _as(answer, "project-code", {"file": facts.project_file})
    answer = _library_raised(answer, tail, facts)
    if facts.remote_model:
        step = (
            f"the error is raised in {facts.remote_model}'s own modeling code (loaded with trust_remote_code): look at "
            "that model repository's revision and the transformers version it names first; then: " + answer.step
        )
        answer = dataclasses.replace(answer, step=step)
    return answer


def _own_code(answer: Answer, tail: str) -> bool:
    """A signature mismatch, or an attribute missing on a plain Python value, raised in the project's own code. A
    signature mismatch is the project's own where the source line above it calls the function bare or through the
    project's own objects (`self.x.f(`); called through a module (`librosa.resample(`, `util.f(`), `super()` or a
    line the log does not show, it is between the project and a library's release: signature-mismatch's answer."""
    if answer.family == "signature-mismatch":
        return _called_within(answer.matched, tail)
    found = [m.group("type") for m in OBJECT_ATTR.finditer(tail)]
    return answer.family == "attribute-missing" and bool(found) and found[-1] in OWN_CODE_TYPES


def _callee(matched: str) -> str:
    """The function a signature mismatch `matched` names (`load_quant` of "TypeError: load_quant() takes ..."),
    or ""."""
    callee = re.match(r"[\w.]*?(\w+)\(\)", matched.split(": ", 1)[-1])
    return callee.group(1) if callee else ""


def _called_within(matched: str, tail: str) -> bool:
    """Whether the source line printed above the error `matched` calls its function bare or through `self`."""
    callee = _callee(matched)
    at = tail.rfind(matched)
    if not callee or at < 0:
        return False
    above = [line for line in tail[:at].splitlines() if line.strip()]
    if not above or FRAME.search(above[-1], above[-1].lower()):  # a frame line: the log shows no source line
        return False
    return bool(re.search(r"(?<![\w.])(?:self(?:\.\w+)*\.)?" + re.escape(callee) + r"\s*\(", above[-1]))


# a library's notice that it goes on without an optional package, in an error's words: xformers' own, when triton
# is not installed (there is no Windows build; some kernels go unused), "Error caught was: No module named
# 'triton'" (Akegarasu/lora-scripts#47: the maintainer says training is not affected); read as the warning it is
NOTICE = re.compile(
    r"(?m)^(?P<notice>[^\n]{0,200}A matching Triton is not available, some optimizations will not be enabled)\.?"
    r"[ \t]{0,8}\r?\n[ \t]{0,8}Error caught was: [^\n]{0,300}$"
)


def _tail(text: str) -> str:
    """The log's last TAIL_LINES lines, without splitting the whole of a 100 MB log; a library's notice that it goes
    on without an optional package (NOTICE) reads as the warning it is."""
    cut = len(text)
    for _ in range(TAIL_LINES + 1):  # one more: a final newline ends the last line
        cut = text.rfind("\n", 0, cut)
        if cut < 0:
            break
    tail = "\n".join((text if cut < 0 else text[cut + 1 :]).splitlines()[-TAIL_LINES:])
    return NOTICE.sub(r"warning: \g<notice> (an optional package is not installed)", tail)


def _classify(tail: str, facts: Facts) -> Answer:
    """The most specific family whose pattern is in the log's last lines (`tail`); else the
    exception it ends with and the package that raised it; else its last error line; else that
    there is none."""
    tail = known_issues.RANK_PREFIX.sub("", tail)  # a launcher's "[rank3]:" before each line
    lowered = tail.lower()
    for fam in FAMILIES:
        m = fam.pattern.search(tail, lowered)
        if m:
            fields = _fields(m, facts)
            read = m.groupdict().get("line")  # a pattern that reads context first names its error line
            at = m.start() + m.group(0).rfind(read) if read else m.start()
            line = tail[tail.rfind("\n", 0, at) + 1 :].split("\n", 1)[0]  # the whole line it is on
            return Answer(
                fam.name, line.strip()[:200], fam.cause.format_map(fields), fam.step.format_map(fields), facts
            )
    asserted = _asserted_setting(tail, facts)
    if asserted:
        return asserted
    raised = facts.exception or _bare_exception(tail)
    if raised:
        return _configuration_answer(*raised, facts) or _exception_answer(*raised, facts)
    flagged = ERROR_LINE.search(tail)
    if flagged:
        line = [m.group(0) for m in ERROR_LINE.finditer(tail)][-1].strip()
        return Answer(
            "error-line",
            line[:200],
            "the log ends in an error that is not a Python exception compat can read "
            "(a launcher's, a compiler's or a library's own message)",
            "read the lines just above it for the first failure, and search its fixed wording with your "
            "library versions",
            facts,
        )
    frames = [m for m in FRAME.finditer(tail)]
    if frames:
        last = tail[frames[-1].start() :].split("\n")
        code = next((line.strip() for line in last[1:] if line.strip()), "")
        return Answer(
            "traceback-cut",
            (last[0].strip() + (f": {code}" if code else ""))[:200],
            "the log shows a Python traceback but not the exception line that ends it: the paste stops early",
            "paste the traceback to its end, the `SomeError: message` line after the last frame"
            + (f" ({code[:80]})" if code else "")
            + "; that line names the failure",
            facts,
        )
    warned = [m.group(0).strip() for m in WARNING_LINE.finditer(tail)] or [
        line.strip() for line in tail.splitlines() if DATA_DROPPED.search(line)
    ]  # a framework's own notice of masked labels, printed without "warning"
    if warned:
        return _warnings_answer(warned, facts)
    return Answer(
        "no-error-line",
        "",
        "the log has no Python exception and no error line compat recognises",
        "paste the end of the log, from the first error down (a launcher's summary, such as torchrun's "
        "ChildFailedError, hides the rank's own error higher up)",
        facts,
    )


CONFIG_CAUSE = (
    "{project}'s own check refused this configuration before training: its message says which options do not go "
    "together or what they must be; it is your configuration, not a broken install"
)
CONFIG_STEP = (
    "change {options} as the message says, in your config file, command line or TrainingArguments; {project}'s "
    "options: {docs} (reinstalling does not change the check; a newer {project} allows a combination only where "
    "its changelog says so)"
)


def _configuration_answer(kind: str, message: str, facts: Facts) -> Answer | None:
    """A training framework's own check of its options (issue 44, kind 1): raised in that framework's
    code, in the words such checks use ("requires", "cannot be used with", "must be"...), and not about
    a missing package or file. The message states the fix: the answer names the options it mentions and
    the page that documents them. None where it is not one."""
    if kind.rsplit(".", 1)[-1] not in CONFIG_EXCEPTIONS or facts.framework is None:
        return None
    if not CONFIG_WORDS.search(message) or NOT_CONFIG.search(message):
        return None
    project, docs = FRAMEWORKS[facts.framework]
    options = list(dict.fromkeys(next(v for v in m.groupdict().values() if v) for m in OPTION.finditer(message)))
    named = ", ".join(options[:4]) or "the options the message names"
    said = {"project": project, "options": named, "docs": docs}
    return Answer(
        "configuration", f"{kind}: {message}"[:200], CONFIG_CAUSE.format(**said), CONFIG_STEP.format(**said), facts
    )


# an assert on the run's own settings (args.x, self.config.y, cfg.z) that failed: the code checks its configuration
# with a plain assert, often with no message (maszhongming/MatchSum#11: `assert args.batch_size % len(devices) ==
# 0`; erfanzar/EasyDeL#109: `assert sequence_length <= self.config.max_position_embeddings`)
SETTINGS_OWNER = r"\b(?:args|cfg|config|conf|opt|opts|hparams|training_args|model_args|data_args|params)\."
ASSERTED = re.compile(r"^\s{0,40}assert\b[^\n]{0,300}" + SETTINGS_OWNER)
SETTING = re.compile(SETTINGS_OWNER + r"(?P<opt>\w{1,60})")
ASSERTION_LINE = re.compile(r"^\s{0,20}(?:[\w.]{1,80}\.)?AssertionError\b(?::\s?(?P<message>[^\n]{0,300}))?$")
CARETS = re.compile(r"^[\s^~]*$")
# an assert on what a call returned checks that call's work, not a setting (hiyouga/LLaMA-Factory#857: `assert
# load_valuehead_params(model, model_args.reward_model)`, a checkpoint of another layout)
ASSERTED_CALL = re.compile(r"^\s{0,40}assert\s{1,4}(?:not\s{1,4})?[\w.]{1,100}\(")


def _asserted_setting(tail: str, facts: Facts) -> Answer | None:
    """A failed assert on the run's settings (kind 1 of issue 44 where the check is a bare assert): the log ends in
    AssertionError right under its `assert ... args.x ...` line; the answer names the settings it reads."""
    lines = [line for line in tail.rstrip().splitlines()[-6:] if line.strip() and not CARETS.match(line)]
    if len(lines) < 2 or not ASSERTION_LINE.match(lines[-1]) or not ASSERTED.match(lines[-2]):
        return None
    if ASSERTED_CALL.match(lines[-2]):
        return None
    options = list(dict.fromkeys(m.group("opt") for m in SETTING.finditer(lines[-2])))
    project, docs = FRAMEWORKS.get(facts.framework) or (
        (facts.package, f"the documentation of {facts.package}") if facts.package else ("the project", "its README")
    )
    said = {"project": project, "options": ", ".join(options[:4]), "docs": docs}
    return Answer(
        "configuration",
        f"{lines[-1].strip()} ({lines[-2].strip()})"[:200],
        CONFIG_CAUSE.format(**said),
        CONFIG_STEP.format(**said),
        facts,
    )


def _exception_answer(kind: str, message: str, facts: Facts) -> Answer:
    """A Python exception no family matches: its type and the package whose code raised it."""
    where = f" in {facts.package}'s code" if facts.package else ""
    version = f" {facts.versions[facts.package]}" if facts.package in facts.versions else ""
    return Answer(
        "python-exception",
        f"{kind}: {message}"[:200],
        f"{kind.rsplit('.', 1)[-1]} raised{where}: no known issue and no family compat knows matches its message",
        "read the exception's message and the last frame of the traceback"
        + (f" ({facts.package}{version})" if facts.package else "")
        + "; search its wording with your library versions, and compare them with the versions your code was "
        "written for",
        facts,
    )


# a per-example warning that means the example is cut or left out of training: repeated, the run
# goes on with less data than the user gave it (issue 44, kind 4)
DATA_DROPPED = re.compile(
    r"Token indices sequence length is longer than the specified maximum sequence length|will be ignored in loss "
    r"calculation|Could not find (?:response|instruction) key|Dropped invalid example|(?:Skipping|Dropping|Dropped) "
    r"(?:\d+ )?(?:examples?|samples?|sequences?)\b|(?:example|sample|sequence)s? (?:was|were|is|are|will be) "
    r"(?:truncated|dropped|skipped|ignored)|tokenization mismatch: \d+ vs\. \d+|labels in your dataset are -100",
    re.IGNORECASE,
)
LONG_TEXT = re.compile(r"Token indices sequence length is longer", re.IGNORECASE)
DATA_DROPPED_CAUSE = (
    "the log ends in warnings, and one repeats for examples of the data: each is cut or left out of training "
    "(longer than the maximum length, its response or instruction marker not found after tokenizing, or a "
    "conversation template other than the model's, which masks every label of the example), so the run trains on "
    "less, or less of each example, than you gave it (a loss of 0 where it masks them all)"
)
DATA_DROPPED_STEP = (
    "count how often it repeats against the dataset's size; raise the maximum sequence length (cutoff_len, "
    "max_seq_length) or filter long examples before training, and check that the template's response marker "
    "tokenizes to the same ids inside an example as alone (a tokenizer that merges it with the text before it "
    "hides it: give the marker with the newline or space before it, or as token ids); check that the conversation "
    "template or version you pass is the one made for this model (LLaVA-style scripts' --version, a framework's "
    "template)"
)


def _warnings_answer(warned: list[str], facts: Facts) -> Answer:
    """A log of warnings only: the most repeated one (else the last), and how often it repeats; one that
    drops or cuts examples of the data is its own family."""
    counts = collections.Counter(_shape(w) for w in warned)
    lead = max(reversed(warned), key=lambda w: counts[_shape(w)])  # the most repeated, else the last
    times = counts[_shape(lead)]
    # the tokenizer's notice of one long text is often harmless (it is cut or split later): only repeated
    dropped = [w for w in warned if DATA_DROPPED.search(w) and (counts[_shape(w)] > 1 or not LONG_TEXT.search(w))]
    if dropped:
        line = max(reversed(dropped), key=lambda w: counts[_shape(w)])
        many = counts[_shape(line)]
        said = f"; it repeats {many} times" if many > 1 else ""
        return Answer("data-dropped", line[:200], DATA_DROPPED_CAUSE + said, DATA_DROPPED_STEP, facts)
    return Answer(
        "warnings-only",
        lead[:200],
        WARNINGS_CAUSE
        + (f"; this warning repeats {times} times, so it concerns the data or every step" if times > 1 else ""),
        WARNINGS_STEP,
        facts,
    )


# the answers a reading of the log's context gives, beside FAMILIES' patterns: their texts by name, the one place both
# the answers (_as) and the texts the blind readers judge (bench/explain_accuracy.py family_texts) take them from
CONTEXT_ANSWERS = {
    "remote-code": (REMOTE_CODE_CAUSE, REMOTE_CODE_STEP),
    "project-code": (PROJECT_CODE_CAUSE, PROJECT_CODE_STEP),
    "project-call": (PROJECT_CALL_CAUSE, PROJECT_CALL_STEP),
    "zero3-partitioned": (ZERO3_CAUSE, ZERO3_STEP),
    "warnings-only": (WARNINGS_CAUSE, WARNINGS_STEP),
    "data-dropped": (DATA_DROPPED_CAUSE, DATA_DROPPED_STEP),
    "merge-quantized": (MERGE_CAUSE, MERGE_STEP),
    "vocab-resized": (VOCAB_CAUSE, VOCAB_STEP),
    "state-dict-keys": (KEYS_CAUSE, KEYS_STEP),
    "head-size": (HEAD_CAUSE, HEAD_STEP),
    "project-import": (PROJECT_IMPORT_CAUSE, PROJECT_IMPORT_STEP),
    "package-self-import": (SELF_IMPORT_CAUSE, SELF_IMPORT_STEP),
    "hydra-target": (HYDRA_CAUSE, HYDRA_STEP),
    "release-mix": (MISMATCH_CAUSE, MISMATCH_STEP),
    "pickle-module": (PICKLE_MODULE_CAUSE, PICKLE_MODULE_STEP),
    "model-attribute": (MODEL_ATTR_CAUSE, MODEL_ATTR_STEP),
    "package-file": (PACKAGE_FILE_CAUSE, PACKAGE_FILE_STEP),
    "configuration": (CONFIG_CAUSE, CONFIG_STEP),
    "pip-dependency": (PIP_DEPENDENCY_CAUSE, PIP_DEPENDENCY_STEP),
    "library-raised": (LIBRARY_CAUSE, LIBRARY_STEP),  # a guess (GUESSES): never judged
}


def _as(answer: Answer, family: str, said: dict | None = None, **changes) -> Answer:
    """The answer as `family`, a context answer (CONTEXT_ANSWERS) or a family of FAMILIES, its texts filled from
    `said` (and any other field of the answer given in `changes`)."""
    cause, step = (
        CONTEXT_ANSWERS[family]
        if family in CONTEXT_ANSWERS
        else (FAMILY_BY_NAME[family].cause, FAMILY_BY_NAME[family].step)
    )
    said = _Fields(said or {})
    return dataclasses.replace(
        answer, family=family, cause=cause.format_map(said), step=step.format_map(said), **changes
    )


class _Fields(dict):
    def __missing__(self, key):
        return "unknown" if key.startswith("v_") else ""


# the distribution pip installs for an import name that differs from it (each package's PyPI page: opencv-python,
# Pillow, scikit-learn, scikit-image, PyYAML, protobuf, attrs, beautifulsoup4, python-dateutil, python-dotenv,
# pycryptodome, PyMuPDF, GitPython, tensorflow-datasets, openai-whisper, nemo_toolkit, taming-transformers,
# pyannote.audio); `pip install cv2` or `pip install google` installs nothing
# useful, or another project (wandb/wandb#5988: google.protobuf missing)
INSTALL_NAMES = {
    "cv2": "opencv-python",
    "PIL": "Pillow",
    "sklearn": "scikit-learn",
    "skimage": "scikit-image",
    "yaml": "PyYAML",
    "google.protobuf": "protobuf",
    "attr": "attrs",
    "bs4": "beautifulsoup4",
    "dateutil": "python-dateutil",
    "dotenv": "python-dotenv",
    "Crypto": "pycryptodome",
    "fitz": "PyMuPDF",
    "git": "GitPython",
    "tensorflow_datasets": "tensorflow-datasets",
    "whisper": "openai-whisper",
    "nemo": "nemo_toolkit",
    "taming": "taming-transformers",
    "pyannote.audio": "pyannote.audio",
}


def _install_name(module: str, top: str) -> str:
    """What `pip install` takes for an import of `module` (INSTALL_NAMES; else its top-level name)."""
    return next((INSTALL_NAMES[m] for m in (module, ".".join(module.split(".")[:2]), top) if m in INSTALL_NAMES), top)


def _fields(m, facts: Facts) -> dict:
    return _fields_of({k: v for k, v in m.groupdict().items() if v}, facts)


def _fields_of(groups: dict, facts: Facts) -> dict:
    """The fields a family's texts are filled with: the groups a pattern filled (or the names read elsewhere), the
    package and its versions from the facts."""
    for key in ("module", "name", "callee", "arg"):  # a pattern's other wordings name their groups module2, name2 ...
        for other in (f"{key}2", f"{key}3"):
            if key not in groups and other in groups:
                groups[key] = groups[other]
    module = groups.get("module", "")
    top = module.split(".")[0] if module else (facts.package or "the library")
    pkg = facts.package or top
    fields = _Fields(
        groups, top=top, pkg=pkg, dist=_install_name(module, top), gpu=", ".join(facts.gpus) or "this card"
    )
    for name, version in facts.versions.items():
        fields[f"v_{name.replace('-', '_')}"] = version
    fields["v_top"] = _version(facts, top)
    fields["v_pkg"] = _version(facts, pkg)
    return fields  # a group the pattern did not fill reads "" (_Fields.__missing__)


def _version(facts: Facts, name: str, missing: str = "not in the log") -> str:
    """The version the log shows for a package (or an import name LIBRARIES maps to one), else `missing`."""
    return facts.versions.get(LIBRARIES.get(name, name), missing)
