"""Pretrained starts: the global model begins from given weights (``RunConfig.init``).

``init`` is one of

* a file saved with ``torch.save(model.state_dict())`` (``~`` expanded; made absolute
  by the config check, in the driver, so every trial on every node reads the same file),
  read with ``torch.load(weights_only=True)``: tensors, numbers and strings only, so a
  file whose pickle would need code to load is refused, and nothing in it is executed;
* ``fedsweep:NAME``, a start shipped with fedsweep (``federated/models/starts/NAME.pt``,
  made by ``examples/pretrain_start.py``);
* ``torchvision:WEIGHTS`` (``DEFAULT``, ``IMAGENET1K_V1``, ...), the named weights of the
  run's ``model=torchvision:ARCH``, or of another family's model as the family maps it
  (a torchvision detector's COCO weights or its backbone's ImageNet ones:
  :attr:`~federated.models.family.ModelFamily.start`), read from the torch cache
  (``$TORCH_HOME/hub/checkpoints``, default ``~/.cache/torch/hub/checkpoints``) and
  downloaded into it where they are missing and the machine is online.

How weights meet the model (:func:`match_start`): by name and shape.  A file may hold the
whole model (``encoder.*``, ``head.*``, ``classifier.*``, as a fedsweep model's
``state_dict()``) or the encoder alone (its own names, e.g. a bare torchvision or
:class:`~federated.models.simple_cnn.SimpleCNN` state dict).  The layers above the
encoder — the projection head and the output layer — keep their fresh initialisation
where the file lacks them or their shape differs (another class count, another
``out_dim``): one notice line names them.  Any other difference — an encoder layer of
another shape, an encoder layer the file lacks, a tensor the model has no place for — is
refused, naming the layer.  Named torchvision weights are an encoder's by construction:
their ImageNet classifier is dropped (fedsweep's output layer replaces it) and the
layers fedsweep adapts to the data (a first convolution for other channels, the CIFAR
stem on small images) keep their fresh initialisation, named in the same notice, except a
grey-scale first convolution of the same kernel, which takes the RGB kernels' sum.
A family with a weight layout of its own names its tensors itself
(:attr:`~federated.models.family.ModelFamily.start`, e.g.
:mod:`federated.tasks.detection.start`): its class layers may then differ from the
model's (another class count: COCO's 91 against the task's), which stay fresh, named in
the notice; a backbone's weights leave every layer outside the backbone fresh, named by
module.

Applying a start draws no random numbers: the model is built from the run's ``init``
stream exactly as without a start, then the matched tensors are copied in, so every other
random draw of the run is unchanged.
"""

from __future__ import annotations

import hashlib
import os
import re
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from federated.cli.error_reason import error_reason
from federated.models.import_path import TORCHVISION_PREFIX
from federated.runtime.atomic_file import atomic_open

SHIPPED_PREFIX = "fedsweep:"
SHIPPED_FOLDER = Path(__file__).resolve().parent / "starts"
# The layers above the encoder (federated/models/fedcon.py): a start may lack them or
# hold them in another shape; they then keep the run's fresh initialisation.
HEAD_PREFIXES = ("head.", "classifier.")
ENCODER_PREFIX = "encoder."
# BatchNorm's step counter: older torchvision files lack it; it only counts updates.
COUNTER_SUFFIX = "num_batches_tracked"
DOWNLOAD_TIMEOUT_S = 30.0
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class StartError(ValueError):
    """A start cannot be used; ``problem`` says why, in one line (the config check turns
    it into the ``init`` field's error)."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


class StartNotice(UserWarning):
    """The one line a run prints about layers its start did not set."""


@dataclass(frozen=True)
class StartWeights:
    """A start's tensors and where they came from.

    ``tensors`` are named as the fedsweep model names them (``encoder.`` added to an
    encoder-only file's names).  ``fresh_layers``: layers fedsweep adapted to the data,
    whose weights it keeps fresh (torchvision weights only).  ``source`` is the file read.
    ``class_layers``: a detector's layers with one output per class, kept fresh where the
    start has another class count.  ``covers``: the name prefix of the model's tensors the
    start sets ("" for all); the model's tensors outside it stay fresh (a detector's
    backbone weights)."""

    tensors: dict[str, torch.Tensor]
    source: Path
    encoder_only: bool
    adapted: frozenset[str] = frozenset()
    class_layers: frozenset[str] = frozenset()
    covers: str = ""


class StartMapping(Protocol):
    """How a pretrained start meets a family's models where the encoder-and-head reading
    (:mod:`federated.models.pretrained_start`) does not fit: a detector's weight layout."""

    def named_weights(self, wanted: str, model: str) -> Any:
        """The torchvision weights enum member ``wanted`` (``DEFAULT`` ...) names for
        ``model``; :class:`~federated.models.pretrained_start.StartError` else."""

    def weights(
        self, init: str, model: str, tensors: dict[str, torch.Tensor], path: Path
    ) -> StartWeights:
        """Start ``init``'s ``tensors`` (read from ``path``), named as ``model`` names them."""


@dataclass(frozen=True)
class StartMatch:
    """What a start sets in a model: ``copied`` names (model names), the head layers that
    stay fresh (``fresh_head``), adapted layers that stay fresh (``fresh_adapted``) and the
    start's head layers the model lacks (``unused_head``)."""

    copied: dict[str, torch.Tensor]
    fresh_head: tuple[str, ...]
    fresh_adapted: tuple[str, ...]
    unused_head: tuple[str, ...] = ()
    fresh_classes: tuple[str, ...] = ()
    fresh_uncovered: tuple[str, ...] = ()

    def notice(self, init: str) -> str | None:
        """The one notice line, or None when the start sets every layer."""
        parts = []
        if self.fresh_head:
            parts.append(
                "head layers not in the start or of another shape: " + ", ".join(self.fresh_head)
            )
        if self.fresh_adapted:
            parts.append("layers adapted to the data: " + ", ".join(self.fresh_adapted))
        if self.fresh_classes:
            parts.append(
                "class layers of another class count in the start: " + ", ".join(self.fresh_classes)
            )
        if self.fresh_uncovered:
            parts.append("modules outside the start's backbone: " + ", ".join(self.fresh_uncovered))
        text = "; ".join(parts)
        if parts:
            text = "freshly initialised from the run's seed, " + text
        if self.unused_head:
            unused = "the start's head layers the model has none of, unused: "
            text = "; ".join(t for t in (text, unused + ", ".join(self.unused_head)) if t)
        return f"init {init}: {text}" if text else None


# ----------------------------------------------------------------------- where a start is
def start_kind(init: str) -> str:
    """``"torchvision"``, ``"shipped"`` or ``"file"``."""
    if init.startswith(TORCHVISION_PREFIX):
        return "torchvision"
    if init.startswith(SHIPPED_PREFIX):
        return "shipped"
    return "file"


def shipped_starts() -> list[str]:
    """The names of the starts shipped with fedsweep (``fedsweep:NAME``)."""
    if not SHIPPED_FOLDER.is_dir():
        return []
    return sorted(p.stem for p in SHIPPED_FOLDER.glob("*.pt"))


def absolute_start(init: str) -> str:
    """``init`` with a file path made absolute (``~`` expanded); other kinds unchanged."""
    if start_kind(init) != "file":
        return init
    return str(Path(init).expanduser().absolute())


def start_file(init: str, model: str) -> Path:
    """The file that start ``init`` reads for ``model`` (torchvision weights: their cache
    file, downloaded first where missing); :class:`StartError` when there is none."""
    kind = start_kind(init)
    if kind == "torchvision":
        return _torchvision_file(init, model)
    if kind == "shipped":
        name = init[len(SHIPPED_PREFIX) :]
        path = SHIPPED_FOLDER / f"{name}.pt"
        if not _NAME.fullmatch(name) or not path.is_file():
            known = ", ".join(SHIPPED_PREFIX + n for n in shipped_starts()) or "none"
            raise StartError(f"no shipped start {name!r} (shipped: {known})")
        return path
    path = Path(init).expanduser()
    try:
        found, is_file = path.exists(), path.is_file()
    except OSError as err:  # a name too long, a symlink loop: the OS's word, one line
        raise StartError(f"{init!r} cannot be read ({err.strerror or err})") from None
    if not found:
        raise StartError(f"file {path} not found")
    if not is_file:
        raise StartError(f"{path} is not a file (a torch.save(model.state_dict()) file)")
    return path


# ------------------------------------------------------------------------- reading
_cache: dict[tuple[str, int, int], dict[str, torch.Tensor]] = {}


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    """The state dict saved in ``path``, read with ``weights_only=True``; cached per
    (path, size, modification time), so a sweep's checks and its run read it once."""
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _cache:
        _cache.clear()  # one start at a time is the common case: keep memory flat
        _cache[key] = _load(path)
    return _cache[key]


# What torch.save writes: a zip archive (torch >= 1.6), or a legacy pickle (protocol 2+)
_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_MAGIC = b"\x80"
_NOT_A_START = "(allowed: a torch.save(model.state_dict(), path) file)"


def _load(path: Path) -> dict[str, torch.Tensor]:
    """The state dict in ``path``: one line naming the file and what is wrong with it
    (empty, not a torch file, needs code, not name -> tensor, NaN or infinite values)."""
    with path.open("rb") as fh:
        head = fh.read(4)
    if not head:
        raise StartError(f"{path} is refused: it is empty {_NOT_A_START}")
    if not (head.startswith(_ZIP_MAGIC) or head.startswith(_PICKLE_MAGIC)):
        # torch.load's own words for this are its parser's ("101", "invalid load key")
        raise StartError(
            f"{path} is refused: not a torch.save file (it starts {head!r}) {_NOT_A_START}"
        )
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # UnpicklingError, RuntimeError, EOFError, zip errors ...
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        if "weights_only" in str(err) or "Unsupported global" in str(err):
            reason = "its pickle needs code to load (only tensors, numbers and strings load)"
        elif isinstance(err, EOFError) or reason in ("", type(err).__name__):
            reason = f"it is cut short or damaged ({type(err).__name__})"
        raise StartError(f"{path} is refused: {reason}") from None
    if not isinstance(state, Mapping) or not state:
        got = type(state).__name__ if not isinstance(state, Mapping) else "an empty mapping"
        raise StartError(
            f"{path} holds {got}, not a state dict (save one with "
            "torch.save(model.state_dict(), path))"
        )
    bad = [k for k, v in state.items() if not isinstance(k, str) or not torch.is_tensor(v)]
    if bad:
        raise StartError(
            f"{path} is not a state dict: entry {bad[0]!r} is not a name -> tensor "
            "(save one with torch.save(model.state_dict(), path))"
        )
    # a start with NaN or infinite weights would only show as a divergence at round 1
    broken = [
        k for k, v in state.items() if v.is_floating_point() and not bool(torch.isfinite(v).all())
    ]
    if broken:
        more = f" and {len(broken) - 1} more" if len(broken) > 1 else ""
        raise StartError(
            f"{path}: tensor {broken[0]!r}{more} holds NaN or infinite values "
            "(allowed: finite weights)"
        )
    return dict(state)


def start_weights(init: str, model: str) -> StartWeights:
    """The tensors of start ``init`` for model ``model`` (named as the model names them
    where the start is an encoder's); :class:`StartError` where they cannot be read."""
    path = start_file(init, model)
    tensors = read_state_dict(path)
    own = _family_start(model)
    if own is not None:
        return own.weights(init, model, tensors, path)
    if start_kind(init) == "torchvision":
        arch = model[len(TORCHVISION_PREFIX) :]
        classifier = _torchvision_classifier(arch)
        kept = {k: v for k, v in tensors.items() if k.rsplit(".", 1)[0] != classifier}
        return StartWeights(
            {ENCODER_PREFIX + k: v for k, v in kept.items()},
            path,
            encoder_only=True,
            adapted=frozenset({ENCODER_PREFIX + _torchvision_first_conv(arch)}),
        )
    if any(k.startswith((ENCODER_PREFIX, *HEAD_PREFIXES)) for k in tensors):
        return StartWeights(tensors, path, encoder_only=False)
    return StartWeights({ENCODER_PREFIX + k: v for k, v in tensors.items()}, path, True)


def _family_start(model: str) -> StartMapping | None:
    """The start mapping of the family whose model ``model`` is, where it declares its
    own (a detector's); None: an encoder under a head."""
    from federated.models import model_families  # the kinds' families import this module

    return next((f.start for f in model_families() if model in f.names and f.start), None)


# ------------------------------------------------------------------------ matching
def match_start(model: nn.Module, weights: StartWeights, init: str) -> StartMatch:
    """Pair the start's tensors with ``model``'s by name and shape; :class:`StartError`
    naming the first layer that does not fit (module docstring)."""
    own = model.state_dict()
    unused_head: list[str] = []
    for name in weights.tensors:
        if name not in own and name.startswith(HEAD_PREFIXES):
            _add_once(unused_head, name.rsplit(".", 1)[0])  # e.g. projection_head=False
        elif name not in own:
            raise StartError(
                f"{init}: the start's tensor {_plain(name, weights)} has no layer of that "
                f"name in the model (its layers: {_sample(own)})"
            )
    copied: dict[str, torch.Tensor] = {}
    fresh_head: list[str] = []
    fresh_adapted: list[str] = []
    fresh_classes: list[str] = []
    fresh_uncovered: list[str] = []
    for name, mine in own.items():
        layer = name.rsplit(".", 1)[0]
        theirs = weights.tensors.get(name)
        if name.startswith(HEAD_PREFIXES):
            if theirs is None or theirs.shape != mine.shape:
                _add_once(fresh_head, layer)
                continue
        elif theirs is None and not name.startswith(weights.covers):
            # a backbone's weights: the FPN, RPN and heads start fresh (by module)
            _add_once(fresh_uncovered, ".".join(name.split(".")[:3]))
            continue
        elif theirs is None:
            if name.endswith(COUNTER_SUFFIX):
                continue
            raise StartError(
                f"{init}: the start has no weights for layer {_plain(name, weights)} "
                f"{tuple(mine.shape)}"
            )
        elif theirs.shape != mine.shape and layer in weights.class_layers:
            _add_once(fresh_classes, layer)  # e.g. COCO's 91 classes, the task's own
            continue
        elif theirs.shape != mine.shape:
            if layer in weights.adapted:
                summed = _grey_kernel(theirs, mine)
                if summed is None:
                    _add_once(fresh_adapted, layer)
                    continue
                theirs = summed
            else:
                raise StartError(
                    f"{init}: layer {_plain(name, weights)} is {tuple(theirs.shape)} in the "
                    f"start but {tuple(mine.shape)} in model (another architecture or input "
                    "shape; only the head and output layer may differ)"
                )
        if theirs.dtype != mine.dtype and not (
            theirs.is_floating_point() and mine.is_floating_point()
        ):
            raise StartError(
                f"{init}: layer {_plain(name, weights)} holds {theirs.dtype}, the model "
                f"{mine.dtype}"
            )
        copied[name] = theirs
    # a layer whose weight stayed fresh keeps all of its tensors fresh (its bias too)
    for layer in (*fresh_head, *fresh_adapted, *fresh_classes):
        for name in [n for n in copied if n.rsplit(".", 1)[0] == layer]:
            del copied[name]
    return StartMatch(
        copied,
        tuple(fresh_head),
        tuple(fresh_adapted),
        tuple(unused_head),
        tuple(fresh_classes),
        tuple(fresh_uncovered),
    )


def apply_start(model: nn.Module, init: str, model_name: str) -> str | None:
    """Copy start ``init``'s matched tensors into ``model`` (in place, no random draw);
    returns the notice line, or None when every layer came from the start."""
    match = match_start(model, start_weights(init, model_name), init)
    state = model.state_dict()
    with torch.no_grad():
        for name, tensor in match.copied.items():
            state[name].copy_(tensor)
    return match.notice(init)


def check_start(model: nn.Module, init: str, model_name: str) -> None:
    """Raise :class:`StartError` unless start ``init`` fits ``model`` (nothing copied)."""
    match_start(model, start_weights(init, model_name), init)


def _grey_kernel(theirs: torch.Tensor, mine: torch.Tensor) -> torch.Tensor | None:
    """An RGB first-convolution kernel summed over its colours for a grey-scale input of
    the same kernel size (the same response to a grey image); None otherwise."""
    same_kernel = theirs.ndim == 4 and theirs.shape[2:] == mine.shape[2:]
    if same_kernel and mine.shape[1] == 1 and theirs.shape[0] == mine.shape[0]:
        return theirs.sum(dim=1, keepdim=True)
    return None


def _add_once(names: list[str], layer: str) -> None:
    if layer not in names:
        names.append(layer)


def _plain(name: str, weights: StartWeights) -> str:
    """A tensor's name as the start's file names it, with the model's name beside it."""
    if weights.encoder_only and name.startswith(ENCODER_PREFIX):
        return f"{name[len(ENCODER_PREFIX) :]!r} (model: {name!r})"
    return repr(name)


def _sample(state: Mapping[str, torch.Tensor]) -> str:
    names = list(state)
    return ", ".join(names[:4]) + (", ..." if len(names) > 4 else "")


# ------------------------------------------------------------------ torchvision weights
def _torchvision_weights(init: str, model: str):
    """The torchvision weights enum member ``init`` names for ``model``."""
    import torchvision.models

    wanted = init[len(TORCHVISION_PREFIX) :]
    own = _family_start(model)
    if own is not None:
        return own.named_weights(wanted, model)
    if not model.startswith(TORCHVISION_PREFIX):
        raise StartError(
            f"named torchvision weights need model=torchvision:ARCH (the model is {model})"
        )
    arch = model[len(TORCHVISION_PREFIX) :]
    try:
        enum = torchvision.models.get_model_weights(arch)
    except (ValueError, KeyError):
        raise StartError(f"torchvision model {arch!r} has no named weights") from None
    names = ["DEFAULT", *enum.__members__]
    # the enum's own name may qualify the member (ResNet18_Weights.IMAGENET1K_V1)
    member = wanted.removeprefix(enum.__name__ + ".")
    if member not in names:
        raise StartError(f"{enum.__name__} has no weights {wanted!r} (named: {', '.join(names)})")
    return enum[member] if member != "DEFAULT" else enum.DEFAULT


def torchvision_cache_file(init: str, model: str) -> Path:
    """Where torch's cache keeps the weights ``init`` names for ``model``."""
    weights = _torchvision_weights(init, model)
    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(weights.url)


def _torchvision_file(init: str, model: str) -> Path:
    weights = _torchvision_weights(init, model)
    path = torchvision_cache_file(init, model)
    if path.is_file():
        return path
    try:
        _download(weights.url, path)
    except (OSError, ValueError) as err:
        reason = error_reason(err)
        raise StartError(
            f"{weights} are not in the torch cache (looked for {path}) and the download "
            f'failed ({reason}): on a machine online, run python -c "import '
            f'{type(weights).__module__} as m; m.{weights}.get_state_dict()" and copy the '
            "file there (TORCH_HOME moves the cache)"
        ) from None
    return path


def _download(url: str, path: Path) -> None:
    """``url`` into ``path``, whole or not at all; torchvision's file names carry the
    first digits of the file's sha256, which the download must match."""
    digest = hashlib.sha256()
    opened = urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S)
    with opened as response, atomic_open(path, "wb") as out:
        while chunk := response.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
        prefix = re.search(r"-([a-f0-9]+)\.", path.name)
        if prefix and not digest.hexdigest().startswith(prefix.group(1)):
            raise ValueError(f"the download of {url} does not match its sha256 prefix")


def _meta_model(arch: str) -> nn.Module:
    import torchvision.models

    with torch.device("meta"):
        return torchvision.models.get_model(arch, weights=None)


def _torchvision_classifier(arch: str) -> str:
    """The ImageNet classifier fedsweep removes from ``arch`` (its last Linear layer)."""
    linear = [n for n, m in _meta_model(arch).named_modules() if isinstance(m, nn.Linear)]
    return linear[-1] if linear else ""


def _torchvision_first_conv(arch: str) -> str:
    """The first convolution of ``arch``, which fedsweep adapts to the data."""
    convs = [n for n, m in _meta_model(arch).named_modules() if isinstance(m, nn.Conv2d)]
    return convs[0] if convs else ""


# ---------------------------------------------------------------------------- records
def file_sha256(path: Path) -> str:
    """The sha256 of a file's bytes (hex)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def start_hashes(configs: Iterable[Mapping[str, object]]) -> dict[str, dict[str, str]]:
    """``{init: {"file": path, "sha256": hex}}`` for every start the trial ``configs``
    name (the manifest's record of which weights the sweep started from)."""
    out: dict[str, dict[str, str]] = {}
    for config in configs:
        init = config.get("init")
        if not isinstance(init, str) or init.lower() in ("none", "null", "") or init in out:
            continue
        path = start_file(init, str(config.get("model") or ""))
        out[init] = {"file": str(path), "sha256": file_sha256(path)}
    return out
