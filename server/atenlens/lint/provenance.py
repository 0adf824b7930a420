"""What the linter knows about a value: where it lives (CUDA, CPU, a host value that is no
tensor, unknown), whether it is pinned, and whether it is likely a device tensor although nothing
proves it. Every rule asks these questions here instead of matching names of its own.

Everything follows bindings within a function (dataflow.py), depth-limited, and reads the tree
only around the expression asked about.

Device, from evidence only:
- CUDA: `.cuda()`, `.to(<device>)` where the device is not the CPU (a string, `torch.device(...)`,
  or a name or attribute spelled `device`/`dev`/`*_device`), a torch factory with such a `device=`,
  an attribute `self.x` that every assignment in the file makes so (`device_attributes`),
  and whatever is computed from a CUDA tensor (methods, views, arithmetic, `torch.*` functions, the
  class's own encoder or decoder given one: `self.decode(indices, hidden)`).
- CPU: a torch factory without `device=` or with the CPU (`torch.linspace(0, 1, 5)`),
  `torch.from_numpy`, `.cpu()`, `.to("cpu")`, `.pin_memory()`, and what is computed from them.
- HOST (not a tensor): literals, builtins' results (`len`, `float`, `range`, ...), numpy and math
  results, `.item()`/`.tolist()`/`.numpy()` results, tensor metadata (`x.dtype`, `x.shape`,
  `x.device`, `x.size()`, `x.numel()`), the variables of `for i in range(...)`/`enumerate`.
- UNKNOWN: parameters, globals, attributes of other objects, calls of other functions.
`import torch as th` makes `th.mean(x)` read as `torch.mean(x)` (`torch_name`).

Likely on the device (`likely_device`), for UNKNOWN values: a model's output or a loss in code
that mentions the device (the words `cuda` or `device` appear in the module) or in a loop that
takes a training step (`backward(`, `optim.step(`), or outside the loops of a function that takes
one (`training_step_function`), or in a class one of whose methods takes one
(`_in_training_class`, read from the class's whole text): a name or
attribute spelled with `loss` (bound to anything when the function calls its `.backward()`), the result of calling something spelled like a model
(`model(x)`, `self.net(x)`, `criterion(...)`, `teacher(...)`) or a method of something spelled
so (`self.policy.evaluate_actions(obs, a)`), a loss function of such an output
(`chunked_cross_entropy(logits, y)`), a sum of such losses, `step["loss"]` or `step.get("loss")`
of a call's result, the gradient norm `clip_grad_norm_(...)` returns, a parameter's `.grad`, a batch of a training loop
(the loop variable, or `next(iterator)`, of a loop whose body calls `backward(`: frameworks move
batches to the device before the loop sees them), and what is computed from those (also
through `x += y`, which keeps the tensor `x` was). Not a loss: what a method of the class returns
when it returns only names it starts as numbers and adds host reads to (`epoch_loss = 0`,
`epoch_loss += loss.item()`, `return epoch_loss`; `_returns_numbers`). `if not isinstance(x,
torch.Tensor): x = torch.tensor(x)` converts what was no tensor: a read after it follows the
binding before it (`_type_normalisation`). Without that evidence a value of unknown
device is not reported: a finding on a CPU tensor is worse than a missed one (precision first; see AL100 in docs/rules.md and the
measured precision and recall in tests/lint/test_lint_corpus_real.py).
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Iterator, Optional

from tree_sitter import Node

from atenlens.lint.context import LintContext
from atenlens.lint.dataflow import Binding, scope_for
from atenlens.lint.frequency import (
    function_name,
    is_test_case,
    is_test_name,
    literal_length,
    loops_around,
    steps_optimizer,
)
from atenlens.lint.source import ancestors, definition_text, indented_block, names_imported_from
from atenlens.lint.syntax import (
    SCOPE_TYPES,
    arguments,
    callee,
    dotted_name,
    is_true,
    method_name,
    module_code,
    receiver,
    repeating_loop,
    strip_parens,
    text,
)
from atenlens.lint.triggers import definitions

MAX_DEPTH = 64  # bindings followed; results are memoised per node, so a long chain costs its length


class Device(Enum):
    CUDA = "cuda"
    CPU = "cpu"
    HOST = "host"  # a Python value, a numpy array, tensor metadata: no device tensor at all
    UNKNOWN = "unknown"


VIEW_METHODS = frozenset(
    {
        "view",
        "view_as",
        "narrow",
        "select",
        "unsqueeze",
        "squeeze",
        "expand",
        "expand_as",
        "transpose",
        "permute",
        "t",
        "T",
        "mT",
        "as_strided",
        "unflatten",
        "detach",
        "unbind",
        "split",
        "chunk",
        "movedim",
        "reshape",
        "flatten",
        "contiguous",
    }
)
TORCH_FACTORIES = frozenset(
    {
        "randn",
        "rand",
        "randint",
        "randperm",
        "zeros",
        "ones",
        "empty",
        "full",
        "arange",
        "linspace",
        "logspace",
        "eye",
        "tensor",
        "as_tensor",
        "empty_strided",
        "normal",
        "bernoulli",
        "multinomial",
        "range",
        "tril_indices",
        "triu_indices",
    }
)
DTYPE_NAMES = frozenset(
    {
        "float",
        "float16",
        "float32",
        "float64",
        "half",
        "bfloat16",
        "double",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "long",
        "short",
        "uint8",
        "bool",
        "complex64",
        "complex128",
        "cfloat",
        "cdouble",
        "float8_e4m3fn",
        "float8_e5m2",
        "float8_e4m3fnuz",
        "float8_e5m2fnuz",
        "uint16",
        "uint32",
        "uint64",
        "bits16",
        "qint8",
        "quint8",
    }
)
# Builtins whose result is never a tensor.
HOST_BUILTINS = frozenset(
    {
        "len",
        "range",
        "int",
        "float",
        "str",
        "bool",
        "repr",
        "format",
        "round",
        "ord",
        "chr",
        "isinstance",
        "hasattr",
        "callable",
        "hash",
        "id",
        "type",
        "enumerate",
        "zip",
        "sorted",
        "reversed",
        "open",
        "print",
        "input",
        "divmod",
    }
)
# (`pd` / `pl`: a data frame's `.unique()` is not a tensor's)
HOST_MODULES = frozenset(
    {
        "np",
        "numpy",
        "math",
        "time",
        "os",
        "random",
        "json",
        "re",
        "datetime",
        "statistics",
        "pd",
        "pandas",
        "pl",
        "polars",
        # (configuration files and the host: `yaml.load(f)`, a dict of strings and numbers)
        "yaml",
        "toml",
        "tomllib",
        "csv",
        "glob",
        "platform",
    }
)
HOST_METHODS = frozenset(
    {
        "item",
        "tolist",
        "numpy",
        "size",
        "dim",
        "numel",
        "nelement",
        "element_size",
        "stride",
        "data_ptr",
        "is_contiguous",
        "get_device",
        "is_floating_point",
        "is_complex",
        "storage_offset",
        "untyped_storage",
        "elapsed_time",
        "record",
        "query",
        "format",
        "join",
        "split",
        "startswith",
        "endswith",
        "keys",
        # str methods (`loss_name.capitalize()`): no tensor has them
        "capitalize",
        "lower",
        "upper",
        "strip",
        "lstrip",
        "rstrip",
        "title",
        "casefold",
        "encode",
        "decode",
        "isdigit",
        "replace",
        # tensor metadata and a module's class name (`module._get_name()`)
        "ndimension",
        "_get_name",
        # an accelerator module's memory figures, reached through an alias (`accelerator_module =
        # getattr(torch, device.type)`): Python numbers
        "memory_reserved",
        "memory_allocated",
        "max_memory_allocated",
        "max_memory_reserved",
        "mem_get_info",
        "memory_stats",
        # `model.load_state_dict(sd)`: the missing and unexpected keys, names
        "load_state_dict",
        # timm's names of parameters without weight decay, and of parameter groups
        "no_weight_decay",
        "no_weight_decay_keywords",
        "group_matcher",
        # data-frame methods (pandas, polars): `frame[col].dropna().unique()` is no tensor
        "dropna",
        "drop_nulls",
        "fillna",
        "get_column",
        "to_list",
        # numpy and pandas only: no tensor has `astype` (`m.astype(np.float32)` is an array)
        "astype",
    }
)
HOST_ATTRIBUTES = frozenset(
    {
        "loc",  # pandas' `frame.loc[...]`, `frame.iloc[...]`
        "iloc",
        "dtype",
        "shape",
        "device",
        "ndim",
        "is_cuda",
        "requires_grad",
        "layout",
        "names",
        "itemsize",
        "nbytes",
        "is_leaf",
        "is_sparse",
        "is_quantized",
        "is_meta",
        "training",
        "__class__",
        "__name__",
    }
)
SAME_DEVICE_ATTRIBUTES = frozenset({"T", "mT", "H", "mH", "real", "imag", "data", "grad"})
# A method of a tensor returns a tensor on the same device, except these (host results, moves).
MOVES = frozenset({"to", "cuda", "cpu", "pin_memory"})
# A callee spelled as a model (its last word): `model`, `self.net`, `ref_model`, `text_encoder`,
# `criterion`, `compute_loss`, `loss_fn`; not `get_model_info` or `compute_module_sizes`.
# Not a function that builds, loads, finds or evaluates one (`build_model(cfg)`,
# `init_pose_model(...)`, `from_new_model(...)`, `evaluate_model(m, data)`: a model object or a
# score) or is named after one (`required_quant_library_for_model(model_id)`: a string).
_NOT_RUN = (
    # (also after one word: `_torch_get_device_module()` fetches `torch.cuda`)
    r"(?!_*(?:[A-Za-z0-9]+_)?(?:get|set|load|build|create|make|init|setup|prepare|from|wrap|unwrap|find|resolve|select|required|"
    r"evaluate|eval|inference|infer|is|has|num|count|save|export|convert|register|check|verify|import|"
    r"validate|valid)_)"
    # (`train_model(...)` runs a whole epoch; `self.train_actor_critic(...)` is a step of the model)
    r"(?!_*train_(?:model|epoch|one_epoch)$)"
)
_MODEL_WORDS = (
    r"^" + _NOT_RUN + r"(?!.*_(?:for|of|from|to)_)"
    r"_*(?:[A-Za-z0-9]+_)*(?:model|net|network|module|forward|criterion|loss|loss_fn|loss_func|lossfn|teacher|"
    r"student|policy|actor|critic|unet|transformer|vae|encoder|decoder|generator|discriminator|backbone|loss_function|"
    r"classifier|learner|lm_head|q_?func|q_?function|qf|net[gd])\d*$"
)
_MODEL_CALLEE = re.compile(
    # `self._forward_and_gradient(x)`, `forward_backward(batch)`; not `get_forward_context()`
    r"^" + _NOT_RUN + r"(?:\w*_)?forward(?:_|$)|" + _MODEL_WORDS,
    re.I,
)
# An object spelled as a model: its last word (`self.policy`, `ref_model`), not `module_forward_metadata`.
_MODEL_NAME = re.compile(_MODEL_WORDS, re.I)
# Methods of a module that return no tensor of its outputs (or return host values: `predict` in
# the scikit-learn and stable-baselines3 sense gives numpy arrays; `generate` gives token ids
# that decoding needs on the host).
MODULE_METHODS = frozenset(
    {
        "parameters",
        "named_parameters",
        "buffers",
        "named_buffers",
        "modules",
        "named_modules",
        "children",
        "named_children",
        "state_dict",
        "load_state_dict",
        "train",
        "eval",
        "zero_grad",
        "apply",
        "to",
        "cuda",
        "half",
        "float",
        "double",
        "bfloat16",
        "requires_grad_",
        "extra_repr",
        "register_buffer",
        "register_parameter",
        "register_module",
        "register_forward_hook",
        "register_forward_pre_hook",
        "register_full_backward_hook",
        "add_module",
        "save_pretrained",
        "num_parameters",
        "predict",
        "predict_proba",
        "generate",
        "get",
        "transcribe",
        "export",
        "info",
        "fuse",
        "set_training_mode",
        "reset_noise",
    }
)


# Methods of a model that return Python values, not tensors: `model.transcribe(audio)` (text and
# timings), `model.get("status")` (a record named `model`), `model.num_parameters()`.
# A predicate (`instances.has("pred_masks")`, `x.is_pinned()`, `cache.contains(k)`): a Python bool
_PREDICATE_METHOD = re.compile(r"^(?:has|contains|has_\w+|is_\w+)$")
# A count of bytes or operations, whatever it is given (`model.kv_read_bytes(context)`)
_COUNT_METHOD = re.compile(r"(?:^|_)(?:bytes|nbytes|footprint)$")
# (`model.stream_chat(tokenizer, query)`, `model.chat(...)`: ChatGLM's and Qwen's, text and history)
_MODULE_HOST_METHODS = frozenset(
    {"transcribe", "get", "num_parameters", "extra_repr", "export", "info", "chat", "stream_chat"}
    # face detectors and aligners (facexlib's RetinaFace, face_alignment's FaceAlignment) hand back
    # NumPy boxes and landmarks
    | {"detect_faces", "get_landmarks", "get_landmarks_from_image"}
)


def _spelled_model(node: Optional[Node]) -> bool:
    """`self.policy`, `model`, `self.actor`: a name or attribute spelled as a model."""
    name = dotted_name(node) if node is not None else None
    return name is not None and name != "self" and bool(_MODEL_NAME.search(name.split(".")[-1]))


# A model's own encoder / decoder step (`self.decode(indices, hidden)`, `self._encode(x)`), not
# `self.evaluate(...)` (a float) or `self.decode_text(ids)` (a string).
_CODER_METHOD = re.compile(r"^_?(?:en|de)code(?:r|_step|_batch)?$|^_?embed", re.I)
# A loss by its name (`loss`, `val_loss`, `loss_mean`), not a setting of one (`loss_weight`,
# `loss_theta_min`, `category_loss_weight`, `loss_fn`, `loss_log_freq`): the name's last word decides.
_LOSS_NAME = re.compile(
    r"loss(?!\w*_(?:weights?|weighting|coefs?|coeffs?|scales?|factors?|ratios?|min|max|thresholds?|thr|eps|k|type|fn|func|"
    r"name|names|freq|frequency|interval|every|period|idx|index|count|keys?|path|file|dir)$)",
    re.I,
)
# `clip_grad_norm_` / `clip_grad_norm` (torch.nn.utils, a wrapped model's, an accelerator's): the
# gradients' total norm, returned as a tensor on the parameters' device
_GRAD_NORM = re.compile(r"^clip_grad_norm_?$")
# An object of settings (`self.cfg`, `config`, `args`, `hparams`): its fields are numbers and names.
# (also with a prefix: `self.grpo_config`, `train_args`)
_SETTINGS = re.compile(r"(?:^|\.|_)(?:cfg|config|conf|args|hparams|opts|options|settings)$", re.I)
# A key naming a count (`"generator_iters"`, `"num_steps"`, `"epoch"`): a number, whatever it sits beside
_COUNTER_KEY = re.compile(r"(?:^|_)(?:iters?|iterations?|steps?|epochs?|counts?|batches)$|^(?:num|n)_", re.I)
# A training loop's counters (`for (batch_num, size, num_samples_so_far), batch in batches:`)
# A name spelled as a piece of text (`loss_name`, `metric_key`, `log_prefix`): no tensor, whatever
# loop or attribute it comes from (`for loss_name in self.losses:` iterates the losses' names).
_TEXT_NAME = re.compile(
    r"(?:^|_)(?:name|names|key|keys|str|string|prefix|suffix|path|file|filename|fmt|msg|message|tag|desc|alias)$", re.I
)
_CPU_NAME = re.compile(r"(?:^|_)cpu$", re.I)
# Keys under which results hold text (a text-generation pipeline's `generated_text`, a chat
# message's `content`, a `caption`)
_TEXT_KEY = re.compile(r"^(?:generated_text|text|content|caption|prompt|role|answer|question)$")
# A rate or a frame count per second, a Python number (`output_audio_sample_rate`, `fps`)
_RATE_NAME = re.compile(r"(?:^|_)(?:sample_rate|sampling_rate|frame_rate|fps|rtf)$", re.I)
_COUNTER_NAME = re.compile(
    r"^(?:num|n)_|_(?:num|size|count|so_far|idx|index)$|^(?:step|idx|epoch|it|iteration|i|j|k)$", re.I
)
# (not `train_model(...)` / `train_epoch(...)`: a whole epoch, whose loss comes back averaged as a float)
_LOSS_CALLEE = re.compile(r"loss|step|forward|criterion|^_?train(?!_(?:model|epoch|one_epoch)$)", re.I)
# A function that builds the loss functions (`initialize_loss_functions(cfg)`, `build_criterion`)
# (not `get_unitary_loss(model)`, which computes one)
_MAKES_LOSS_FUNCTIONS = re.compile(r"^_?(?:init|initiali[sz]e|build|create|setup)_\w*(?:loss|criterion)", re.I)
# A loss or a metric function: of a model's output it computes a tensor on the output's device
# (`metrics.accuracy(outputs, pids)[0]`, timm's `accuracy(output, target, topk=(1, 5))`)
_LOSS_FUNCTION = re.compile(r"loss|entropy|nll|criterion|divergence|mse|bce|accuracy", re.I)
_DEVICE_NAME = re.compile(r"(?:^|_)(?:device|dev)(?:$|_)|_device$|^device", re.I)
_DEVICE_GETTER = re.compile(r"^_?get_(?:\w+_)?device$|^current_device$")
_MENTIONS_DEVICE = re.compile(rb"\b(?:cuda|device)\b")
# Trigger bytes (triggers.py) of "some value here may be on the device": `likely_device` and
# `maybe_device` are False in a file without one of them. Every CUDA proof above is spelled with
# `cuda` or `dev` (`.cuda()`, `device=`, `torch.device(...)`, names spelled `dev`/`*_device`)
# except `.to("<string>")`; the model-output guess needs `cuda` or `device` in the file.
DEVICE_EVIDENCE = (b"cuda", b"dev", re.compile(rb"to\s*\((?:\s|#[^\n]*)*[rRbBuUfF]{0,2}['\"]"))


def string_value(node: Node) -> str:
    """The characters of a plain string literal (no interpolation), "" for anything else."""
    return "".join(text(c) for c in node.named_children if c.type == "string_content")


def is_cpu_device(node: Optional[Node]) -> bool:
    """`"cpu"`, `'cpu:0'`, `torch.device("cpu")`."""
    if node is None:
        return False
    node = strip_parens(node)
    if node.type == "string":
        return string_value(node).startswith("cpu")
    if node.type == "call" and dotted_name(callee(node)) in ("torch.device", "device"):
        positional, keywords = arguments(node)
        first = keywords.get("type") or (positional[0] if positional else None)
        return first is not None and is_cpu_device(first)
    return False


def is_dtype(node: Optional[Node]) -> bool:
    """`torch.float16` and friends, `x.dtype`, a name spelled `dtype`/`*_dtype` (a `.to(dtype)` is
    a cast, not a device copy)."""
    if node is None:
        return False
    node = strip_parens(node)
    name = dotted_name(node)
    if name is None:
        return False
    last = name.split(".")[-1]
    if name.startswith("torch.") and last in DTYPE_NAMES:
        return True
    return last == "dtype" or last.endswith("_dtype") or last.startswith("dtype_")


def is_clear_device(node: Optional[Node]) -> bool:
    """Is `node` certainly a device, written as one: a string literal, `torch.device(...)`, or a
    name/attribute spelled `device`, `dev`, `*_device` (`self.device`, `x.device`,
    `accelerator.device`)? Anything else may be a dtype or a tensor (`.to(other)`)."""
    if node is None:
        return False
    node = strip_parens(node)
    if node.type == "string":
        return not any(c.type == "interpolation" for c in node.named_children) and bool(string_value(node))
    if node.type == "call":
        # `torch.device("cuda")`, `get_model_device(model)`, `get_device()`: a function that
        # returns a device (an index from `current_device()` is a valid device as well)
        name = dotted_name(callee(node)) or ""
        return name in ("torch.device", "device") or bool(_DEVICE_GETTER.search(name.split(".")[-1]))
    if node.type == "attribute":
        # `boxes[0].device`, `outputs["x"].device`: the device of whatever is before the dot
        attribute = node.child_by_field_name("attribute")
        return attribute is not None and bool(_DEVICE_NAME.search(text(attribute)))
    dotted = dotted_name(node)
    return dotted is not None and bool(_DEVICE_NAME.search(dotted.split(".")[-1]))


def to_device_argument(call: Node) -> Optional[Node]:
    """The device a `.to(...)` call moves to (positional or `device=`), None when it is only a
    cast (a dtype) or the argument is not a device (`.to(other_tensor)`: not known as a device)."""
    positional, keywords = arguments(call)
    if "device" in keywords:
        return keywords["device"]
    if positional and not is_dtype(positional[0]):
        return positional[0]
    return None


def is_device_to_host(call: Node) -> bool:
    """`.cpu(...)` or `.to("cpu", ...)`."""
    method = method_name(call)
    if method == "cpu":
        return True
    if method == "to":
        return is_cpu_device(to_device_argument(call))
    return False


def is_factory(call: Node, name: Optional[str] = None) -> bool:
    """`torch.zeros(...)` and the other TORCH_FACTORIES (`name`: the callee's name as
    `torch_name` spells it, when the caller has it)."""
    name = (dotted_name(callee(call)) or "") if name is None else name
    parts = name.split(".")
    return len(parts) == 2 and parts[0] == "torch" and parts[1] in TORCH_FACTORIES


# Searched without `^` and re.M, and kept only at a line's start: a pattern that starts with a
# literal is searched for as a string (0.7 ms a 5,000-line file; `^` with re.M tried the pattern
# at every byte: 5.6 ms, on every keystroke in the editor).
_TORCH_ALIAS = re.compile(rb"import[ \t]+torch[ \t]+as[ \t]+(\w+)")


def torch_aliases(ctx: LintContext) -> frozenset[str]:
    """The names the module imports torch as (`import torch as th`, as stable-baselines3 does)."""
    cached = getattr(ctx, "_torch_aliases", None)
    if cached is None:
        data = ctx.source.whole_data
        found = {
            m.group(1).decode() for m in _TORCH_ALIAS.finditer(data) if m.start() == 0 or data[m.start() - 1] == 0x0A
        }
        cached = ctx._torch_aliases = frozenset(found - {"torch"})
    return cached


# `from sklearn.metrics import log_loss, roc_auc_score`: functions of host libraries, whose
# results are Python or numpy values
_HOST_LIBRARIES = rb"(?:sklearn|scipy|numpy|pandas|math|statistics)(?:\.[\w.]+)?"


def host_imported_functions(ctx: LintContext) -> frozenset[str]:
    """The names this file imports from host libraries (`log_loss` of `from sklearn.metrics import
    log_loss`): a module-wide fact (lint/facts.py), as `torch_aliases` is."""
    cached = getattr(ctx, "_host_imported", None)
    if cached is None:
        cached = ctx._host_imported = names_imported_from(ctx.source.whole_data, _HOST_LIBRARIES)
    return cached


def collated_lists(ctx: LintContext) -> frozenset[str]:
    """The keys under which a collate function of this file hands its batch a Python list
    (`drop_image_embeds = [example["drop_image_embed"] for example in data]`, then `return
    {"drop_image_embeds": drop_image_embeds, ...}`): `batch["drop_image_embeds"]` holds numbers
    or objects, not a tensor a framework would move. A module-wide fact (lint/facts.py), read from
    the file's text so that what the prefilter leaves out of the parse does not change it."""
    cached = getattr(ctx, "_collated_lists", None)
    if cached is None:
        data = ctx.source.whole_data
        keys: set[str] = set()
        if b"collat" in data:
            for start, end in definitions(data):
                header = _COLLATE_HEADER.match(data, start, end)
                if header is None:
                    continue
                body = data[start:end]
                listed = {m.group(1) for m in _LIST_BOUND.finditer(body)}
                keys.update(m.group(1).decode() for m in _KEYED_NAME.finditer(body) if m.group(2) in listed)
        cached = ctx._collated_lists = frozenset(keys)
    return cached


def _host_key(ctx: LintContext, subscript: Node) -> bool:
    """Is the item a key names a host value: a list a collate function of the file built
    (`batch["drop_image_embeds"]`), text (`outputs[0]["generated_text"]`, `["content"]`) or a rate
    (`output["rtf"]`, `meta["sample_rate"]`)?"""
    key = subscript.child_by_field_name("subscript")
    if key is None or key.type != "string":
        return False
    name = string_value(key)
    return bool(_TEXT_KEY.match(name) or _RATE_NAME.search(name)) or name in collated_lists(ctx)


_COLLATE_HEADER = re.compile(rb"(?:@[^\n]*\n)*(?:async\s+)?def\s+\w*collat\w*\s*\(")
# `name = [... for ... in ...]` or `name = []`: a list built in the collate function
_LIST_BOUND = re.compile(rb"^[ \t]+(\w+)[ \t]*=[ \t]*\[", re.M)
# `"key": name` in the dictionary it returns
_KEYED_NAME = re.compile(rb"[\"'](\w+)[\"'][ \t]*:[ \t]*(\w+)[ \t]*[,}\n]")


def torch_name(ctx: LintContext, node: Optional[Node]) -> str:
    """`dotted_name`, with an alias of torch spelled `torch` (`th.mean` -> `torch.mean`); "" for
    anything that is no name chain."""
    name = dotted_name(node) or ""
    head, dot, rest = name.partition(".")
    if dot and head != "torch" and head in torch_aliases(ctx):
        return "torch." + rest
    return name


# Random draws given a tensor of parameters: their samples are where that tensor is
_SAMPLES_ITS_INPUT = frozenset({"torch.multinomial", "torch.bernoulli", "torch.normal", "torch.poisson"})


def _gathered(call: Node) -> Optional[Node]:
    """The tensor `accelerator.gather(loss)`, `fabric.all_reduce(x)`, `accelerator.reduce(t)` or
    `gather_for_metrics(preds)` hands to a distributed framework, which returns the ranks' values
    on the same device (not a tensor's own `logits.gather(1, index)`)."""
    owner = receiver(call)
    if method_name(call) not in _GATHERS or owner is None or not _DISTRIBUTED_FRAMEWORK.search(text(owner)):
        return None
    positional, _ = arguments(call)
    return positional[0] if positional else None


_GATHERS = frozenset({"gather", "gather_for_metrics", "reduce", "all_reduce", "all_gather", "pad_across_processes"})
_DISTRIBUTED_FRAMEWORK = re.compile(r"(?:^|\.)(?:accelerator|fabric)$", re.I)


def factory_device(call: Node) -> Device:
    """Where a torch factory puts its tensor: CPU without `device=`."""
    device = arguments(call)[1].get("device")
    if device is None or device.type == "none" or is_cpu_device(device):
        return Device.CPU
    return Device.CUDA if is_clear_device(device) else Device.UNKNOWN


def _binding(ctx: LintContext, ident: Node) -> Optional[Binding]:
    binding = ctx.bindings(ident).at(text(ident), ident.start_byte)
    test = _type_normalisation(binding)
    if binding is not None and test is not None and not (test.start_byte <= ident.start_byte < test.end_byte):
        # `if not isinstance(norm, torch.Tensor): norm = torch.tensor(norm)`: taken only when the
        # value was no tensor; a tensor keeps its binding from before the test
        return ctx.bindings(ident).at(text(ident), test.start_byte)
    return binding


def module_constant(ctx: LintContext, ident: Node) -> Optional[Node]:
    """The value that a name not bound in its function is given by the one module-level
    assignment of it (`SIZES = [(1,), (3, 3)]`, `DEV = "hpu"`): a constant the functions read."""
    if scope_for(ident).type == "module" or _binding(ctx, ident) is not None:
        return None
    bindings = ctx.bindings(ctx.source.root).of(text(ident))
    if len(bindings) != 1 or bindings[0].value is None or bindings[0].loop is not None or bindings[0].path:
        return None
    return strip_parens(bindings[0].value)


def _module_constant(ctx: LintContext, ident: Node) -> Optional[Node]:
    """`module_constant` when it is a literal list, tuple or set."""
    value = module_constant(ctx, ident)
    return value if value is not None and value.type in ("list", "tuple", "set") else None


def _type_normalisation(binding: Optional[Binding]) -> Optional[Node]:
    """The `if` statement when `binding` is the whole body of `if not isinstance(<name>, ...):`
    with no `else`: a conversion of a value that was not of that type."""
    if binding is None or binding.site is None:
        return None
    assignment = binding.site.parent
    statement = assignment.parent if assignment is not None and assignment.type == "assignment" else None
    block = statement.parent if statement is not None and statement.type == "expression_statement" else None
    test = block.parent if block is not None and block.type == "block" else None
    if block is None or test is None or test.type != "if_statement" or test.child_by_field_name("consequence") != block:
        return None
    if test.child_by_field_name("alternative") is not None or len(block.named_children) != 1:
        return None
    condition = test.child_by_field_name("condition")
    condition = strip_parens(condition) if condition is not None else None
    checked = (
        condition.child_by_field_name("argument")
        if condition is not None and condition.type == "not_operator"
        else None
    )
    if checked is None or checked.type != "call" or dotted_name(callee(checked)) != "isinstance":
        return None
    positional, _ = arguments(checked)
    return test if positional and text(strip_parens(positional[0])) == binding.name else None


def _call_site_arguments(ctx: LintContext, name: Node) -> list[Node]:
    """For a parameter of a module-level function (`def accuracy(output, target):`), the
    arguments the calls of that function inside loops of this file pass it (`accuracy(logits, y)`
    per batch); [] when it is no such parameter, or such a call passes it by `*args` / `**kwargs`
    or not at all. (Only calls in loops: a definition without a loop may be left out of the parse
    on the command line, and the findings must not depend on that.)"""
    cache = _memo(ctx, "_call_site_memo")
    if name.id in cache:
        return cache[name.id]
    cache[name.id] = []
    function = scope_for(name)
    if function.type != "function_definition" or function.parent is None or function.parent.type != "module":
        return []
    parameters = function.child_by_field_name("parameters")
    names = []
    for p in parameters.named_children if parameters is not None else []:
        ident = (
            p
            if p.type == "identifier"
            else p.child_by_field_name("name")
            if p.type in ("default_parameter", "typed_parameter", "typed_default_parameter")
            else None
        )
        if ident is None and p.type == "typed_parameter":
            ident = next((c for c in p.named_children if c.type == "identifier"), None)
        if ident is None:
            return []  # `*args`, `**kwargs`, `/`, `*`: positions are not followed
        names.append(text(ident))
    if text(name) not in names:
        return []
    index = names.index(text(name))
    title = function.child_by_field_name("name")
    found = []
    for use in ctx.function_uses(text(title)) if title is not None else []:
        call = use.parent
        if (
            call is None
            or call.type != "call"
            or call.child_by_field_name("function") != use
            or repeating_loop(call) is None
        ):
            continue
        arguments_node = call.child_by_field_name("arguments")
        if arguments_node is None or any(
            c.type in ("list_splat", "dictionary_splat") for c in arguments_node.named_children
        ):
            return []
        positional, keywords = arguments(call)
        argument = keywords.get(text(name)) or (positional[index] if index < len(positional) else None)
        if argument is None:
            return []
        found.append(argument)
    cache[name.id] = found
    return found


def _combine(devices: list[Device]) -> Device:
    """Device of an operation on several operands: CUDA if any operand is, CPU if a CPU tensor
    takes part and nothing unknown does, HOST if only host values do."""
    if Device.CUDA in devices:
        return Device.CUDA
    if Device.UNKNOWN in devices or not devices:
        return Device.UNKNOWN
    return Device.CPU if Device.CPU in devices else Device.HOST


def device_of(ctx: LintContext, node: Optional[Node], depth: int = 0) -> Device:
    if node is None or depth > MAX_DEPTH:
        return Device.UNKNOWN
    memo = _memo(ctx, "_device_memo")
    if node.id not in memo:
        memo[node.id] = _device_of(ctx, node, depth)
    return memo[node.id]


_SELF_ASSIGNMENT = re.compile(rb"self\.(\w+)[ \t]*=(?!=)[ \t]*([^\n]*)")  # (no `\b`: a literal start scans fast)
_BUFFER_REGISTERED = re.compile(rb"register_buffer\([ \t]*[\"'](\w+)[\"'][ \t]*,[ \t]*([^\n]*)")
_ON_DEVICE_TEXT = re.compile(
    rb"\.cuda\(|\bdevice[ \t]*=(?!=)[ \t]*(?!None\b|[\"']cpu)[\w.\"']|\.to\([ \t]*(?:self\.)?(?:\w+_)?device\b"
)


# An object of a class of the user's or a library's (`RandomNetworkDistillation(device=device)`):
# given a device, but no tensor (torch's and `nn.`'s classes are left to the other rules)
_OBJECT_BUILT = re.compile(rb"(?!torch\.|nn\.)(?:[A-Za-z_]\w*\.)*[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*\(")


def device_attributes(ctx: LintContext) -> frozenset[str]:
    """The attributes `self.X` that every assignment in the file (but `= None`) makes or moves to
    the device, by the assignment's first line: `self.ent_coef_tensor = torch.tensor(c,
    device=self.device)` in a setup method, maybe in one branch of an if/else, makes
    `self.ent_coef_tensor` a CUDA tensor wherever it is read. A byte scan of the whole file
    (lint/facts.py), so the answer does not depend on which definitions are parsed."""
    cached = getattr(ctx, "_device_attributes", None)
    if cached is None:
        on_device: dict[bytes, bool] = {}
        data = ctx.source.whole_data if module_mentions_device(ctx) else b""
        assignments = [(m.group(1), m.group(2).strip()) for m in _SELF_ASSIGNMENT.finditer(data)]
        # `self.register_buffer("steps", torch.Tensor([0]))` binds `self.steps` too (on the CPU
        # until the module is moved: not made on the device by that line)
        assignments += [(m.group(1), m.group(2).strip()) for m in _BUFFER_REGISTERED.finditer(data)]
        for name, value in assignments:
            if value in (b"None", b""):
                continue
            made_there = (
                (b"cuda" in value or b"device" in value)
                and bool(_ON_DEVICE_TEXT.search(value))
                and not _OBJECT_BUILT.match(value)
            )
            on_device[name] = on_device.get(name, True) and made_there
        cached = frozenset(n.decode() for n, ok in on_device.items() if ok)
        ctx._device_attributes = cached
    return cached


def _memo(ctx: LintContext, name: str) -> dict:
    memo = getattr(ctx, name, None)
    if memo is None:
        memo = {}
        setattr(ctx, name, memo)
    return memo


def _device_of(ctx: LintContext, node: Node, depth: int) -> Device:
    node = strip_parens(node)
    kind = node.type
    if kind in (
        "integer",
        "float",
        "string",
        "concatenated_string",
        "true",
        "false",
        "none",
        "boolean_operator",
        "not_operator",
    ):
        return Device.HOST
    if kind == "identifier":
        if _CPU_NAME.search(text(node)):
            return Device.CPU  # `token_ids_cpu`, `idx_cpu`: named as the host copy it is
        if _RATE_NAME.search(text(node)):
            return Device.HOST  # `int(output_audio_sample_rate)`: a number of samples per second
        binding = _binding(ctx, node)
        while binding is not None and binding.augmented and depth <= MAX_DEPTH:
            # `total += x` keeps the tensor `total` was: the binding before the statement applies
            binding, depth = ctx.bindings(node).at(text(node), binding.start - 1), depth + 1
        if binding is None:
            annotation = _parameter_annotation(node)
            if annotation is not None and (_numbers_annotation(annotation) or _names_other_class(annotation)):
                # `def f(..., step_tag_id: int)`, `aggregator: MetricAggregator | None`: no tensor
                return Device.HOST
            devices = [device_of(ctx, a, depth + 1) for a in _call_site_arguments(ctx, node)]
            return devices[0] if devices and len(set(devices)) == 1 else Device.UNKNOWN
        found = _binding_device(ctx, binding, depth)
        if found is Device.CUDA or found is Device.CPU:
            return found
        # `if a: x = out.logits else: x = None`: a CUDA tensor in one branch and no CPU tensor in
        # any other is read as the CUDA tensor after the statement
        alternatives = ctx.bindings(node).branch_alternatives(text(node), node.start_byte, binding)
        others = [_binding_device(ctx, b, depth) for b in alternatives]
        if Device.CUDA in others and Device.CPU not in others:
            return Device.CUDA
        return found
    if kind == "attribute":
        attr = text(node.child_by_field_name("attribute"))
        if attr in HOST_ATTRIBUTES or _TEXT_NAME.search(attr):
            return Device.HOST  # (`metric.alias`, `self.prefix`: names are text)
        inner = device_of(ctx, node.child_by_field_name("object"), depth + 1)
        if attr in SAME_DEVICE_ATTRIBUTES:
            return inner if inner in (Device.CUDA, Device.CPU) else Device.UNKNOWN
        owner = node.child_by_field_name("object")
        if (
            owner is not None
            and owner.type == "identifier"
            and text(owner) == "self"
            and attr in device_attributes(ctx)
        ):
            return Device.CUDA
        # a field of a host batch (`batch.edge_index` of a DataLoader's batch) is on the host
        return Device.CPU if inner is Device.CPU else Device.UNKNOWN
    if kind == "subscript":
        if _made_on_the_cpu_each(ctx, node.child_by_field_name("value"), depth):
            return Device.CPU
        if _host_key(ctx, node):
            return Device.HOST
        inner = device_of(ctx, node.child_by_field_name("value"), depth + 1)
        return inner  # an element of a tensor lives where the tensor does; of a host value, on the host
    if kind == "comparison_operator" and _compares_with_string(node):
        return Device.HOST  # `layer_type == "a"`: no tensor is compared with a string
    if kind == "comparison_operator" and all(text(c) in ("is", "not") for c in node.children if not c.is_named):
        return Device.HOST  # `a is None`, `(a is None) != (b is None)`: an identity test, a Python bool
    if kind in ("binary_operator", "comparison_operator"):
        operands = [c for c in node.named_children if c.type != "comment"]
        devices = [device_of(ctx, c, depth + 1) for c in operands]
        made_here = any(
            strip_parens(c).type in ("call", "identifier", "subscript") and d is Device.CPU
            for c, d in zip(operands, devices)
        )
        if kind == "comparison_operator" and made_here and Device.CUDA not in devices:
            # `torch.tensor(ids) == token_id`, `selected >= offset` after `selected = selected.cpu()`,
            # `query[i] != pad` after `query = ids.cpu()`:
            # a CPU tensor compared with a CUDA tensor raises (but for a 0-d one), so the other
            # side is a number or on the CPU
            return Device.CPU
        if Device.CUDA not in devices and any(_ranged_on_cpu(ctx, c, 0) for c in operands):
            # `base ** (torch.arange(0, dim, 2).float() / dim)`: a CPU tensor of one dimension or
            # more meets only numbers or CPU tensors (a CUDA one would raise), so the result is there
            return Device.CPU
        return _combine(devices)
    if kind == "unary_operator":
        return device_of(ctx, node.child_by_field_name("argument"), depth + 1)
    if kind == "conditional_expression":
        # (`None if selected is None else selected >= offset`: the tensor where there is one)
        branches = [device_of(ctx, c, depth + 1) for c in node.named_children[::2] if strip_parens(c).type != "none"]
        return branches[0] if branches and len(set(branches)) == 1 else Device.UNKNOWN
    if kind == "call":
        return _call_device(ctx, node, depth)
    if kind == "named_expression":
        return device_of(ctx, node.child_by_field_name("value"), depth + 1)
    if kind == "dictionary":
        # `{"a": x.cpu(), "b": y.cpu()}`: its values' device when they all agree (`.items()`, `[k]`)
        values = [
            device_of(ctx, pair.child_by_field_name("value"), depth + 1)
            for pair in node.named_children
            if pair.type == "pair"
        ]
        return (
            values[0] if values and len(set(values)) == 1 and values[0] in (Device.CUDA, Device.CPU) else Device.UNKNOWN
        )
    return Device.UNKNOWN


def _made_on_the_cpu_each(ctx: LintContext, container: Optional[Node], depth: int) -> bool:
    """Is `container` a name bound to a comprehension each of whose elements is made on the CPU
    (`mask = {k: torch.from_numpy(np.isin(a[k], b)) for k in keys}`)? Then `mask[k]` is on the CPU.
    (Only the CPU is taken: a comprehension's elements spelled as device tensors may be numbers,
    and the container itself is no tensor: `if masks:` tests a list.)"""
    if container is None or container.type != "identifier":
        return False
    binding = _binding(ctx, container)
    built = strip_parens(binding.value) if binding is not None and binding.value is not None else None
    if built is None or built.type not in ("dictionary_comprehension", "list_comprehension"):
        return False
    body = built.child_by_field_name("body")
    element = body.child_by_field_name("value") if body is not None and body.type == "pair" else body
    return device_of(ctx, element, depth + 1) is Device.CPU


# torch functions that return a Python bool, not a tensor (`torch.equal` waits for the device itself)
PYTHON_RESULT_FUNCTIONS = frozenset(
    {
        "torch.equal",
        "torch.allclose",
        "torch.is_same_size",
        "torch.is_tensor",
        "torch.is_floating_point",
        "torch.is_complex",
        "torch.is_grad_enabled",
        "torch.is_autocast_enabled",
        "torch.is_nonzero",
        "torch.is_inference_mode_enabled",
        "torch.is_storage",
        "torch.jit.isinstance",  # (TorchScript's type refinement: `isinstance` for the compiler)
        "torch.jit.is_scripting",
        "torch.jit.is_tracing",
        "torch.compiler.is_compiling",
        "torch.are_deterministic_algorithms_enabled",
    }
)


# What the allocator and the driver say about a device: numbers and names, never a tensor
_DEVICE_QUERY = re.compile(
    r"torch\.(?:cuda|mps|xpu|accelerator)\.(?:\w*memory\w*|mem_get_info|device_count|current_device|"
    r"get_device_\w+|utilization|temperature|power_draw|clock_rate|is_available)$"
)


def _unpacked_part(binding: Binding) -> Optional[Node]:
    """`a, b = x, y.clone()`: the element of a literal tuple or list that the name takes (None when
    what was unpacked is no literal of the same length, or the name is nested deeper)."""
    value = strip_parens(binding.unpacked_from) if binding.unpacked_from is not None else None
    if value is None or value.type not in ("expression_list", "tuple", "list") or len(binding.path) != 1:
        return None
    parts = [c for c in value.named_children if c.type != "comment"]
    if any(p.type in ("list_splat", "parenthesized_list_splat") for p in parts) or binding.path[0] >= len(parts):
        return None
    return parts[binding.path[0]]


def _sibling_moved_later(binding: Binding) -> bool:
    """`batch, gotit = batch` (of a loader), then `dataclass_to_cuda_(batch)` or `batch =
    batch.to(device)` later in the function: the other targets of the same unpacking came from the
    host with the part that the code moves (code does not move what is on the device already)."""
    site = binding.site
    target = next((a for a in ancestors(site) if a.type == "assignment"), None) if site is not None else None
    left = target.child_by_field_name("left") if target is not None else None
    if target is None or left is None or left.type not in ("pattern_list", "tuple_pattern", "list_pattern"):
        return False
    siblings = [c for c in left.named_children if c.type == "identifier" and text(c) != binding.name]
    function = next((a for a in ancestors(target) if a.type == "function_definition"), None)
    if not siblings or function is None:
        return False
    after = (function.text or b"")[target.end_byte - function.start_byte :]
    for sibling in siblings:
        word = re.escape(text(sibling).encode())
        moved = (
            rb"(?<![\w.])"
            + word
            + rb"\s*\.\s*(?:to|cuda)\s*\(|\b\w*(?:to_cuda|to_device|to_gpu)\w*\(\s*"
            + word
            + rb"\b"
        )
        if re.search(moved, after) is not None:
            return True
    return False


def _binding_device(ctx: LintContext, binding: Binding, depth: int) -> Device:
    if _annotated_scalar(binding):
        return Device.HOST
    if binding.loop is not None:
        return _loop_element_device(ctx, binding.loop.child_by_field_name("right"), binding.path, depth + 1)
    if binding.value is None and binding.unpacked_from is not None:
        part = _unpacked_part(binding)
        if part is not None:
            return device_of(ctx, part, depth + 1)  # `z, y = z.to(device), y.to(device)`: its own part
        # `values, idx = torch.topk(scores, k)`: each part on the device of what was unpacked
        whole = device_of(ctx, binding.unpacked_from, depth + 1)
        return whole if whole in (Device.CUDA, Device.CPU) else Device.UNKNOWN
    return device_of(ctx, binding.value, depth + 1)


# Methods that NumPy arrays and tensors share, which keep a host array on the host
_ARRAY_METHODS = frozenset({"flatten", "ravel", "reshape", "squeeze", "astype", "copy", "transpose", "mean", "sum"})


def _call_device(ctx: LintContext, call: Node, depth: int) -> Device:
    name = torch_name(ctx, callee(call))
    method = method_name(call)
    positional, keywords = arguments(call)
    if name in HOST_BUILTINS or name.split(".")[0] in HOST_MODULES or name in PYTHON_RESULT_FUNCTIONS:
        return Device.HOST
    if _DEVICE_QUERY.match(name):
        return Device.HOST  # `torch.cuda.max_memory_allocated(device=device)`: a number about the device
    if name in host_imported_functions(ctx):
        return Device.HOST  # `log_loss(y_true, probas)` of `from sklearn.metrics import log_loss`
    if method is not None and name.split(".")[0] != "torch":
        if (name == "self." + method or method in ("encode", "decode")) and _CODER_METHOD.search(method):
            # `output, hidden = self.decode(indices, hidden)`, `vae.encode(images.cuda())`: a model's
            # encoder or decoder (not str's `decode`) given a device tensor computes a device tensor
            if any(device_of(ctx, a, depth + 1) is Device.CUDA for a in positional):
                return Device.CUDA
        if (
            method == "run"
            and len(positional) == 2
            and positional[1].type == "dictionary"
            and (positional[0].type in ("none", "list"))
        ):
            return Device.HOST  # `session.run(None, {"input": x})`: ONNX Runtime's outputs, NumPy arrays
        if method in HOST_METHODS or _PREDICATE_METHOD.match(method) or _COUNT_METHOD.search(method):
            return Device.HOST  # (`instances.has("pred_masks")`: a bool; `model.kv_read_bytes(n)`: a count)
        if method == "get" and len(positional) == 2 and _literal(positional[1]):
            return Device.HOST  # `meta.get("rtf", -1)`: a dict of numbers, by its default
        if method == "cuda":
            return Device.CUDA
        if method in ("cpu", "pin_memory"):
            return Device.CPU
        if (method in _MODULE_HOST_METHODS or _RUN_METRIC_METHOD.search(method)) and _spelled_model(receiver(call)):
            # `model.transcribe(path)`: text and numbers, though the model is on the GPU;
            # `model.estimate_mfu(tokens, dt)`: a figure about the run
            return Device.HOST
        handed = _gathered(call)
        if handed is not None:
            return device_of(ctx, handed, depth + 1)  # `accelerator.gather(loss)`: where the loss is
        owner = device_of(ctx, receiver(call), depth + 1)
        if method == "to":
            device = keywords.get("device") or (positional[0] if positional and not is_dtype(positional[0]) else None)
            if device is None:
                return owner  # a cast keeps the device
            if is_cpu_device(device) or _cpu_by_default(ctx, device) or names_the_cpu(ctx, device, depth):
                return Device.CPU
            if is_clear_device(device):
                return Device.CUDA
            return Device.UNKNOWN
        if method == "type_as" and positional:
            # `mask.type_as(offsets)`: cast to the other tensor's type, which names its device
            other = device_of(ctx, positional[0], depth + 1)
            return other if other in (Device.CUDA, Device.CPU) else owner
        if method.startswith("new_"):
            return owner if owner in (Device.CUDA, Device.CPU) else Device.UNKNOWN
        if method.startswith("get_"):
            # no tensor method is spelled so but `get_device()` (an int): `meter.get_mean()` of
            # a module moved to the device is its own method and may return anything
            return Device.UNKNOWN
        if owner is Device.CUDA and _spelled_model(receiver(call)) and _given_host_inputs(ctx, call, depth):
            return Device.CPU  # `model.stft(waves.to(cpu))`: a model computes where its input is
        if owner is Device.HOST and method in _ARRAY_METHODS:
            return Device.HOST  # `session.run(None, feed)[0].flatten()`: a NumPy array reshaped
        return owner if owner in (Device.CUDA, Device.CPU) else Device.UNKNOWN
    if name == "torch.from_numpy":
        return Device.CPU
    if name in _SAMPLES_ITS_INPUT and positional and positional[0].type not in ("integer", "float"):
        # `torch.multinomial(weights[b], 1)`, `torch.bernoulli(probs)`, `torch.normal(mean, std)`:
        # draws where the tensor of probabilities or means is (not `torch.normal(0.0, 1.0, size)`)
        drawn = device_of(ctx, positional[0], depth + 1)
        return drawn if drawn in (Device.CUDA, Device.CPU) else Device.UNKNOWN
    if is_factory(call, name):
        made = factory_device(call)
        device = keywords.get("device")
        if made is not Device.CPU and device is not None and names_the_cpu(ctx, device, depth):
            return Device.CPU  # `device = torch.device("cpu")`, then `torch.randn(n, device=device)`
        return made
    if name == "sum" and _summed(call) is not None:
        # `sum(F.mse_loss(q, target) for q in qs)`: a tensor where its terms are
        inner = device_of(ctx, _summed(call), depth + 1)
        return inner if inner in (Device.CUDA, Device.CPU) else Device.UNKNOWN
    if "device" in keywords and not name.startswith(("torch.", "F.")) and names_the_cpu(ctx, keywords["device"], depth):
        return Device.CPU  # `to_tensor(val, device="cpu")`, `load_model(path, device="cpu")`: asked for on the CPU
    if name.startswith("torch.") or name.startswith("F."):
        if "device" in keywords:
            device = keywords["device"]
            if is_cpu_device(device) or names_the_cpu(ctx, device, depth):
                return Device.CPU
            return Device.CUDA if is_clear_device(device) else Device.UNKNOWN
        first = positional[0] if positional else None
        if first is not None and strip_parens(first).type in ("list", "tuple"):
            items = [c for c in strip_parens(first).named_children if c.type != "comment"]
            first = items[0] if items else None
        elif first is not None and strip_parens(first).type in ("list_comprehension", "generator_expression"):
            first = strip_parens(first).child_by_field_name("body")  # `torch.cat([t[i] for i in ...])`
        if first is not None and first.type == "identifier" and name in ("torch.cat", "torch.stack", "torch.concat"):
            appended = _appended_device(ctx, first, depth)
            if appended is not None:
                return appended
        inner = device_of(ctx, first, depth + 1)
        if inner is Device.UNKNOWN and len(positional) > 1 and first is not None:
            # `torch.add(a * n, offsets)`, `torch.maximum(x, y)`: an operand on the GPU puts the
            # result there (not one put on the first's own device, `torch.isclose(err,
            # torch.tensor([0.], device=err.device))`: that says nothing of where `err` is)
            names = set(re.findall(r"[A-Za-z_]\w*", text(first)))
            if any(
                device_of(ctx, other, depth + 1) is Device.CUDA
                and not any(f"{name}.device" in text(other) for name in names)
                for other in positional[1:]
            ):
                return Device.CUDA
        return inner if inner in (Device.CUDA, Device.CPU) else Device.UNKNOWN
    return Device.UNKNOWN


def _literal(node: Node) -> bool:
    """A number, string or bool written as such (`-1` too)."""
    node = strip_parens(node)
    if node.type == "unary_operator":
        node = node.child_by_field_name("argument") or node
    return node.type in ("integer", "float", "string", "true", "false")


def _literal_data(node: Node) -> bool:
    """A literal, or a tuple or list of literals (`(3, 3)`, `("a", 1)`, `()`): no tensor in it."""
    node = strip_parens(node)
    if node.type in ("tuple", "list"):
        return all(_literal_data(c) for c in node.named_children if c.type != "comment")
    return _literal(node) or node.type == "none"


def _annotated_scalar(binding: Binding) -> bool:
    """`best_loss: float = optimizer.best_loss`: the assignment says it is a Python number (or
    a container of them, `_HOST_ANNOTATION`), or an object of a class that is no tensor
    (`aggregator: MetricAggregator = instantiate(cfg).to(device)`, `_names_other_class`)."""
    statement = binding.value.parent if binding.value is not None else None
    kind = statement.child_by_field_name("type") if statement is not None and statement.type == "assignment" else None
    return kind is not None and (_HOST_ANNOTATION.fullmatch(text(kind)) is not None or _names_other_class(text(kind)))


def _names_other_class(annotation: str) -> bool:
    """Does `annotation` name only classes that hold no tensor of their own to read (`MetricAggregator`,
    `MetricAggregator | None`, `Optional[RunLogger]`)? Not one spelled as a tensor, a parameter, an
    array, a batch, a sample, data, an output or a state, nor `Any` or a type variable (`T`), nor a
    dotted name (`nn.Module`, `np.ndarray`: left to what the code shows)."""
    words = re.findall(r"[A-Za-z_][\w.]*", annotation)
    classes = [w for w in words if w not in _TYPING_WORDS and not _HOST_ANNOTATION.fullmatch(w)]
    return bool(classes) and all(_CLASS_NAME.fullmatch(w) and not _HOLDS_TENSORS.search(w) for w in classes)


_CLASS_NAME = re.compile(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)*")
_HOLDS_TENSORS = re.compile(r"Tensor|Parameter|Variable|Any|Array|Batch|Sample|Data|Output|State|Buffer|Dict|Self")


def _compares_with_string(node: Node) -> bool:
    """`x == "name"`, or `e.loss == loss` with a parameter `loss: Optional[str]`: text compared;
    `x != None` (no read: Python compares identities); an operator compared (`node.target == torch.ops.aten.add.Tensor`); or a member of an enum
    (`reduction == ReduceType.max`)."""
    if any(strip_parens(c).type in ("string", "concatenated_string") for c in node.named_children):
        return True
    if [c.type for c in node.children if not c.is_named] in (["=="], ["!="]) and any(
        strip_parens(c).type == "none" for c in node.named_children
    ):
        return True  # `past != None`: a tensor's `__eq__` gives way to Python's identity test, a bool
    if any((dotted_name(strip_parens(c)) or "").startswith("torch.ops.") for c in node.named_children):
        return True  # `node.target == torch.ops.aten.copy_.default`: an FX node's operator, no tensor
    if any(_TOKENIZER_TEXT.search(dotted_name(strip_parens(c)) or "") for c in node.named_children):
        return True  # `ids == tokenizer.eos_token`: the token's text (a tensor compared with it is False)
    operators = [c.type for c in node.children if not c.is_named]
    if operators in (["=="], ["!="], ["is"], ["is", "not"], ["in"], ["not", "in"]) and any(
        _enum_member(strip_parens(c)) for c in node.named_children
    ):
        return True  # `reduction == ReduceType.max`, `reduction in (ReduceType.sum, ReduceType.mean)`
    return operators in (["=="], ["!="]) and any(
        c.type == "identifier" and _annotated_text(c) for c in node.named_children
    )


# A tokenizer's special token as text (`tokenizer.eos_token`, `self.tokenizer.pad_token`; not `*_token_id`)
_TOKENIZER_TEXT = re.compile(r"(?:^|\.)\w*tokenizer\.\w*_token$", re.I)
_ENUM_CLASS = re.compile(r"^_?[A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*)+$")


def _enum_member(node: Node) -> bool:
    """`ReduceType.max`, `Mode.TRAIN`, or a tuple of them: a member of a class spelled in
    CamelCase of two words or more (not `torch.float16`, not `F.relu`, not `Tensor.x`)."""
    if node.type == "tuple":
        members = [c for c in node.named_children if c.type != "comment"]
        return bool(members) and all(_enum_member(strip_parens(c)) for c in members)
    if node.type != "attribute":
        return False
    owner = node.child_by_field_name("object")
    return owner is not None and owner.type == "identifier" and bool(_ENUM_CLASS.match(text(owner)))


def _annotated_text(name: Node) -> bool:
    """Is `name` a parameter annotated as a string (`loss: Optional[str]`, `mode: str`)?"""
    kind = _parameter_annotation(name)
    return kind is not None and _HOST_ANNOTATION.fullmatch(kind) is not None and re.search(r"\bstr\b", kind) is not None


def _summed(call: Node) -> Optional[Node]:
    """What `sum(...)` adds up: a comprehension's element (`sum(f(q) for q in qs)`), else its
    first argument."""
    args = call.child_by_field_name("arguments")
    if args is not None and args.type == "generator_expression":
        node: Optional[Node] = args
    else:
        positional, _ = arguments(call)
        node = strip_parens(positional[0]) if positional else None
    if node is not None and node.type in ("generator_expression", "list_comprehension"):
        return node.child_by_field_name("body")
    return node


def _appended_device(ctx: LintContext, name: Node, depth: int) -> Optional[Device]:
    """`parts = []` ... `parts.append(x)` ... `torch.cat(parts)`: the device of what was appended,
    when every append agrees (None when `parts` is not a list built that way)."""
    binding = _binding(ctx, name)
    if (
        binding is None
        or binding.value is None
        or strip_parens(binding.value).type != "list"
        or strip_parens(binding.value).named_child_count
    ):
        return None
    devices = []
    scope = scope_for(name)
    for owner in ctx.identifiers((text(name),), binding.at, name.start_byte):
        attribute = owner.parent
        call = attribute.parent if attribute is not None else None
        if (
            attribute is None
            or attribute.type != "attribute"
            or call is None
            or call.type != "call"
            or method_name(call) != "append"
            or scope_for(owner) != scope
        ):
            continue
        positional, _ = arguments(call)
        devices.append(device_of(ctx, positional[0], depth + 1) if positional else Device.UNKNOWN)
    return devices[0] if devices and len(set(devices)) == 1 and devices[0] in (Device.CUDA, Device.CPU) else None


# Builtins that give the elements of what they are given
_SAME_ELEMENTS = frozenset({"reversed", "list", "tuple", "sorted", "iter"})
# Module methods that yield (name, value) pairs
_NAMED_PAIRS = frozenset({"named_parameters", "named_buffers", "named_modules", "named_children"})


def _loop_element_device(ctx: LintContext, iterable: Optional[Node], path: tuple[int, ...], depth: int) -> Device:
    if iterable is None or depth > MAX_DEPTH:
        return Device.UNKNOWN
    iterable = strip_parens(iterable)
    if iterable.type == "call":
        name = dotted_name(callee(iterable)) or ""
        positional, _ = arguments(iterable)
        if name in ("range", "trange"):
            return Device.HOST
        if (name.split(".")[-1] == "tqdm" or name in _SAME_ELEMENTS) and positional:
            # `for epoch in tqdm(range(epochs)):` the progress bar yields what it wraps;
            # `for layer in reversed(list(range(n))):` the same elements in another order
            return _loop_element_device(ctx, positional[0], path, depth + 1)
        if name == "enumerate" and positional:
            if path and path[0] == 0:
                return Device.HOST
            if path and path[0] == 1:
                return _loop_element_device(ctx, positional[0], path[1:], depth + 1)
            return Device.UNKNOWN
        if name.split(".")[-1] == "DataLoader":
            return Device.CPU  # a DataLoader yields host tensors (pinned or not)
        if name in ("zip", "product", "itertools.product") and path and path[0] < len(positional):
            return _loop_element_device(ctx, positional[path[0]], path[1:], depth + 1)
        if method_name(iterable) in ("tolist", "keys"):
            return Device.HOST
        if method_name(iterable) in _NAMED_PAIRS and path and path[0] == 0:
            return Device.HOST  # `for name, p in model.named_parameters():` the name
        if method_name(iterable) == "items" and path:
            # `for name, value in outputs.items():` the key is a name, the value as `values()` gives
            if path[0] == 0:
                return Device.HOST
            rows = receiver(iterable)
            return _tensor_rows(ctx, rows, depth) if path[0] == 1 and rows is not None else Device.UNKNOWN
        return _tensor_rows(ctx, iterable, depth)
    if iterable.type == "identifier":
        binding = _binding(ctx, iterable)
        constant = _module_constant(ctx, iterable) if binding is None else None
        if constant is not None:
            # `SIZES = [(1,), (3, 3)]` at module level, `for size in SIZES:` in a test
            return _loop_element_device(ctx, constant, path, depth + 1)
        if binding is None:
            # `def f(data_loader: DataLoader): for batch in data_loader:` host batches
            return Device.CPU if _annotated_data_loader(iterable) else Device.UNKNOWN
        if binding.loop is not None or (binding.value is None and binding.unpacked_from is not None):
            # `for row in rows: for x in row:` the rows' device; `values, idx = scores.topk(k)` ...
            # `for row in idx:` the rows of a part of what was unpacked
            return _tensor_rows(ctx, iterable, depth) if not path else Device.UNKNOWN
        return _loop_element_device(ctx, binding.value, path, depth + 1)
    if iterable.type in ("list", "tuple"):
        elements = [c for c in iterable.named_children if c.type != "comment"]
        if len(path) == 1:
            # `for head_groups, ffn_heads in ((1, 1), (2, 4)):` the same part of each literal row
            literal_rows = [[x for x in strip_parens(c).named_children if x.type != "comment"] for c in elements]
            if not all(strip_parens(c).type in ("tuple", "list") for c in elements) or any(
                path[0] >= len(row) for row in literal_rows
            ):
                return Device.UNKNOWN
            elements = [row[path[0]] for row in literal_rows]
        elif path:
            return Device.UNKNOWN
        items = [Device.HOST if _literal_data(c) else device_of(ctx, c, depth + 1) for c in elements]
        return items[0] if items and len(set(items)) == 1 else Device.UNKNOWN
    if iterable.type == "subscript" and _host_key(ctx, iterable):
        return Device.HOST  # `for flag in batch["drop_image_embeds"]:` a list the collate function built
    if iterable.type in ("subscript", "attribute", "binary_operator", "comparison_operator"):
        return _tensor_rows(ctx, iterable, depth)  # `for row in scores[mask]:` rows of a tensor
    return Device.UNKNOWN


# Factories whose positional arguments are all sizes: a literal 0 among them makes an empty tensor.
_SIZED = frozenset({"randn", "rand", "zeros", "ones", "empty"})


def makes_an_empty_tensor(factory: Node) -> bool:
    """`torch.empty(0)`, `torch.zeros((0, d))`, `torch.zeros(0, dtype=torch.int64)`,
    `torch.tensor([])`: nothing to fill or copy."""
    factory = strip_parens(factory)
    if factory.type != "call":
        return False
    name = dotted_name(callee(factory)) or ""
    if name in ("torch.tensor", "torch.as_tensor"):
        data = arguments(factory)[0]
        return bool(data) and data[0].type in ("list", "tuple") and not data[0].named_children
    parts = name.split(".")
    if parts[0] != "torch" or parts[-1] not in _SIZED:
        return False
    sizes = arguments(factory)[0]
    if len(sizes) == 1 and sizes[0].type in ("tuple", "list"):
        sizes = list(sizes[0].named_children)
    return any(size.type == "integer" and text(size) == "0" for size in sizes)


# Names of modules (not of what they compute: `loss`, `logits`)
_MODULE_OBJECT = re.compile(
    r"(?:^|_)(?:model|net|network|module|transformer|encoder|decoder|backbone|unet|vae|policy|actor|critic)\d*$",
    re.I,
)


def is_module(ctx: LintContext, node: Optional[Node]) -> bool:
    """`model`, `self.policy`, or a name bound to `torch.nn.Linear(...)` / `nn.ModuleDict(...)`
    (maybe moved: `.to(device)`): a module, whose `.cpu()` moves parameters and reads nothing."""
    if node is None:
        return False
    node = strip_parens(node)
    name = dotted_name(node)
    if name is not None and name != "self" and _MODULE_OBJECT.search(name.split(".")[-1]):
        return True
    binding = _binding(ctx, node) if node.type == "identifier" else None
    value = strip_parens(binding.value) if binding is not None and binding.value is not None else None
    while value is not None and value.type == "call" and method_name(value) in ("to", "cuda"):
        inner = receiver(value)  # `nn.Linear(8, 8).to(device)`: the module moved
        value = strip_parens(inner) if inner is not None else None
    if value is None or value.type != "call" or binding is None or binding.augmented:
        return False
    parts = (dotted_name(callee(value)) or "").split(".")
    if len(parts) == 1 and parts[0] in _module_classes(ctx):
        return True  # `cm = LowRank(n, r).to(device)` of `class LowRank(torch.nn.Module):` in this file
    return len(parts) >= 2 and parts[-2] == "nn" and _class_name(parts[-1])


_MODULE_CLASS = re.compile(rb"^class[ \t]+(\w+)[ \t]*\(([^)]*)\)", re.M)


def _module_classes(ctx: LintContext) -> frozenset[str]:
    """The classes this file defines at its top level as subclasses of a torch module
    (`class LowRank(torch.nn.Module):`, `(nn.Module)`, `(L.LightningModule)`)."""
    cached = getattr(ctx, "_module_classes", None)
    if cached is None:
        cached = frozenset(
            m.group(1).decode()
            for m in _MODULE_CLASS.finditer(ctx.source.whole_data)
            if re.search(rb"\b(?:\w+\.)*\w*Module\b", m.group(2))
        )
        ctx._module_classes = cached
    return cached


def names_the_cpu(ctx: LintContext, device: Node, depth: int = 0) -> bool:
    """`"cpu"`, `torch.device("cpu")`, a name the function binds to it (`_bound_to_cpu`), or an
    attribute the class only ever sets to it (`self.device = "cpu"`, `_cpu_attribute`)."""
    device = strip_parens(device)
    if device.type == "attribute" and text(device).startswith("self.") and text(device).count(".") == 1:
        return _cpu_attribute(ctx, device)
    if device.type == "attribute" and text(device.child_by_field_name("attribute")) == "device":
        # `mask.device` of `mask = torch.from_numpy(a)`: where that tensor is, the host
        owner = device.child_by_field_name("object")
        return owner is not None and device_of(ctx, owner, depth + 1) is Device.CPU
    return is_cpu_device(device) or (device.type == "identifier" and _bound_to_cpu(ctx, device))


def _bound_to_cpu(ctx: LintContext, device: Node) -> bool:
    """`work_device = torch.device("cpu")`, in every branch that binds it (a parameter is not)."""
    binding = _binding(ctx, device)
    if binding is None or binding.value is None or binding.augmented or not is_cpu_device(binding.value):
        return False
    others = ctx.bindings(device).branch_alternatives(text(device), device.start_byte, binding)
    return all(b.value is not None and is_cpu_device(b.value) for b in others)


def _cpu_by_default(ctx: LintContext, device: Node) -> bool:
    """`def resample(data, device=torch.device("cpu")): data.to(device)`: a parameter whose default
    is the CPU, which no call of the function in a loop of this file sets otherwise; or a name
    bound to the CPU (`_bound_to_cpu`)."""
    if device.type != "identifier":
        return False
    if _binding(ctx, device) is not None:
        return _bound_to_cpu(ctx, device)
    if is_cpu_device(module_constant(ctx, device)):
        return True  # `cpu = torch.device("cpu")` at the top of the module, then `.to(cpu)`
    function = next((a for a in ancestors(device) if a.type in ("function_definition", "lambda")), None)
    default = parameter_default(function, text(device)) if function is not None else None
    if default is None or not is_cpu_device(default):
        return False
    return all(is_cpu_device(a) for a in _call_site_arguments(ctx, device))


_CPU_VALUE = re.compile(rb"""^(?:[rRbBuU]?["']cpu["']|torch\.device\(\s*["']cpu["']\s*\))\s*(?:#.*)?$""")


def _cpu_attribute(ctx: LintContext, node: Node) -> bool:
    """Does every assignment of `self.<attr>` in a `unittest.TestCase` give it the CPU
    (`self.device = "cpu"` in `setUp`)? (Only a test case: a library class may set the attribute
    to the CPU only on its fallback path, the real device coming from a base class.)"""
    holder = next((a for a in ancestors(node) if a.type == "class_definition"), None)
    if holder is None or not is_test_case(holder):
        return False
    attr = text(node)[len("self.") :]
    setting = rb"self\." + re.escape(attr.encode()) + rb"[ \t]*=(?!=)[ \t]*([^\n]*)"
    values = [m.group(1).strip() for m in re.finditer(setting, class_text(ctx, holder))]
    return bool(values) and all(_CPU_VALUE.match(v) for v in values)


def parameter_default(function: Node, name: str) -> Optional[Node]:
    """The default value of `function`'s parameter `name` (`device=None`), None when it has none."""
    parameters = function.child_by_field_name("parameters")
    for parameter in parameters.named_children if parameters is not None else []:
        named = parameter.child_by_field_name("name")
        if parameter.type in ("default_parameter", "typed_default_parameter") and named is not None:
            if text(named) == name:
                return parameter.child_by_field_name("value")
    return None


def _parameter_annotation(name: Node) -> Optional[str]:
    """The annotation of the parameter `name` of its function, when it has one."""
    function = next((a for a in ancestors(name) if a.type in ("function_definition", "lambda")), None)
    parameters = function.child_by_field_name("parameters") if function is not None else None
    for parameter in parameters.named_children if parameters is not None else []:
        if parameter.type in ("typed_parameter", "typed_default_parameter"):
            first = parameter.named_children[0] if parameter.named_children else None
            kind = parameter.child_by_field_name("type")
            if first is not None and text(first) == text(name) and kind is not None:
                return text(kind)
    return None


def _annotated_data_loader(name: Node) -> bool:
    """Is `name` a parameter of its function annotated as a `DataLoader`?"""
    kind = _parameter_annotation(name)
    return kind is not None and kind.split(".")[-1] == "DataLoader"


# An annotation made only of Python's own scalars and containers: `float`, `dict[int, float]`,
# `Optional[list[str]]`, `Sequence[float] | None`.
_HOST_ANNOTATION = re.compile(
    r"(?:\s|[\[\],|.]|float|int|str|bool|bytes|None|dict|list|tuple|set|Dict|List|Tuple|Set|Sequence|Mapping|"
    r"Iterable|Optional|Union|typing)+"
)


def _returns_python_value(ctx: LintContext, call: Node) -> bool:
    """Does `call` return a Python number, not a tensor: a function of this file annotated so
    (`-> int`), or a method that returns sums of host reads (`_returns_numbers`)?"""
    name = dotted_name(callee(call)) or ""
    return (
        _returns_python_scalar(ctx, name)
        or name in host_imported_functions(ctx)
        or _returns_numbers(ctx, call)
        or _nested_function_returns_host(ctx, call)
    )


def _nested_function_returns_host(ctx: LintContext, call: Node) -> bool:
    """Is `call` of a function defined in the same function, every `return` of which gives a host
    value (`def _step(): ...; return np.round(loss.item(), 10)`, then `loss_out = _step()`)? Its
    text is in the definition being linted, so nothing outside it is read."""
    function = callee(call)
    if function is None or function.type != "identifier":
        return False
    scope = next((a for a in ancestors(call) if a.type == "function_definition"), None)
    body = scope.child_by_field_name("body") if scope is not None else None
    name = text(function)
    for statement in body.named_children if body is not None else []:
        inner = statement.child_by_field_name("definition") if statement.type == "decorated_definition" else statement
        if inner is None or inner.type != "function_definition" or text(inner.child_by_field_name("name")) != name:
            continue
        returned = [r.named_children[0] for r in _returns_of(inner) if r.named_children]
        # (followed a few bindings deep only: a helper that returns its own call, or one calling
        # this function, would otherwise come back here until the depth runs out)
        return bool(returned) and all(device_of(ctx, r, MAX_DEPTH - 3) is Device.HOST for r in returned)
    return False


def _returns_of(function: Node) -> Iterator[Node]:
    """The `return` statements of `function` itself (not of functions or lambdas inside it)."""
    stack = list(function.named_children)
    while stack:
        node = stack.pop()
        if node.type == "return_statement":
            yield node
        elif node.type not in ("function_definition", "lambda", "class_definition"):
            stack.extend(node.named_children)


# `return [float(c.sum().cpu()) for k in topk]`, `return acc.item()`, `return 0.0`: a host value
_HOST_RETURN = re.compile(
    rb"[ \t]*\[?[ \t]*(?:(?:float|int|bool|round)\(|-?\d)|[^\n]*\.(?:item|tolist)\(\)[ \t]*(?:#[^\n]*)?$"
)
_LOSS_FUNCTION_DEF = re.compile(
    rb"def[ \t]+(\w*(?:loss|entropy|nll|criterion|divergence|mse|bce|accuracy)\w*)[ \t]*\(", re.I
)


def host_loss_functions(ctx: LintContext) -> frozenset[str]:
    """The functions of this file spelled as a loss or a metric (`def accuracy(...)`) whose every
    `return` gives a host value (`return [float(correct[:k].sum().cpu()) for k in topk]`, `return
    acc.item()`): their calls are no device tensors. A module-wide fact (lint/facts.py): read off
    the whole file's bytes, so the answer does not depend on which definitions were parsed, and an
    edit that changes it lints the callers again."""
    cached = getattr(ctx, "_host_loss_functions", None)
    if cached is None:
        data = ctx.source.whole_data
        found = set()
        for name in dict.fromkeys(m.group(1).decode() for m in _LOSS_FUNCTION_DEF.finditer(data)):
            body = definition_text(data, name)
            returns = [m.end() for m in re.finditer(rb"^[ \t]*return\b", body or b"", re.M)]
            if returns and all(_HOST_RETURN.match(body or b"", at) for at in returns):
                found.add(name)
        cached = ctx._host_loss_functions = frozenset(found)
    return cached


# The default generators seeded for reproducible numbers (`torch.manual_seed(42)`, Lightning's
# `seed_everything`, transformers' `set_seed`); not a generator of its own (`torch.Generator().manual_seed(0)`,
# `g.manual_seed(0)`), which draws only where it is handed
_SEEDING = re.compile(
    rb"\btorch[ \t]*\.[ \t]*(?:cuda[ \t]*\.[ \t]*)?manual_seed(?:_all)?[ \t]*\("
    # (a project's own helper, maybe from another module: nanotron's `set_random_seed(42)`,
    # yolov5's `init_seeds(...)`, `utils.fix_seed(...)`; not `np.random.seed`, which leaves torch's be)
    rb"|(?<![\w.])(?:[A-Za-z_]\w*\.)*(?:manual_seed|seed_everything|set_seed|set_random_seed|set_seeds|seed_all"
    rb"|fix_seeds?|setup_seed|init_seeds?|seed_torch)[ \t]*\("
)
_TOP_LEVEL_DEF = re.compile(rb"(?:async[ \t]+)?def[ \t]+(\w+)")


def seeding_calls(data: bytes, start: int = 0, end: Optional[int] = None) -> list[int]:
    """Where `data[start:end]` seeds the default generators (`_SEEDING`), looked for only on the
    lines that say `seed`: a substring search finds those, where the pattern, which starts with
    no fixed word, would be tried at every byte."""
    stop = len(data) if end is None else end
    found = []
    at = data.find(b"seed", start, stop)
    while at != -1:
        line_end = data.find(b"\n", at, stop)
        line_end = stop if line_end == -1 else line_end
        match = _SEEDING.search(data, max(data.rfind(b"\n", start, at) + 1, start), line_end)
        if match is not None:
            found.append(match.start())
        at = data.find(b"seed", line_end, stop)
    return found


def seeding_functions(ctx: LintContext) -> frozenset[str]:
    """The module-level functions of this file that seed the default generators (`def
    _init_env(rank): torch.manual_seed(rank)`): a draw after a call of one is seeded. A
    module-wide fact (lint/facts.py): an edit that changes it lints the callers again."""
    cached = getattr(ctx, "_seeding_functions", None)
    if cached is None:
        data = ctx.source.whole_data
        found = set()
        seeds = seeding_calls(data)
        # from each seeding call back to the top-level `def` above it (a few calls in a file, not
        # a search per definition: module facts are computed on every edit in the editor)
        for at in seeds:
            start = max(data.rfind(b"\ndef ", 0, at), data.rfind(b"\nasync def ", 0, at)) + 1
            head = _TOP_LEVEL_DEF.match(data, start)
            if head is not None and at < start + len(indented_block(data, start)):
                found.add(head.group(1).decode())
        cached = ctx._seeding_functions = frozenset(found)
    return cached


def _returns_python_scalar(ctx: LintContext, name: str) -> bool:
    """Is `name` (`helper`, `self.helper`, `decoder.pull`) a function or method of this file
    annotated to return a Python number, string or bool (`def _clamp_block_m(...) -> int:`,
    `-> Optional[int]`, `-> Union[int, float]`)? Read off the whole file's bytes, so the answer
    does not depend on which definitions were parsed."""
    parts = name.split(".")
    if not parts[-1] or len(parts) > 2:
        return False
    memo = _memo(ctx, "_scalar_function_memo")
    if parts[-1] not in memo:
        signature = rb"def\s+" + re.escape(parts[-1].encode()) + rb"\s*\((?:[^()]|\([^()]*\))*\)\s*->\s*([^:\n]+?)\s*:"
        found = re.search(signature, ctx.source.whole_data)
        words = set(re.findall(r"[A-Za-z_]+", found.group(1).decode(errors="replace"))) if found else set()
        # `-> int`, `-> Optional[int]`, `-> tp.Union[int, float]`, `-> int | None`
        memo[parts[-1]] = bool(words & _SCALAR_TYPES) and words <= _SCALAR_TYPES | _TYPING_WORDS
    return bool(memo[parts[-1]])


_SCALAR_TYPES = frozenset({"int", "float", "bool", "str"})
_TYPING_WORDS = frozenset({"None", "Optional", "Union", "typing", "tp", "t"})


def _annotated_numbers(name: Node) -> bool:
    """`_annotated_host_values` naming a number or string type (`step: int`, `ids: list[int]`; not
    a bare `dict`, whose values may be tensors)."""
    kind = _parameter_annotation(name)
    return kind is not None and _numbers_annotation(kind)


def _numbers_annotation(kind: str) -> bool:
    """An annotation of Python numbers or strings, or containers of them (not a bare `dict`)."""
    return _HOST_ANNOTATION.fullmatch(kind) is not None and re.search(r"\b(?:int|float|bool|str)\b", kind) is not None


def _annotated_host_values(name: Node) -> bool:
    """Is `name` a parameter annotated as Python numbers, strings or containers of them?"""
    kind = _parameter_annotation(name)
    return kind is not None and _HOST_ANNOTATION.fullmatch(kind) is not None


def _tensor_rows(ctx: LintContext, iterable: Node, depth: int) -> Device:
    """Iterating a tensor gives its rows, on the tensor's device."""
    device = device_of(ctx, iterable, depth + 1)
    return device if device in (Device.CUDA, Device.CPU) else Device.UNKNOWN


def module_mentions_device(ctx: LintContext) -> bool:
    """Does the file speak of a device at all (`cuda`, `device`)? Without it, a model output of
    unknown device is not assumed to be on a GPU (CPU-only tests, data pipelines)."""
    cached = getattr(ctx, "_mentions_device", None)
    if cached is None:
        cached = bool(_MENTIONS_DEVICE.search(ctx.source.whole_data))
        ctx._mentions_device = cached
    return cached


# `torch.is_tensor(x)`, `isinstance(x, torch.Tensor)`: a test that `x` is a tensor
_IS_TENSOR_TEST = re.compile(r"^(?:torch\.is_tensor\((.+)\)|isinstance\((.+),\s*(?:torch\.)?Tensor\))$")


def tested_not_a_tensor(node: Node) -> bool:
    """Is `node` (or what it reads) on the path where a test said it is no tensor: the `else` of
    `if torch.is_tensor(state["lr"]):`, the body of `if not isinstance(x, torch.Tensor):`?"""
    child = node
    for parent in ancestors(node):
        if parent.type in SCOPE_TYPES:
            return False
        condition = parent.child_by_field_name("condition") if parent.type == "if_statement" else None
        if condition is not None and b"ensor" in (condition.text or b""):  # (`is_tensor(`, `Tensor)`)
            words = " ".join(text(condition).split())
            negated = words.startswith("not ")
            test = _IS_TENSOR_TEST.match(words[4:] if negated else words)
            tested = next((g for g in test.groups() if g), None) if test is not None else None
            on_no_path = (child.type == "else_clause" and not negated) or (
                negated and child == parent.child_by_field_name("consequence")
            )
            if tested is not None and on_no_path and tested.strip() in text(node):
                return True
        child = parent
    return False


def likely_device(ctx: LintContext, node: Optional[Node]) -> bool:
    """Is `node` a CUDA tensor, proven or as a model output / loss in code about a device, or in
    the loop of a training step (one that calls `backward(` or an optimizer's `step(`: a library's
    training loop gets its device from the caller and need not name one)?"""
    device = device_of(ctx, node)
    if device is not Device.CUDA and device is not Device.UNKNOWN:
        return False
    if node is not None and tested_not_a_tensor(node):
        return False
    start = host_path_start(ctx, node) if node is not None else None
    if start is not None and not (device is Device.CUDA and node is not None and _moved_there(ctx, node, start)):
        return False
    if device is Device.CUDA:
        return True
    if not module_mentions_device(ctx) and (
        node is None
        or not (_in_training_step(ctx, node) or _in_training_class(ctx, node))
        or _builds_its_inputs(ctx, node)
    ):
        return False
    if cpu_only_file(ctx):
        return False
    if node is not None and in_collate_function(node):
        return False
    if node is not None and (moved_to_device_later(ctx, node) or converted_with_numpy(node)):
        return False
    return _model_output(ctx, node, 0)


def _builds_its_inputs(ctx: LintContext, node: Node) -> bool:
    """In a file that names no device: is `node` in a function that builds its own inputs, a
    `DataLoader` or tensors from host data (`torch.Tensor(path["observations"])`,
    `torch.from_numpy(x)`)? They reach the model on the CPU, so the model and the loss are there
    too (pyod's `fit(X)`: `DataLoader(TensorDataset(...))`, then the training loop; garage's
    policy step). Not where a framework moves the batches (`accelerator.prepare(loader)`,
    Fabric's `setup_dataloaders`). Module-level code builds its inputs by definition (pytorch/examples'
    regression script)."""
    if framework_moves_batches(ctx):
        return False
    function = next((a for a in ancestors(node) if a.type == "function_definition"), None)
    if function is None:
        return True  # a script's own top-level loop: nothing hands it a tensor, and it names no device
    return _HOST_INPUTS.search(function.text or b"") is not None


# Inputs made on the host: a loader, or tensors of host data (not `torch.tensor(0.)`, a scalar
# that any device's tensor may be added to)
_HOST_INPUTS = re.compile(rb"\bDataLoader\(|\btorch\.(?:from_numpy|Tensor|FloatTensor|LongTensor|DoubleTensor)\(")


def cpu_only_file(ctx: LintContext) -> bool:
    """Does the file choose the CPU as its device (`device = "cpu"`, `device = torch.device("cpu")`
    as a statement of its own) and never speak of CUDA? Then its tensors are all on the host,
    whatever a loop does with them (norse's correlation experiment and its test). A module-wide
    fact (lint/facts.py)."""
    cached = getattr(ctx, "_cpu_only_file", None)
    if cached is None:
        data = ctx.source.whole_data
        cached = (
            (b'"cpu"' in data or b"'cpu'" in data)  # (most files choose no device: a fast test first)
            and _CUDA_WORD.search(data) is None
            and _CPU_CHOSEN.search(data) is not None
        )
        ctx._cpu_only_file = cached
    return cached


# (at the top level of the module or of a top-level function: not a fallback in an `else`)
_CPU_CHOSEN = re.compile(
    rb"^(?:    )?\w*device[ \t]*=[ \t]*(?:torch\.device\()?[\"']cpu[\"']\)?[ \t]*(?:#[^\n]*)?$", re.M
)
_CUDA_WORD = re.compile(rb"cuda|gpu", re.I)


def framework_moves_batches(ctx: LintContext) -> bool:
    """Does the file hand its loaders to a framework that puts the batches on the device without
    the file naming one (`accelerator.prepare(loader)`, Fabric's `setup_dataloaders`)? A
    module-wide fact (lint/facts.py)."""
    cached = getattr(ctx, "_framework_moves_batches", None)
    if cached is None:
        cached = ctx._framework_moves_batches = _MOVES_BATCHES.search(ctx.source.whole_data) is not None
    return cached


_MOVES_BATCHES = re.compile(rb"\bprepare\(|setup_dataloaders\(|\baccelerator\b|\bfabric\b", re.I)


_CUDA_BRANCH_TEST = re.compile(r"\bis_cuda\b|device\.type\b.*(?:cuda|npu|xpu)|cuda\.is_available\(\)")


def on_host_branch(node: Node) -> bool:
    """Is `node` in the branch taken when there is no GPU: the `else` of
    `if x.device.type in ["cuda", "npu"]:` / `if x.is_cuda:` / `if torch.cuda.is_available():`,
    or the body of `if device_type == "cpu":`?"""
    for parent in ancestors(node):
        if parent.type in ("if_statement", "elif_clause"):
            condition = parent.child_by_field_name("condition")
            consequence = parent.child_by_field_name("consequence")
            if (
                condition is not None
                and consequence is not None
                and consequence.start_byte <= node.start_byte < consequence.end_byte
                and _CPU_DEVICE_TEST.match(condition.text or b"")
            ):
                return True  # `elif device_type == "cpu":` of a benchmark that times each backend
        if parent.type == "else_clause" and parent.parent is not None and parent.parent.type == "if_statement":
            condition = parent.parent.child_by_field_name("condition")
            if (
                condition is not None
                and _CUDA_BRANCH_TEST.search(text(condition))
                and not text(condition).lstrip().startswith("not ")
            ):
                return True
        if parent.type in ("function_definition", "lambda", "class_definition"):
            return False
    return False


# A test that a tensor (or the machine) is on CUDA: `x.is_cuda`, `x.device.type == "cuda"`,
# `torch.cuda.is_available()`; and its opposites
_CUDA_TEST = re.compile(
    rb"^(?:[\w.]+\.is_cuda|[\w.]*device\.type\s*==\s*['\"]cuda['\"]|(?:torch\.)?cuda\.is_available\(\))$"
)
_HOST_TEST = re.compile(
    rb"^(?:not\s+[\w.]+\.is_cuda|[\w.]+\.is_cpu|[\w.]*device\.type\s*(?:==\s*['\"]cpu|!=\s*['\"]cuda)['\"]"
    rb"|not\s+(?:torch\.)?cuda\.is_available\(\))$"
)
# The body of `if device_type == "cpu":` (or `device == "cpu"`): the run's device is the CPU. (Not
# `x.device.type == "cpu"`, which tests one tensor: the branch may move it, `v.cuda()`.)
_CPU_DEVICE_TEST = re.compile(rb"^(?:self\.)?(?:device_type|device)\s*==\s*['\"]cpu['\"]$")
_SPEAKS_OF_CUDA = re.compile(rb"is_cuda|is_cpu|device\.type|is_available\(")


def _device_test(ctx: LintContext, condition: Node) -> Optional[str]:
    """`"cuda"` for a test that the tensors are on CUDA (`x.is_cuda`), `"host"` for its opposite
    (`not x.is_cuda`, `x.device.type == "cpu"`), through a name bound to such a test (`is_cuda
    = tree_device.type == "cuda"`, then `if not is_cuda:`); None for any other condition."""
    spelled = condition.text or b""
    if _CUDA_TEST.match(spelled):
        return "cuda"
    if _HOST_TEST.match(spelled):
        return "host"
    node = strip_parens(condition)
    negated = node.type == "not_operator"
    name = strip_parens(node.child_by_field_name("argument") or node) if negated else node
    if name.type != "identifier":
        return None
    binding = _binding(ctx, name)
    value = strip_parens(binding.value) if binding is not None and binding.value is not None else None
    if value is None or binding is None or binding.loop is not None or binding.augmented:
        return None
    if _CUDA_TEST.match(value.text or b""):
        return "host" if negated else "cuda"
    if _HOST_TEST.match(value.text or b""):
        return "cuda" if negated else "host"
    return None


def _named_root(node: Node) -> Node:
    """The name a value is read from through subscripts and attributes (`labels` of
    `labels[i].data`); the expression itself when it is no such chain."""
    root = strip_parens(node)
    while root.type in ("subscript", "attribute"):
        inner = root.child_by_field_name("value" if root.type == "subscript" else "object")
        if inner is None:
            return root
        root = strip_parens(inner)
    return root


def _moved_there(ctx: LintContext, node: Node, start: int) -> bool:
    """`v_on_cuda = v.cuda()` inside `if v.device.type == "cpu":`: the value read is bound to a
    device tensor on the host path itself (its name's binding is a `.cuda()` / `.to(...)` there)."""
    root = _named_root(node)
    binding = _binding(ctx, root) if root.type == "identifier" else None
    value = strip_parens(binding.value) if binding is not None and binding.value is not None else None
    if value is None or binding is None or binding.site is None or binding.site.start_byte < start:
        return False
    return value.type == "call" and method_name(value) in ("cuda", "to")


def host_path_start(ctx: LintContext, node: Node) -> Optional[int]:
    """Where the code that holds `node` starts to run only when its tensors are not on CUDA: the
    `elif`/`else` of `if x.is_cuda:` (or the body of `if not x.is_cuda:`, `if x.device.type ==
    "cpu":`), or what follows an `if x.is_cuda: ... return` of its function (a fast path for CUDA,
    a reference for the rest); None when it is not so. Asked by `likely_device` and again by
    `maybe_device`: remembered per node."""
    memo = _memo(ctx, "_host_path_memo")
    if node.id not in memo:
        memo[node.id] = _host_path_start(ctx, node)
    return memo[node.id]


def _host_path_start(ctx: LintContext, node: Node) -> Optional[int]:
    function = next((a for a in ancestors(node) if a.type in ("function_definition", "lambda", "module")), None)
    if function is None or function.type != "function_definition":
        return None
    memo = _memo(ctx, "_speaks_of_cuda")
    if function.id not in memo:
        memo[function.id] = _SPEAKS_OF_CUDA.search(function.text or b"") is not None
    if not memo[function.id]:
        return None
    child = node
    for parent in ancestors(node):
        if parent == function:
            return None
        if parent.type in ("elif_clause", "else_clause") and parent.parent is not None:
            tests = [parent.parent.child_by_field_name("condition")]
            tests += [
                c.child_by_field_name("condition") for c in parent.parent.named_children if c.type == "elif_clause"
            ]
            earlier = [t for t in tests if t is not None and t.start_byte < parent.start_byte]
            if any(_device_test(ctx, t) == "cuda" for t in earlier):
                return parent.start_byte
        if parent.type == "if_statement" and child == parent.child_by_field_name("consequence"):
            condition = parent.child_by_field_name("condition")
            if condition is not None and _device_test(ctx, condition) == "host":
                return child.start_byte
        if parent.type == "block":
            before = child.prev_named_sibling
            while before is not None:
                if before.type == "if_statement" and _exits_on_cuda(before):
                    return before.end_byte
                before = before.prev_named_sibling
        child = parent
    return None


def _exits_on_cuda(statement: Node) -> bool:
    """`if x.is_cuda: ... return ...` (no `else`): the code after it runs off CUDA only."""
    condition = statement.child_by_field_name("condition")
    body = statement.child_by_field_name("consequence")
    if condition is None or body is None or not _CUDA_TEST.match(condition.text or b""):
        return False
    if any(c.type in ("elif_clause", "else_clause") for c in statement.named_children):
        return False
    last = body.named_children[-1] if body.named_child_count else None
    return last is not None and last.type in ("return_statement", "raise_statement")


def converted_with_numpy(node: Node) -> bool:
    """`torch.where(score > th)[0].detach().numpy()`: the result is handed to `.numpy()` with no
    `.cpu()` on the way, which raises for a CUDA tensor, so the code knows it is on the host."""
    current = node
    while current.parent is not None:
        parent = current.parent
        if parent.type == "subscript" and parent.child_by_field_name("value") == current:
            current = parent
            continue
        if _numpy_argument(current):
            return True  # `np.vstack((edge.nonzero()[0], edge.nonzero()[1]))`: numpy refuses a CUDA tensor
        call = parent.parent if parent.type == "attribute" else None
        if call is None or call.type != "call" or parent.child_by_field_name("object") != current:
            return False
        method = method_name(call)
        if method == "numpy":
            return True
        if method not in ("detach", "squeeze", "unsqueeze", "flatten", "view", "reshape", "clone", "contiguous"):
            return False
        current = call
    return False


def _numpy_argument(node: Node) -> bool:
    """Is `node` an argument of a NumPy function, maybe inside a tuple or list display
    (`np.vstack((a, b))`, `np.isin(x, ids)`)?"""
    current = node
    while current.parent is not None and current.parent.type in ("tuple", "list"):
        current = current.parent
    arguments_ = current.parent
    call = arguments_.parent if arguments_ is not None and arguments_.type == "argument_list" else None
    name = (dotted_name(callee(call)) or "") if call is not None and call.type == "call" else ""
    return name.split(".")[0] in ("np", "numpy")


def moved_to_device_later(ctx: LintContext, node: Node, _loops: frozenset[int] = frozenset()) -> bool:
    """`labels[labels == pad] = -100` ... `labels = labels.to(device)`, or `targets =
    labels.to(device)` before or after the read: the value read (through subscripts and attributes
    of a name) is moved to the device somewhere in its function under the same binding, so it is
    on the host where it is read: code does not move what is on the device already; so is a part
    unpacked beside a part moved later (`batch, gotit = batch`, then `to_cuda_(batch)`). (A value
    proven on the device stays so: this is asked only of values of unknown device.)"""
    root = strip_parens(node)
    if root.type in ("comparison_operator", "binary_operator"):
        # `labels[i][j] != pad_id`, `labels[i] == eos_id`: a comparison of the value
        return any(moved_to_device_later(ctx, c, _loops) for c in root.named_children)
    root = _named_root(root)
    if root.type != "identifier":
        return False
    name = text(root)
    if name == "self":
        return False
    scope = scope_for(root)
    binding = _binding(ctx, root)
    if _moved_in_scope(ctx, name, binding, scope):
        return True
    if binding is not None and binding.unpacked_from is not None and _sibling_moved_later(binding):
        return True  # `batch, gotit = batch`, then `to_cuda_(batch)`: the parts of a loader's host batch
    if binding is not None and binding.loop is not None and _loop_sibling_moved(ctx, binding, name, scope):
        return True  # `for i, (media_type, (image, idx)) in enumerate(loader):`, then `image.to(device)`
    if binding is not None and binding.loop is not None:
        # `[... if label == 0 else ... for label in labels]` ... `labels.to(device)`: an element of it
        # (`[str(x) for x in x.shape]` names its own loop variable in its iterable: each loop is
        # followed once)
        iterable = _element_source(binding)
        if binding.loop.id in _loops:
            return False
        if iterable is not None and iterable.type in ("identifier", "subscript", "attribute"):
            return moved_to_device_later(ctx, iterable, _loops | {binding.loop.id})
    return False


def _element_source(binding: Binding) -> Optional[Node]:
    """What a loop variable is an element of: the iterable itself (`for label in labels`), or,
    by the variable's place in the target, the argument of `zip(...)` (`for r_id, cam in
    zip(ref_ids, gradcam)`: `ref_ids`) or what `enumerate(...)` walks (`for i, (x, y) in
    enumerate(zip(xs, ys))`: `xs` for `x`); None where the place names no argument."""
    assert binding.loop is not None
    iterable = binding.loop.child_by_field_name("right")
    path = binding.path
    while iterable is not None and iterable.type == "call" and path:
        callee, arguments = iterable.child_by_field_name("function"), iterable.child_by_field_name("arguments")
        if callee is None or arguments is None or text(callee) not in ("zip", "enumerate"):
            return iterable
        positional = [a for a in arguments.named_children if a.type not in ("keyword_argument", "comment")]
        if text(callee) == "enumerate":
            if path[0] != 1 or not positional:
                return None  # the counter
            iterable, path = positional[0], path[1:]
        else:
            if path[0] >= len(positional):
                return None
            iterable, path = positional[path[0]], path[1:]
    return iterable


def _loop_sibling_moved(ctx: LintContext, binding: Binding, name: str, scope: Node) -> bool:
    """Is another part of the batch that a `for` loop unpacks (`for i, (media_type, (image, idx))
    in enumerate(loader):`) moved to the device in the loop? Then the loader's batch is on the
    host, and so is this part, which the code leaves there."""
    loop = binding.loop
    target = loop.child_by_field_name("left") if loop is not None and loop.type == "for_statement" else None
    if target is None or target.type not in ("pattern_list", "tuple_pattern", "list_pattern"):
        return False
    siblings = [n for n in _identifiers_within(target) if text(n) != name]
    for sibling in siblings:
        other = _binding(ctx, sibling)
        if other is not None and other.loop == loop and _moved_in_scope(ctx, text(sibling), other, scope):
            return True
    return False


def _identifiers_within(node: Node) -> list[Node]:
    if node.type == "identifier":
        return [node]
    return [n for child in node.named_children for n in _identifiers_within(child)]


def _moved_in_scope(ctx: LintContext, name: str, binding: Optional[Binding], scope: Node) -> bool:
    memo = _memo(ctx, "_moved_memo")
    key = (scope.id, name, binding.site.id if binding is not None and binding.site is not None else None)
    if key not in memo:
        memo[key] = _moves_name(ctx, name, binding, scope)
    return bool(memo[key])


def _moves_name(ctx: LintContext, name: str, binding: Optional[Binding], scope: Node) -> bool:
    moves = _memo(ctx, "_scope_moves_memo")
    if scope.id not in moves:
        moves[scope.id] = ctx.calls_named(("to", "cuda"), scope.start_byte, scope.end_byte)
    # `for dats in loader: ... dats[0].to(device)`: an element of a loop's batch moved, the batch
    # itself left where the loader made it, on the host (not a model's output: `result["out"].to(
    # device)` may move what is there already)
    elements = binding is not None and binding.loop is not None
    for call in moves[scope.id]:
        owner = receiver(call)
        while elements and owner is not None and owner.type == "subscript":
            owner = owner.child_by_field_name("value")
        if owner is None or owner.type != "identifier" or text(owner) != name:
            continue
        if scope_for(call) != scope or _binding(ctx, owner) != binding:
            continue
        if method_name(call) == "cuda":
            return True
        positional, keywords = arguments(call)
        device = keywords.get("device") or (positional[0] if positional and not is_dtype(positional[0]) else None)
        if device is not None and is_clear_device(device) and not is_cpu_device(device):
            return True
    return False


_COLLATE = re.compile(r"collat", re.I)


def in_collate_function(node: Node) -> bool:
    """Is `node` in a collate function (`collate_fn`, `def collate(batch)`, a method of a class
    spelled `MultiModalCollator`)? A DataLoader runs it in its workers on the host tensors of the
    samples: only proof of a GPU tensor counts there."""
    for parent in ancestors(node):
        if parent.type in ("function_definition", "class_definition"):
            name = parent.child_by_field_name("name")
            if name is not None and _COLLATE.search(text(name)):
                return True
    return False


_NUMBER = rb"-?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
# What keeps a Python number a number when added to it: a host read, a count, another number.
# (a read may be scaled by names or numbers: `loss.item() / n`, `float(loss) * scale`)
_NUMBER_UPDATE = re.compile(
    rb"^(?:(?:.*\.item\(\)|(?:float|int)\([^()\n]*\))(?:[ \t]*(?://|[-+*/%])[ \t]*[\w.]+)*[ \t]*"
    rb"|len\(.*\)[ \t]*|[\w.]+\.(?:numel\(\)|size\(\d*\)|shape\[\d+\])[ \t]*|" + _NUMBER + rb"[ \t]*)(?:#.*)?$"
)


def _returns_numbers(ctx: LintContext, call: Node) -> bool:
    """Is `call` `self.NAME(...)` of a method of this class, or `NAME(...)` of a function of this
    file, that returns only names it starts as a number and updates only with host reads
    (`epoch_loss = 0`, `epoch_loss += loss.item()`, `epoch_loss /= len(loader)`, `return
    epoch_loss`), or a NumPy or Python number (`return np.mean(losses)`): a float, not the step's
    loss tensor? Read from the class's or the file's whole text, so the answer does not depend
    on which definitions are parsed."""
    name = dotted_name(callee(call)) or ""
    memo = _memo(ctx, "_returns_numbers_memo")
    if name.isidentifier():
        if name not in memo:
            memo[name] = _method_returns_numbers(ctx.source.whole_data, name)
        return bool(memo[name])
    holder = next((a for a in ancestors(call) if a.type == "class_definition"), None)
    if not name.startswith("self.") or name.count(".") != 1 or holder is None:
        return False
    key = (holder.id, name)
    if key not in memo:
        memo[key] = _method_returns_numbers(class_text(ctx, holder), name[len("self.") :])
    return bool(memo[key])


def _method_returns_numbers(data: bytes, name: str) -> bool:
    text_ = definition_text(data, name)
    if text_ is None:
        return False
    returns = [_bracketed(text_, m.end()) for m in re.finditer(rb"^[ \t]*return\b", text_, re.M)]
    if not returns:
        return False
    for returned in returns:
        returned = returned.split(b"#")[0].strip()
        if _host_number_call(returned):
            continue  # `return np.mean(losses)`
        # (`return losses / len(list(loader))`: a number of the function's divided by a count)
        returned = _NUMBER_OVER_COUNT.sub(rb"\1", returned)
        parts = [p.strip() for p in returned.strip(b"()[]").split(b",") if p.strip()]
        if not parts:
            return False
        if not all(re.fullmatch(rb"[A-Za-z_]\w*", part) and _binds_numbers(text_, part, 1) for part in parts):
            return False
    return True


_NUMBER_OVER_COUNT = re.compile(rb"^([A-Za-z_]\w*)[ \t]*(?:/|//|\*)[ \t]*(?:len\(.*\)|\d+(?:\.\d*)?|[\w.]+)$")
# The callee of a call that gives a NumPy or Python number: `np.mean`, `float`, `statistics.mean`
_HOST_NUMBER_CALLEE = re.compile(rb"(?:np|numpy|math|statistics)\.\w+\(|(?:float|int|round)\(")


def _host_number_call(expression: bytes) -> bool:
    """Is `expression` one such call, whole (`np.mean(losses)`; not `float(a) + t`)?"""
    start = _HOST_NUMBER_CALLEE.match(expression)
    if start is None:
        return False
    depth = 1
    for at in range(start.end(), len(expression)):
        depth += {40: 1, 41: -1}.get(expression[at], 0)  # ( and )
        if depth == 0:
            return at == len(expression) - 1
    return False


def _assignments(text_: bytes, word: bytes) -> tuple[list[bytes], list[bytes]]:
    """The values `word = ...` is given in `text_`, and those of its updates (`word += ...`)."""
    name = re.escape(word)
    starts = re.findall(rb"^[ \t]*" + name + rb"[ \t]*=(?!=)[ \t]*(.*)$", text_, re.M)
    updates = re.findall(rb"^[ \t]*" + name + rb"[ \t]*(?:[-+*/%]|//)=[ \t]*(.*)$", text_, re.M)
    return starts, updates


_TRAINER_CLASS = re.compile(r"Trainer|Learner|Runner|Engine|Loop", re.I)


def _rooted_in_settings(owner: Node) -> bool:
    """Is `owner` a chain of attributes that starts at an object of settings (`cfg.loss_params`,
    `self.config.model.loss`): its fields are numbers and names however deep?"""
    parts = (dotted_name(owner) or "").split(".")
    if parts[0] == "self":
        parts = parts[1:]
    return len(parts) > 1 and _SETTINGS.search(parts[0]) is not None


def _submodule_in_forward(ctx: LintContext, call: Node) -> bool:
    """Is `call` (`self.gate(x)`) in the `forward` of a module class (a class with a base) that
    sets `self.gate` to a module it builds (`self.gate = nn.Linear(d, n)`, `self.experts =
    Experts(cfg)`)? A layer of a model computes where the model runs."""
    function = next((a for a in ancestors(call) if a.type == "function_definition"), None)
    title = function.child_by_field_name("name") if function is not None else None
    holder = next((a for a in ancestors(call) if a.type == "class_definition"), None)
    bases = holder.child_by_field_name("superclasses") if holder is not None else None
    if title is None or text(title) != "forward" or holder is None or bases is None or not bases.named_children:
        return False
    memo = _memo(ctx, "_built_modules_memo")
    if holder.id not in memo:  # (every `self.x(...)` of the class asks: the class is read once)
        memo[holder.id] = frozenset(m.group(1).decode() for m in _BUILT_MODULE.finditer(class_text(ctx, holder)))
    return (method_name(call) or "") in memo[holder.id]


# `self.gate = nn.Linear(d, n)`, `self.experts = Experts(cfg)`: an attribute set to a module built there
_BUILT_MODULE = re.compile(rb"self\.(\w+)[ \t]*=[ \t]*(?:[A-Za-z_]\w*\.)*[A-Z]\w*\(")


def _module_buffer(ctx: LintContext, node: Node, attr: str) -> bool:
    """Is `self.<attr>` a buffer that the module class around `node` registers
    (`self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))`) of a model (a class with
    a `forward`)? A buffer moves with its module: where the model runs, on the device, so does the
    buffer (MoCo's `self.queue_ptr`). Not a trainer's `steps` buffer (a class spelled as a trainer,
    even with a `forward` that trains): nothing moves the trainer."""
    holder = next((a for a in ancestors(node) if a.type == "class_definition"), None)
    if holder is None or not _model_class(ctx, holder):
        return False
    memo = _memo(ctx, "_model_buffers_memo")
    if holder.id not in memo:  # (one read of the class for all its attributes)
        registered = _BUFFER_REGISTERED.finditer(class_text(ctx, holder))
        memo[holder.id] = frozenset(m.group(1).decode() for m in registered if not m.group(2).startswith(b"None"))
    return attr in memo[holder.id]


def in_model_method(ctx: LintContext, node: Node) -> bool:
    """Is `node` in a method of a model class (`_model_class`): code that runs as part of a
    model's forward pass or its set-up, not a driver loop around a model?"""
    holder = next((a for a in ancestors(node) if a.type == "class_definition"), None)
    return holder is not None and _model_class(ctx, holder)


def _model_class(ctx: LintContext, holder: Node) -> bool:
    """Is the class a model: one with a base and a `forward` method, not spelled as a trainer (a
    trainer that is a `Module` for its `step` buffer, maybe with a `forward` that trains)?"""
    bases = holder.child_by_field_name("superclasses")
    if bases is None or not bases.named_children:
        return False
    memo = _memo(ctx, "_model_class_memo")
    if holder.id not in memo:
        title = holder.child_by_field_name("name")
        memo[holder.id] = b"def forward(" in class_text(ctx, holder) and not (
            title is not None and _TRAINER_CLASS.search(text(title))
        )
    return bool(memo[holder.id])


def _number_attribute(ctx: LintContext, node: Node, attr: str) -> bool:
    """Does every assignment of `self.<attr>` in the class give it a Python or NumPy number: a
    literal, `float("inf")`, `np.mean(...)`, `.item()`, or a name that the class binds only so
    (`mean_loss = np.mean(losses)`, then `self.best_loss = mean_loss`)? Read from the class's
    whole text, so the answer does not depend on which methods are parsed."""
    holder = next((a for a in ancestors(node) if a.type == "class_definition"), None)
    if holder is None:
        return False
    memo = _memo(ctx, "_number_attribute_memo")
    key = (holder.id, attr)
    if key not in memo:
        data = class_text(ctx, holder)
        setting = rb"self\." + re.escape(attr.encode()) + rb"[ \t]*(?:[-+*/%]|//)?=(?!=)[ \t]*([^\n#]*)"
        sets = list(re.finditer(setting, data))
        memo[key] = bool(sets) and all(_number_set(data, m.group(1).strip(), m.start()) for m in sets)
    return bool(memo[key])


def _number_set(data: bytes, value: bytes, at: int) -> bool:
    """Is `value`, set at offset `at` of `data`, a number: a number itself, a name that `data`
    binds only to numbers (`mean_loss`, then `self.best_loss = mean_loss`), or a name whose last
    binding before `at` gives one (`loss = loss.item()`, then `self._total_loss += loss`)?"""
    if _number_value(data, value, 2):
        return True
    if re.fullmatch(rb"[A-Za-z_]\w*", value) is None:
        return False
    bindings = re.compile(rb"^[ \t]*" + value + rb"[ \t]*=(?!=)[ \t]*([^\n]*)", re.M).findall(data, 0, at)
    return bool(bindings) and _number_value(data, bindings[-1], 1)


def _binds_numbers(data: bytes, word: bytes, names: int) -> bool:
    """Does `data` bind `word` (`word = ...`, `word += ...`) only to Python or NumPy numbers
    (`_number_value`)? `epoch_loss = 0`, `epoch_loss += loss.item()`, `epoch_loss /= len(loader)`."""
    starts, updates = _assignments(data, word)
    if starts and all(v.split(b"#")[0].strip() == b"{}" for v in starts) and not updates:
        return _host_items(data, word, names)  # `out = {}`, `out[split] = losses.mean()`
    return bool(starts) and all(_number_value(data, v.strip(), names) for v in starts + updates)


def _host_items(data: bytes, word: bytes, names: int) -> bool:
    """Does `data` set the items of the dict `word` only to host values: numbers, or a reduction
    of a tensor made on the CPU (nanoGPT's `losses = torch.zeros(eval_iters)`, `losses[k] =
    loss.item()`, `out[split] = losses.mean()`)?"""
    values = re.findall(rb"^[ \t]*" + re.escape(word) + rb"\[[^\]\n]*\][ \t]*=(?!=)[ \t]*(.*)$", data, re.M)
    return bool(values) and all(
        _number_value(data, v.strip(), names) or _cpu_reduction(data, v.split(b"#")[0].strip()) for v in values
    )


def _cpu_reduction(data: bytes, value: bytes) -> bool:
    """`losses.mean()` of a name `data` binds only to a factory given no device (`torch.zeros(n)`):
    a tensor on the CPU, whatever its items are set to."""
    reduced = re.fullmatch(rb"([A-Za-z_]\w*)\.(?:mean|sum|max|min)\(\)", value)
    if reduced is None:
        return False
    starts, updates = _assignments(data, reduced.group(1))
    return (
        bool(starts)
        and not updates
        and all(_CPU_FACTORY_TEXT.fullmatch(v.split(b"#")[0].strip()) and b"device" not in v for v in starts)
    )


_CPU_FACTORY_TEXT = re.compile(rb"torch\.(?:zeros|ones|empty|full)\([^()]*\)")


def _number_value(data: bytes, value: bytes, names: int) -> bool:
    """Is `value` (the text of an assigned value, comment included) a Python or NumPy number: a
    literal, a host read (`.item()`, `len(...)`, `x.numel()`), `float(...)`, `np.mean(...)`,
    `np.inf`, or (up to `names` names deep) a name that `data` binds only to such values?"""
    value = value.split(b"#")[0].strip()
    if _NUMBER_UPDATE.match(value) or _host_number_call(value) or re.fullmatch(rb"(?:math|np|numpy)\.inf", value):
        return True
    return (
        names > 0
        and re.fullmatch(rb"[A-Za-z_]\w*", value) is not None
        and value not in (b"None", b"True", b"False")
        and _binds_numbers(data, value, names - 1)
    )


def class_text(ctx: LintContext, holder: Node) -> bytes:
    """The whole text of a class, with the methods left out of the parse (the class node of a
    pruned parse may end before them)."""
    memo = _memo(ctx, "_class_text_memo")
    if holder.id not in memo:
        data = ctx.source.whole_data
        start = data.rfind(b"\n", 0, holder.start_byte) + 1
        memo[holder.id] = indented_block(data, start)
    return memo[holder.id]


def _bracketed(data: bytes, start: int) -> bytes:
    """The expression from `start` to the end of its line, or of the bracket it opens there
    (`return (\n    a,\n    b,\n)`), without comments."""
    depth, out, at = 0, bytearray(), start
    while at < len(data):
        char = data[at : at + 1]
        if char == b"#":
            at = data.find(b"\n", at)
            if at < 0:
                break
            continue
        if char == b"\n" and depth <= 0:
            break
        depth += 1 if char in b"([{" else -1 if char in b")]}" else 0
        out += char
        at += 1
    return bytes(out)


def _in_training_class(ctx: LintContext, node: Node) -> bool:
    """Is `node` in a class that takes a training step in one of its methods
    (`self._optimizers_step(out)`, whose `loss.backward()` is in another method)? Its training
    and evaluation loops run the same model, on the device the caller chose. A byte scan of the
    class's whole text, so the answer does not depend on which of its methods are parsed."""
    holder = next((a for a in ancestors(node) if a.type == "class_definition"), None)
    if holder is None or is_test_case(holder):
        # a `unittest.TestCase`'s methods test on the tensors they make, on the CPU unless the file
        # names a device; another test's `loss.backward()` makes none of them a training loop
        return False
    memo = _memo(ctx, "_training_class_memo")
    if holder.id not in memo:
        memo[holder.id] = bool(_TRAINING_STEP.search(class_text(ctx, holder)))
    return memo[holder.id]


_TRAINING_STEP = re.compile(rb"\bbackward\(|\boptim\w*\.step\(")
# Trigger bytes of `_in_training_step` and `training_step_function`, beside DEVICE_EVIDENCE
# (triggers.py): the bytes both need (`_TRAINING_STEP` in a loop's body, `_TRAINING_STEP_BYTES`
# in a function's), so a file without them can have no training step.
TRAINING_STEP_EVIDENCE = (b"backward(", b".step(", b"def training_step(", b"param_groups")


def _in_training_step(ctx: LintContext, node: Node) -> bool:
    """Is `node` in a loop (of its own function) whose body takes a training step, or outside any
    loop of a function that takes one (`training_step_function`)?"""
    loop = repeating_loop(node)
    if loop is None:
        return training_step_function(ctx, node) is not None
    function = next((a for a in ancestors(loop) if a.type == "function_definition"), None)
    if function is not None and input_gradient_function(function):
        return False  # (`loss_gradient`'s loop of backward passes per sample: no training)
    body = loop.child_by_field_name("body")
    return body is not None and bool(_TRAINING_STEP.search(body.text or b"")) or _optimizer_step_loop(loop)


def _optimizer_step_loop(loop: Node) -> bool:
    """`for p in group["params"]:` (or `for group in self.param_groups:`) in an optimizer's `step`:
    the update of every parameter, on every training step."""
    if function_name(loop) != "step":
        return False
    iterables = (current.child_by_field_name("right") for current in loops_around(loop))
    return any(iterable is not None and _PARAMETER_GROUPS.search(text(iterable)) for iterable in iterables)


_PARAMETER_GROUPS = re.compile(r"param_groups|\[\s*[\"']params[\"']\s*\]")


_OPTIMIZER = re.compile(r"optim|(?:^|_)opt$|scaler$", re.I)  # (`self.D_scaler.step(opt)`: GradScaler's step)
_LOOPS_AND_SCOPES = frozenset({"for_statement", "while_statement", "function_definition", "lambda", "class_definition"})


# A LightningModule's hook: `(self, batch, batch_idx)`
_LIGHTNING_STEP = re.compile(r"^\(\s*self\s*,\s*batch\b")


def training_step_function(ctx: LintContext, node: Node) -> Optional[Node]:
    """The function `node` is in, when `node` is outside every loop of it and the function takes
    one training step per call outside its loops (`loss.backward()`, `self.accelerator.backward(
    loss)`, `self.critic_optim.step()`): such a function (`update_critic(batch)`, `train_step`)
    is called once per step by a training loop, often in another module. Not a `test_*`
    function (it takes one step to check it)."""
    if repeating_loop(node) is not None:
        return None
    function = next((a for a in ancestors(node) if a.type in SCOPE_TYPES), None)
    if function is None or function.type != "function_definition":
        return None
    memo = _memo(ctx, "_training_step_memo")
    if function.id not in memo:
        memo[function.id] = _takes_training_step(function)
    return function if memo[function.id] else None


def _takes_training_step(function: Node) -> bool:
    name = function.child_by_field_name("name")
    if name is not None and is_test_name(text(name)):
        return False
    if (
        name is not None
        and text(name) == "training_step"
        and _LIGHTNING_STEP.search(text(function.child_by_field_name("parameters") or name))
    ):
        # `def training_step(self, batch, batch_idx):` Lightning calls it for every batch and runs the
        # backward of the loss it returns
        return True
    body = function.child_by_field_name("body")
    if body is None or not _TRAINING_STEP_BYTES.search(body.text or b""):
        return False
    if input_gradient_function(function):
        return False
    stack = list(body.named_children)
    while stack:
        current = stack.pop()
        if current.type in _LOOPS_AND_SCOPES:
            continue
        if current.type == "call":
            method = method_name(current)
            owner = receiver(current)
            if method == "backward" or (
                method == "step"
                and owner is not None
                and _OPTIMIZER.search((dotted_name(owner) or "").split(".")[-1] or "-")
                and not _closure_step(current, body)
            ):
                return True
        stack.extend(current.named_children)
    return False


_TRAINING_STEP_BYTES = re.compile(rb"backward\(|\.step\(")
_INPUT_GRADIENT = re.compile(rb"requires_grad_\(|requires_grad\s*=\s*True")
# A function named for the gradient it returns (`loss_gradient`, `class_gradient`, `compute_saliency`)
_GRADIENT_FUNCTION = re.compile(r"gradient|saliency|attribution", re.I)


def input_gradient_function(function: Node) -> bool:
    """Does `function` compute the gradient of an input, not take a training step: it sets
    `requires_grad` (`x.requires_grad_(True)` ... `loss.backward()` ... `x.grad`: an attack's, a
    saliency map's) or is named for the gradient it returns (`loss_gradient`, whose inputs another
    method made differentiable), and steps no optimizer?"""
    body = function.child_by_field_name("body")
    title = function.child_by_field_name("name")
    if body is None or steps_optimizer(body):
        return False
    return bool(_INPUT_GRADIENT.search(body.text or b"")) or (
        title is not None and _GRADIENT_FUNCTION.search(text(title)) is not None
    )


def _closure_step(call: Node, body: Node) -> bool:
    """`optimizer.step(closure)` with `def closure(): ...` in the same function: L-BFGS and its
    kind evaluate the closure up to `max_iter` times in one call, a whole fit (a calibration, a
    line search) rather than one training step of a loop."""
    positional, _ = arguments(call)
    if len(positional) != 1 or positional[0].type != "identifier":
        return False
    return definition_text(body.text or b"", text(positional[0])) is not None


def is_model_call(call: Node) -> bool:
    """`model(x)`, `self.net(x)`, `criterion(y, t)`: a call spelled as a model's forward (not a
    class built: `Generator(nz)`, `nn.CrossEntropyLoss()`)."""
    name = dotted_name(callee(call)) or ""
    last = name.split(".")[-1]
    return name == "self" or bool(name) and bool(_MODEL_CALLEE.search(last)) and not _class_name(last)


def _class_name(name: str) -> bool:
    """`Generator`, `CrossEntropyLoss`: a class (its call builds an object); not `MODEL`."""
    return name[:1].isupper() and not name.isupper()


def maybe_device(ctx: LintContext, node: Optional[Node]) -> bool:
    """Weaker than `likely_device`, for operations that only a tensor has (`torch.where(mask)`,
    `.nonzero()`): not provably on the host, in a file that speaks of a device."""
    return likely_device(ctx, node) or (
        device_of(ctx, node) is Device.UNKNOWN
        and not (node is not None and host_path_start(ctx, node) is not None)
        and module_mentions_device(ctx)
        and not (node is not None and in_collate_function(node))  # host tensors there unless proven
        and not (node is not None and (moved_to_device_later(ctx, node) or converted_with_numpy(node)))
    )


def is_model_output(ctx: LintContext, node: Optional[Node]) -> bool:
    """Is `node` what a model computed (its output, a loss, a value derived from them)?"""
    return _model_output(ctx, node, 0)


def _model_output(ctx: LintContext, node: Optional[Node], depth: int) -> bool:
    if node is None or depth > MAX_DEPTH:
        return False
    memo = _memo(ctx, "_model_output_memo")
    if node.id not in memo:
        memo[node.id] = False  # a cycle through this node proves nothing
        memo[node.id] = _model_output_of(ctx, node, depth) or _model_output_in_a_branch(ctx, node, depth)
    return memo[node.id]


def _model_output_in_a_branch(ctx: LintContext, node: Node, depth: int) -> bool:
    """`if done: loss = outputs[-1].loss else: loss = dict()`: a read after the statement may see
    the model's output that one branch binds (mmengine's `_update_losses`)."""
    node = strip_parens(node)
    if node.type != "identifier":
        return False
    binding = _binding(ctx, node)
    if binding is None or binding.augmented or binding.loop is not None:
        return False
    for other in ctx.bindings(node).branch_alternatives(text(node), node.start_byte, binding):
        value = other.value if other.value is not None else other.unpacked_from
        if other.loop is None and not other.augmented and _model_output(ctx, value, depth + 1):
            return device_of(ctx, value) is not Device.CPU
    return False


def _a_models_host_result(ctx: LintContext, node: Node, fields: bool = False) -> bool:
    """Is `node` a call of a model's method that returns Python values (`model.stream_chat(...)`),
    or a name bound to one? `fields`: `node` is read for a field (`result.main_score`), so also
    a model's evaluation (`result = self.model.evaluate(dev_data)`: flair's and Keras-style models
    return scores; `policy.evaluate(env).item()` reads a tensor an RL policy returns)."""
    node = strip_parens(node)
    if node.type == "identifier":
        binding = _binding(ctx, node)
        node = strip_parens(binding.value) if binding is not None and binding.value is not None else node
    if node.type != "call":
        return False
    method = method_name(node)
    host = (method in _MODULE_HOST_METHODS and method != "get") or (fields and method == "evaluate")
    return host and _spelled_model(receiver(node))


def _optimizer_state(ctx: LintContext, node: Node) -> bool:
    """`state["exp_avg"]` with `state = self.state[p]` (or `self.state[p]["s"]`) in an optimizer's
    `step`: a parameter's optimizer state, a tensor on the parameter's device (not `"step"`, a
    count torch's own optimizers keep on the CPU)."""
    key = node.child_by_field_name("subscript")
    holder = node.child_by_field_name("value")
    if key is None or key.type != "string" or string_value(key) == "step" or holder is None:
        return False
    if holder.type == "identifier":
        binding = _binding(ctx, holder)
        holder = binding.value if binding is not None and binding.value is not None else holder
    holder = strip_parens(holder)
    if holder.type != "subscript":
        return False
    owner = holder.child_by_field_name("value")
    if owner is None or text(owner) != "self.state" or function_name(node) != "step":
        return False
    # (only a key the file sets to a tensor: L-BFGS keeps Python counters there, `state["n_iter"]`)
    made = (
        rb"\[\s*['\"]"
        + re.escape(string_value(key).encode())
        + rb"['\"]\s*\]\s*=\s*(?:torch\.|[\w.]+\.(?:clone|detach|new_\w+)\()"
    )
    return re.search(made, ctx.source.whole_data) is not None


def _model_output_of(ctx: LintContext, node: Node, depth: int) -> bool:
    node = strip_parens(node)
    kind = node.type
    if kind == "identifier":
        loss_named = bool(_LOSS_NAME.search(text(node)))
        if _TEXT_NAME.search(text(node)) and not (loss_named and _bound_to_a_call(ctx, node)):
            # (`loss_tag, loss_dis = model(...)`: a loss that a model returns, whatever its suffix;
            # a `loss_tag = "train/loss"` is a name)
            return False
        if _backward_of(ctx, node):
            # `loss = self._process_batch(...)` ... `loss.backward()`: the step's loss, whatever its
            # name (`evaluation_error.backward()`)
            return True
        binding = _binding(ctx, node)
        if binding is None:
            annotation = _parameter_annotation(node)
            if annotation is not None and (
                _HOST_ANNOTATION.fullmatch(annotation) is not None or _names_other_class(annotation)
            ):
                return False  # `def check(losses: dict[int, float]):` the annotation says: numbers
            # a parameter or global named `loss`; a parameter every call in the file passes a model's output
            passed = _call_site_arguments(ctx, node)
            return loss_named or bool(passed) and all(_model_output(ctx, a, depth + 1) for a in passed)
        if _annotated_scalar(binding):
            return False
        if binding.loop is not None:
            # `for step, batch in enumerate(loader):` ... `loss.backward()`: the batch, not the counter
            iterable = binding.loop.child_by_field_name("right")
            if iterable is not None and iterable.type == "identifier" and _held_as_numpy(ctx, iterable):
                return False  # `for _, _, confidence, *_ in detections:` of NumPy `sv.Detections`
            element = _loop_element_device(ctx, iterable, binding.path, depth + 1)
            if element is Device.HOST or _iterates_keys(binding.loop, binding.path, text(node)):
                return False
            # (a comprehension's variable is its own, not the batch of the training loop around it)
            training = (
                binding.loop.type != "for_in_clause"
                and _in_training_loop(binding.loop)
                and not _COUNTER_NAME.search(text(node))
                # (`for strategy in (Strategy.NONE, other):` walks a few values, not batches)
                and (iterable is None or literal_length(iterable) is None)
            )
            return training or _iterates_model_output(ctx, iterable, binding.path, depth)
        if binding.augmented and loss_named and binding.site is not None:
            statement = binding.site.parent
            added = statement.child_by_field_name("right") if statement is not None else None
            if added is not None and (
                device_of(ctx, added, depth + 1) is Device.HOST or _number_value(b"", text(added).encode(), 0)
            ):
                return False  # `tr_loss += loss.item()`, `total_loss += loss.item() / n`: a sum of numbers
        if binding.augmented and not loss_named and binding.site is not None:
            # `lprobs += probs`: the tensor bound before the statement, updated in place (read at
            # the statement's target, where the binding before applies)
            return _model_output(ctx, binding.site, depth + 1)
        value = binding.value
        if (
            value is not None
            and strip_parens(value).type == "call"
            and dotted_name(callee(strip_parens(value))) == "next"
        ):
            if _parts_moved(node):
                return False  # `udata = next(loader)`, then `clips = udata[0].to(device)`: a host batch
            return _in_training_loop(node)  # `batch = next(iterator)` inside a training loop
        if value is None:
            if binding.unpacked_from is not None:  # `loss, logits = model(x)`
                part = _unpacked_part(binding)  # (`a, b = model(x), y`: its own part)
                return _model_output(ctx, part if part is not None else binding.unpacked_from, depth + 1)
            return loss_named  # `loss += ...`
        if loss_named and strip_parens(value).type == "call":
            # `loss = chunked_cross_entropy(logits, y)`: a loss computed from model outputs, or by
            # a function spelled like a loss or a step; not `val_loss = evaluate(...)` (a float).
            call = strip_parens(value)
            if _returns_python_value(ctx, call) or (dotted_name(callee(call)) or "").split(".")[0] in HOST_MODULES:
                return False  # `epoch_loss = self.train_step(epoch)`: a sum of `.item()` reads; `np.mean(losses)`
            if _svi_loss(call):
                return False
            name = (dotted_name(callee(call)) or "").split(".")[-1]
            if _MAKES_LOSS_FUNCTIONS.search(name):
                return False  # `loss_dict = initialize_loss_functions(cfg, ...)`: the loss modules, no value
            if _LOSS_CALLEE.search(name):
                return True
            positional, keywords = arguments(call)
            return _model_output(ctx, call, depth + 1) or any(
                _model_output(ctx, a, depth + 1) for a in [*positional, *keywords.values()]
            )
        return _model_output(ctx, value, depth + 1)
    if kind == "attribute":
        attr = text(node.child_by_field_name("attribute"))
        if attr in HOST_ATTRIBUTES:
            return False
        owner = node.child_by_field_name("object")
        if attr == "loss" and owner is not None and text(owner) == "self":
            return False  # `self.loss`: the module's loss function, or a value it keeps (a float)
        if owner is not None and text(owner) == "self" and _number_attribute(ctx, node, attr):
            return False  # `self.best_loss = float("inf")` ... `self.best_loss = mean_loss` (np.mean)
        if owner is not None and text(owner) == "self" and _module_buffer(ctx, node, attr):
            return True  # `self.queue_ptr` of `self.register_buffer("queue_ptr", ...)`: moves with the module
        if owner is not None and (_SETTINGS.search(text(owner)) or _rooted_in_settings(owner)):
            # `self.cfg.losses`, `args.loss_weight`, `cfg.loss_params.gan_loss`: settings, no tensor
            return False
        if owner is not None and _a_models_host_result(ctx, owner, fields=True):
            return False  # `result.loss` of `result = self.model.evaluate(dev_data)`: a score
        if _LOSS_NAME.search(attr) or attr == "grad" or attr == "logits":
            return True
        if (
            owner is not None
            and attr not in SAME_DEVICE_ATTRIBUTES
            and owner.type in ("identifier", "attribute")
            and _LOSS_NAME.search(text(owner.child_by_field_name("attribute") if owner.type == "attribute" else owner))
        ):
            return False  # `cfg.loss.batch_size`, `loss_cfg.gamma`: a field of a loss's settings, no tensor
        return _model_output(ctx, owner, depth + 1)
    if kind == "subscript":
        key = node.child_by_field_name("subscript")
        if _optimizer_state(ctx, node):
            return True
        value = node.child_by_field_name("value")
        # (a count kept beside the losses, not `batch["token_counts"]`: a batch's counts are tensors)
        if (
            key is not None
            and key.type == "string"
            and _COUNTER_KEY.search(string_value(key))
            and _LOSS_NAME.search(text(value) if value is not None else "")
        ):
            return False  # `self.loss_information["generator_iters"]`
        if (
            key is not None
            and key.type == "string"
            and _LOSS_NAME.search(string_value(key))
            and "/" not in string_value(key)  # (`stats["ppo/loss/total"]`: a logged metric's name)
        ):
            # `step = step_fn(batch)` ... `step["loss"]`: the loss of what a call returned, as
            # `outputs.loss`; not `self.history["loss"]` or `{"loss": loss.item()}["loss"]` (logs)
            if _returned_by_a_call(ctx, node.child_by_field_name("value")):
                return True
        return _model_output(ctx, node.child_by_field_name("value"), depth + 1)
    if kind == "comparison_operator" and _compares_with_string(node):
        return False
    if kind in ("binary_operator", "comparison_operator"):
        return any(_model_output(ctx, c, depth + 1) for c in node.named_children)
    if kind == "unary_operator":
        return _model_output(ctx, node.child_by_field_name("argument"), depth + 1)
    if kind == "conditional_expression":
        # `out["image_features"] if isinstance(out, dict) else out[0]`: either branch's output
        return any(_model_output(ctx, c, depth + 1) for c in node.named_children[::2])
    if kind == "call":
        name = torch_name(ctx, callee(node))
        method = method_name(node)
        if name in HOST_BUILTINS or name.split(".")[0] in HOST_MODULES:
            return False
        function = callee(node)
        if function is not None and function.type == "subscript":
            # `model_dict["net"](x)`, `loss_dict["L1_loss"](pred, y)`: a model or a loss kept in a dict
            key = function.child_by_field_name("subscript")
            holder = dotted_name(function.child_by_field_name("value")) or ""
            spelled = string_value(key) if key is not None and key.type == "string" else ""
            return bool(
                _MODEL_NAME.search(holder.split(".")[-1]) or _MODEL_NAME.search(spelled) or _LOSS_NAME.search(spelled)
            )
        if _returns_python_value(ctx, node):
            return False  # `_clamp_block_m(4, n)` of `def _clamp_block_m(m: int, n: int) -> int:`
        if _GRAD_NORM.search(name.split(".")[-1]):
            # `clip_grad_norm_(params, max_norm)`, `accelerator.clip_grad_norm_(...)`: the total norm
            # of the gradients, a tensor on the parameters' device
            return True
        if method is not None and name.split(".")[0] not in ("torch", "F"):
            if method in HOST_METHODS or method in ("cpu", "pin_memory"):
                return False
            if _svi_loss(node):
                return False
            if _a_models_host_result(ctx, node):
                return False  # `self.model.evaluate(dev_data)`: the model's scores, Python values
            handed = _gathered(node)
            if handed is not None:
                # `accelerator.gather(loss)`: the loss of every rank, where the loss was
                return _model_output(ctx, handed, depth + 1)
            if method == "get" and _loss_key(ctx, node):
                # `loss = outputs.get("loss")`: the loss of what a call returned, as `outputs["loss"]`
                return True
            if _MODEL_CALLEE.search(method) and method not in ("forward_hook",) and not _class_name(method):
                return True
            owner = receiver(node)
            if _loaded_here_on_the_cpu(ctx, owner):
                return False  # `model = matgl.load_model(name)` in a function that names no device
            if node.child_by_field_name("arguments") is not None and not arguments(node)[0] and not arguments(node)[1]:
                if _METADATA_GETTER.search(method):
                    return False  # `port.get_element_type()` of an exported model's input: its metadata
                if _walked_submodule(ctx, owner) and not _LOSS_NAME.search(method):
                    return False  # `for m in self.model.modules: m.weight_footprint()`: a layer's own
                    # bookkeeping (sizes, formats), given no input to compute from
                if _SIZE_METHOD.search(method) and not _LOSS_NAME.search(method):
                    return False  # `cached_model.total_bytes()`, `model.num_params()`: a count
            if _RUN_METRIC_METHOD.search(method) or _PREDICATE_METHOD.match(method) or _COUNT_METHOD.search(method):
                return False  # `model.estimate_mfu(tokens, dt)`: a figure about the run, a Python number
            if method not in MODULE_METHODS and not method.lstrip("_").startswith("get_") and _spelled_model(owner):
                if _given_host_inputs(ctx, node, depth):
                    return False  # `model.stft(waves.to(cpu))`: computed where its input is
                return True  # `self.policy.evaluate_actions(obs, actions)`: a model's own method
            if _LOSS_FUNCTION.search(method) and _given_a_model_output(ctx, node, depth):
                return True  # `metrics.accuracy(outputs, pids)`: a module's loss or metric function
            if owner is not None and text(owner) == "self" and arguments(node)[0] and _submodule_in_forward(ctx, node):
                return True  # `scores = self.gate(x)` in a module's `forward`: what a layer of it computes
            return _model_output(ctx, owner, depth + 1)
        if name == "sum":
            # `0.5 * sum(F.mse_loss(q, target) for q in q_values)`: a loss summed over terms
            return _model_output(ctx, _summed(node), depth + 1)
        if name.startswith("torch.") or name.startswith("F."):
            positional, _ = arguments(node)
            return bool(positional) and _model_output(ctx, _first_element(positional[0]), depth + 1)
        if name == "self" and _in_data_class(node):
            return False  # `out = self(text, ...)` in a tokenizer: token ids and offsets, no model output
        if name == "self" or bool(name) and bool(_MODEL_CALLEE.search(name.split(".")[-1])):
            return not _class_name(name.split(".")[-1])
        if _LOSS_FUNCTION.search(name.split(".")[-1]) and name not in host_loss_functions(ctx):
            # `chunked_cross_entropy(logits, targets)`: a loss (or accuracy) of a model's output
            # (not the file's own `accuracy` that returns `[float(...) for k in topk]`)
            return _given_a_model_output(ctx, node, depth)
        return _aliases_a_model(ctx, callee(node))
    return False


def _in_data_class(node: Node) -> bool:
    """Is `node` in a class spelled as one that prepares data (`PreTrainedTokenizerBase`,
    `Owlv2ImageProcessor`, `DataCollatorForSeq2Seq`, `FeatureExtractor`): calling it gives inputs
    for a model, not a model's output."""
    holder = next((a for a in ancestors(node) if a.type == "class_definition"), None)
    title = holder.child_by_field_name("name") if holder is not None else None
    return title is not None and _DATA_CLASS.search(text(title)) is not None


_DATA_CLASS = re.compile(r"Tokenizer|Processor|FeatureExtractor|Collator|Encoding")


# Pyro's stochastic variational inference (`svi = SVI(model, guide, optim, loss)`), whose `step`
# and `evaluate_loss` return the loss as a Python float
_SVI = re.compile(r"(?:^|_)svi(?:$|_)", re.I)


# Factories whose result always has a dimension: never a 0-d tensor that could meet a CUDA one
_RANGE_FACTORIES = frozenset({"torch.arange", "torch.linspace", "torch.logspace"})
_CASTS = frozenset({"float", "double", "half", "long", "int", "bfloat16"})


def _ranged_on_cpu(ctx: LintContext, node: Node, depth: int) -> bool:
    """Is `node` `torch.arange(...)` (or `linspace`, `logspace`) made on the CPU, maybe cast or
    in arithmetic (`torch.arange(0, self.dim, 2).float() / self.dim`)?"""
    node = strip_parens(node)
    if depth > 4:
        return False
    if node.type == "call" and method_name(node) in _CASTS and not arguments(node)[0]:
        return _ranged_on_cpu(ctx, receiver(node) or node, depth + 1) if receiver(node) is not None else False
    if node.type == "binary_operator":
        # (whatever the other operand is: a CUDA tensor, even a 0-d one, would raise with it)
        return any(_ranged_on_cpu(ctx, c, depth + 1) for c in node.named_children if c.type != "comment")
    if node.type != "call" or torch_name(ctx, callee(node)) not in _RANGE_FACTORIES:
        return False
    return device_of(ctx, node, depth + 1) is Device.CPU


def _parts_moved(name: Node) -> bool:
    """Does the function around `name` move items of it to the device itself (`clips =
    udata[0].to(device)`, `udata[-1].cuda()`)? Then it holds a loader's host batch, and the items it
    does not move (`udata[1]`, labels read with `int(v)`) stay on the host."""
    function = next((a for a in ancestors(name) if a.type == "function_definition"), None)
    if function is not None:
        data = function.text or b""
    else:  # the module's own code, not its definitions (left out of some parses)
        data = b"\n".join(c.text or b"" for c in module_code(name))
    word = re.escape(text(name).encode())
    moved = rb"(?<![\w.])" + word + rb"\s*\[[^\]\n]*\]\s*\.\s*(?:to|cuda)\s*\("
    return re.search(moved, data) is not None


def _given_host_inputs(ctx: LintContext, call: Node, depth: int) -> bool:
    """Is every tensor a model's method is given known to be on the CPU (`model.stft(mix_waves)`
    with `mix_waves = torch.tensor(...).to(cpu)`)? A model on the GPU would raise on such an input,
    so what it computes is on the CPU too."""
    positional, keywords = arguments(call)
    devices = [device_of(ctx, a, depth + 1) for a in [*positional, *keywords.values()]]
    # (at least one tensor on the CPU; numbers, strings and devices say nothing: `ortho(self.device)`)
    return Device.CPU in devices and all(d in (Device.CPU, Device.HOST) for d in devices)


def _svi_loss(call: Node) -> bool:
    """`svi.step(x)`, `svi.evaluate_loss(x)`: Pyro's loss estimate, a Python float."""
    if method_name(call) not in ("step", "evaluate_loss"):
        return False
    return _SVI.search((dotted_name(receiver(call)) or "").split(".")[-1]) is not None


# Functions that hand back (a copy of) what they are given: `default(a, b)`, `unwrap_model(m)`
_RETURNS_AN_ARGUMENT = re.compile(r"(?:^|\.)(?:default|unwrap\w*|deepcopy|first|coalesce)$")


# A call that loads or builds a model: where it puts the model is its own business
# (`matgl.load_model(name)`, the file's own `_load_potential(name)`, `build_model(cfg)`)
_LOADS_A_MODEL = re.compile(r"(?:^|[._])(?:load|build|create)(?:_\w+)?$|(?:^|\.)from_pretrained$")
_DEVICE_WORDS = re.compile(rb"cuda|device|\.to\(|accelerator|fabric")


def _loaded_here_on_the_cpu(ctx: LintContext, owner: Optional[Node]) -> bool:
    """Is `owner` a name its function binds to a model it loads or builds (`model =
    matgl.load_model(name)`), in a function that names no device, moves nothing and hands the
    load no device: a command-line helper that runs the model where it was made, on the CPU?"""
    if owner is None or owner.type != "identifier":
        return False
    binding = _binding(ctx, owner)
    value = strip_parens(binding.value) if binding is not None and binding.value is not None else None
    if value is None or value.type != "call" or not _LOADS_A_MODEL.search(dotted_name(callee(value)) or ""):
        return False
    function = next((a for a in ancestors(owner) if a.type == "function_definition"), None)
    return function is not None and _DEVICE_WORDS.search(function.text or b"") is None


# A model's method that counts or sizes something, called with no input: a number
# A model's figures about a run rather than about its input (nanoGPT's `estimate_mfu(fwdbwd_per_iter, dt)`)
# (also memory bookkeeping: `model.memory_required(shape)`, `loaded.model_memory_required(dev)`)
_RUN_METRIC_METHOD = re.compile(
    r"^_*estimate_|(?:^|_)(?:mfu|t?flops|throughput)(?:$|_)|(?:^|_)memory_(?:required|used|needed|usage)$"
    # the learning rate (`model.current_learning_rate()`, `get_lr()`: a scheduler's Python float),
    # the log a model keeps of its last step (`model.current_log()`, `get_current_losses()`: the
    # `.item()` numbers it recorded)
    r"|(?:^|_)(?:lr|learning_rate)$|^get_(?:last_)?lr$|^(?:get_)?current_(?:log|logs|losses|errors)$"
    # what resuming from a checkpoint hands back: the iteration or epoch to go on from
    r"|^_*(?:load|resume)_(?:from_)?(?:checkpoint|ckpt|state)$",
    re.I,
)
# A getter of metadata (`get_element_type()`, `get_partial_shape()`, `get_name()`): no tensor
_METADATA_GETTER = re.compile(
    r"^_?get_(?:\w+_)?(?:type|shape|name|names|dtype|rank|size|sizes|length|index|id|key|keys|info|config)$"
)
_SIZE_METHOD = re.compile(r"(?:^|_)(?:bytes|nbytes|footprint|size|count|numel)$|^_*(?:num|n|count|total)_", re.I)
# A walk over a model's layers: `model.modules()`, `named_modules()`, `children()`, `self.model.modules`
_SUBMODULE_WALK = re.compile(r"\.(?:named_)?(?:modules|children)(?:\(\))?$")


def _walked_submodule(ctx: LintContext, owner: Optional[Node]) -> bool:
    """Is `owner` the loop variable of a walk over a model's submodules (`for module in
    model.modules():`, `for name, m in model.named_modules():`)?"""
    if owner is None or owner.type != "identifier":
        return False
    binding = _binding(ctx, owner)
    iterable = binding.loop.child_by_field_name("right") if binding is not None and binding.loop is not None else None
    return iterable is not None and bool(_SUBMODULE_WALK.search(text(strip_parens(iterable))))


def _aliases_a_model(ctx: LintContext, function: Optional[Node]) -> bool:
    """Is `function` a local name bound to a model: `eval_model = self.model`, `net = self.ema if
    use_ema else self.model`, `eval_model = default(self.ema_model, self.model)`? (Spelled alone,
    `eval_model(m, data)` is a function that evaluates one and returns a score.)"""
    if function is None or function.type != "identifier":
        return False
    binding = _binding(ctx, function)
    value = strip_parens(binding.value) if binding is not None and binding.value is not None else None
    if value is None:
        return False
    if value.type == "call":
        if not _RETURNS_AN_ARGUMENT.search(dotted_name(callee(value)) or ""):
            return False  # (`getattr(device_module, "memory_reserved")` is a function of a module)
        candidates = arguments(value)[0]  # `default(self.ema_model, self.model)`, `unwrap(model)`
    elif value.type in ("conditional_expression", "boolean_operator"):
        candidates = list(value.named_children)
    else:
        candidates = [value]
    return any(c.type in ("identifier", "attribute") and _spelled_model(c) for c in candidates)


def _given_a_model_output(ctx: LintContext, call: Node, depth: int) -> bool:
    """Is one of `call`'s arguments a model's output (a loss or metric function computes a tensor
    where its inputs are)?"""
    positional, keywords = arguments(call)
    return any(_model_output(ctx, a, depth + 1) for a in [*positional, *keywords.values()])


def _held_as_numpy(ctx: LintContext, name: Node) -> bool:
    """Does the scope of `name` hand one of its fields to `torch.from_numpy` (`torch.from_numpy(
    detections.confidence)`)? Then the object holds NumPy arrays (supervision's `Detections`), and
    what it yields is on the host."""
    scope = scope_for(name)
    spelled = rb"from_numpy\([ \t]*" + re.escape(text(name).encode()) + rb"[.\[]"
    return re.search(spelled, scope.text or b"") is not None


def _bound_to_a_call(ctx: LintContext, name: Node) -> bool:
    """Is `name` bound to what a call returns, whole or unpacked (`a, b = model(x)`)?"""
    binding = _binding(ctx, name)
    if binding is None:
        return False
    value = binding.value if binding.value is not None else binding.unpacked_from
    return value is not None and strip_parens(value).type == "call"


def _returned_by_a_call(ctx: LintContext, value: Optional[Node]) -> bool:
    """Is `value` a name bound to what a call returned (`outputs = self.batch_outputs(batch)`)?
    Not the averages a whole pass returns (`test_stats = validation_one_epoch(...)`, `stats =
    evaluate(...)`: a meter's floats per key)."""
    value = strip_parens(value) if value is not None else None
    binding = _binding(ctx, value) if value is not None and value.type == "identifier" else None
    if binding is None or binding.value is None or strip_parens(binding.value).type != "call":
        return False
    name = (dotted_name(callee(strip_parens(binding.value))) or "").split(".")[-1]
    return _WHOLE_PASS.search(name) is None


# A function that runs a whole pass over the data and returns its averaged statistics
_WHOLE_PASS = re.compile(r"one_epoch|_epoch$|^_?evaluat|^_?validat", re.I)


def _loss_key(ctx: LintContext, call: Node) -> bool:
    """`outputs.get("loss")` / `.get("reg_loss")` of what a call returned: the dictionary form of
    `outputs["loss"]` (a model's optional loss)."""
    positional, _ = arguments(call)
    key = strip_parens(positional[0]) if positional else None
    return (
        key is not None
        and key.type == "string"
        and bool(_LOSS_NAME.search(string_value(key)))
        and _returned_by_a_call(ctx, receiver(call))
    )


def _first_element(node: Node) -> Node:
    """The first of `[a, b]` / `(a, b)`, the element of `[f(p) for p in ps]`: what
    `torch.stack(...)`/`torch.cat(...)` of a collection computes from; otherwise `node`."""
    inner = strip_parens(node)
    if inner.type in ("list", "tuple"):
        items = [c for c in inner.named_children if c.type != "comment"]
        return items[0] if items else node
    if inner.type in ("list_comprehension", "generator_expression"):
        body = inner.child_by_field_name("body")
        return body if body is not None else node
    return node


_BACKWARD = re.compile(rb"\.backward\(|\bbackward\(")


def _backward_of(ctx: LintContext, name: Node) -> bool:
    """Does the function `name` is read in call `name.backward(` (`loss.backward()`)? Whatever
    it holds is the output of an autograd graph: a loss of the training step."""
    if not _file_calls_backward(ctx):
        return False
    function = next((a for a in ancestors(name) if a.type in SCOPE_TYPES), None)
    if function is not None and function.type == "module":
        # a script's training loop at the top level (maybe under `if __name__ == "__main__":`):
        # the top-level statement that holds the read
        function = next((a for a in ancestors(name) if a.parent is not None and a.parent.type == "module"), None)
    elif function is not None and function.type != "function_definition":
        function = None
    if function is None:
        return False
    memo = _memo(ctx, "_backward_names")
    names = memo.get(function.id)
    if names is None:
        names = memo[function.id] = _names_backward_is_called_on(function.text or b"")
    return (name.text or b"") in names


def _file_calls_backward(ctx: LintContext) -> bool:
    """A byte search of the file, once: most files call no `backward(` at all."""
    cached = getattr(ctx, "_calls_backward", None)
    if cached is None:
        cached = ctx._calls_backward = b"backward(" in ctx.source.whole_data
    return bool(cached)


# `.backward()` / `.backward(retain_graph=True)`, not `fabric.backward(loss)` or
# `accelerator.backward(loss)`, whose receiver is a framework handed the loss (a literal start:
# `re` searches it as a string)
_BACKWARD_CALL = re.compile(rb"\.\s*backward\(\s*(?:\)|\w+\s*=(?!=))")
# `fabric.backward(err)`, `accelerator.backward(total, ...)`, `torch.autograd.backward(err)`,
# `accelerator.backward(loss / self.grad_accum_every)`: the name handed over is the loss
_HANDED_TO_BACKWARD = re.compile(rb"\.\s*backward\(\s*(\w+)\s*(?:[,)]|[/*][^,()\n]*[,)])")
_NAME_BEFORE = re.compile(rb"(?<![\w.])(\w+)\s*$")
# `scaler.scale(loss).backward()`: a GradScaler's scaled loss (fp16 training)
_SCALED_BACKWARD = re.compile(rb"\.\s*scale\(\s*(\w+)\s*\)\s*\.\s*backward\(")


def _names_backward_is_called_on(data: bytes) -> frozenset[bytes]:
    """`loss` and `err` in `loss.backward()`, `err .backward(retain_graph=True)`,
    `scaler.scale(loss).backward()` (not attributes:
    `self.loss.backward()`, nor `fabric` in `fabric.backward(loss)`, where `loss` is)."""
    found = set(_HANDED_TO_BACKWARD.findall(data))
    found.update(_SCALED_BACKWARD.findall(data))
    for match in _BACKWARD_CALL.finditer(data):
        before = _NAME_BEFORE.search(data, max(0, match.start() - 80), match.start())
        if before is not None:
            found.add(before.group(1))
    return frozenset(found)


def _iterates_keys(loop: Node, path: tuple[int, ...], name: str) -> bool:
    """`for k in output:` ... `output[k]`: iterating a dict of outputs gives its keys (names),
    which the loop's body uses to index it."""
    iterable = loop.child_by_field_name("right")
    # (`{f"{k}_left": out[k] for k in out}`: a comprehension's clause; its element is in the comprehension)
    body = loop.parent if loop.type == "for_in_clause" else loop.child_by_field_name("body")
    if path or iterable is None or body is None or strip_parens(iterable).type not in ("identifier", "attribute"):
        return False
    indexed = re.escape(text(strip_parens(iterable)).encode()) + rb"\s*\[\s*" + re.escape(name.encode()) + rb"\s*\]"
    return bool(re.search(indexed, body.text or b""))


def _iterates_model_output(ctx: LintContext, iterable: Optional[Node], path: tuple[int, ...], depth: int) -> bool:
    """`for chunk in logits.chunk(4):` / `for i, c in enumerate(outputs[1:]):`: the rows of a
    model's output."""
    if iterable is None:
        return False
    iterable = strip_parens(iterable)
    if iterable.type == "call" and method_name(iterable) in _MODULE_HOST_METHODS:
        return False  # `for response, history in model.stream_chat(tokenizer, query):` text
    if iterable.type == "call" and method_name(iterable) in ("items", "keys"):
        # the keys of a model's outputs are names; the values are its outputs
        if method_name(iterable) == "keys" or not path or path[0] != 1:
            return False
        return _model_output(ctx, receiver(iterable), depth + 1)
    if iterable.type == "call" and dotted_name(callee(iterable)) == "enumerate":
        positional, _ = arguments(iterable)
        if not positional or not path or path[0] != 1:
            return False
        iterable = positional[0]
        path = path[1:]
    if iterable.type == "call" and dotted_name(callee(iterable)) == "zip":
        # `for loss_func, loss_value in zip(self.loss_functions, loss_values):` the second's rows
        positional, _ = arguments(iterable)
        if not path or path[0] >= len(positional):
            return False
        return _iterates_model_output(ctx, positional[path[0]], path[1:], depth + 1)
    if iterable.type == "identifier":
        binding = _binding(ctx, iterable)
        built = strip_parens(binding.value) if binding is not None and binding.value is not None else None
        if built is not None and built.type == "list_comprehension" and built.named_children[0].type == "call":
            # `outs = [loss_function(outputs, y) for loss_function in self.loss_functions]`: each row
            return _model_output(ctx, built.named_children[0], depth + 1)
    if iterable.type in ("tuple", "list") and not path:
        # `for l in (gen_loss, disc_loss):` each of the model's outputs
        items = [c for c in iterable.named_children if c.type != "comment"]
        return bool(items) and all(_model_output(ctx, c, depth + 1) for c in items)
    return _model_output(ctx, iterable, depth + 1)


def _in_training_loop(node: Node) -> bool:
    """Is `node` a training loop (or in one): a loop whose body calls `backward(`? Its batches
    are on the device, moved there by the loop or by the framework that feeds it (Fabric,
    Accelerate, Lightning move batches before the loop sees them)."""
    loop: Optional[Node] = node if node.type in ("for_statement", "while_statement") else None
    parent = node.parent
    while loop is None and parent is not None:
        if parent.type in ("function_definition", "lambda", "class_definition", "module"):
            return False
        if parent.type in ("for_statement", "while_statement"):
            loop = parent
        parent = parent.parent
    if loop is None:
        return False
    body = loop.child_by_field_name("body")
    data = body.text if body is not None and body.text is not None else b""
    return bool(_BACKWARD.search(data))


# Pinned memory ---------------------------------------------------------------------------------


def is_pinned(ctx: LintContext, node: Optional[Node], depth: int = 0) -> bool:
    """Provably in pinned (page-locked) host memory: `.pin_memory()`, a call with
    `pin_memory=True`, the result of `.to("cpu", non_blocking=True)` / `.cpu(non_blocking=True)`
    (torch allocates it pinned), a view or item of one, a name bound to one, a loop variable over
    a pinned `DataLoader` (see `_loop_element_pinned`)."""
    if node is None or depth > MAX_DEPTH:
        return False
    node = strip_parens(node)
    kind = node.type
    if kind == "call":
        # `pin_memory=True`, or a flag (`pin_memory=PIN_MEMORY`, `pin_memory=self.pin_memory`): the
        # code pins where pinning is possible, as `module_pins` reads it; a helper spelled so
        # (`np_to_pinned_tensor(ids)`, `alloc_pinned(n)`)
        if method_name(node) == "pin_memory" or pins(arguments(node)[1].get("pin_memory")):
            return True
        if _PINNED_HELPER.search((dotted_name(callee(node)) or "").split(".")[-1]):
            return True
        if is_device_to_host(node) and is_true(arguments(node)[1].get("non_blocking")):
            return True
        if method_name(node) in VIEW_METHODS:
            return is_pinned(ctx, receiver(node), depth + 1)
        return False
    if kind == "named_expression":
        return is_pinned(ctx, node.child_by_field_name("value"), depth + 1)
    if kind == "conditional_expression":
        return _both_branches_pinned(ctx, node, depth)
    if kind == "subscript":
        return is_pinned(ctx, node.child_by_field_name("value"), depth + 1)
    if kind == "attribute":
        # `x.T`, `x.mT` (views) and `batch.inputs` (a field of a pinned batch) share the pinning;
        # `self.keys` is pinned when the file ever stores a pinned tensor there (offloading code
        # keeps a tensor in the same attribute on the device and, pinned, on the host).
        if is_pinned(ctx, node.child_by_field_name("object"), depth + 1):
            return True
        return depth < 4 and any(
            is_pinned(ctx, value, MAX_DEPTH - 2) for value in ctx.attribute_assignments(text(node))
        )
    if kind == "identifier":
        binding = _binding(ctx, node)
        if binding is None:
            return False
        if binding.loop is not None:
            return _loop_element_pinned(ctx, binding.loop.child_by_field_name("right"), binding.path, depth + 1)
        return is_pinned(ctx, binding.value, depth + 1)
    return False


def _dict_values_pinned(ctx: LintContext, node: Optional[Node], depth: int) -> bool:
    """Is every value of the dict `node` (a name bound to a dict display or comprehension) pinned?"""
    node = strip_parens(node) if node is not None else None
    if node is not None and node.type == "identifier":
        binding = _binding(ctx, node)
        node = strip_parens(binding.value) if binding is not None and binding.value is not None else None
    if node is None or depth > MAX_DEPTH:
        return False
    if node.type == "dictionary_comprehension":
        pair = node.child_by_field_name("body")
        value = pair.child_by_field_name("value") if pair is not None else None
        return is_pinned(ctx, value, depth + 1)
    if node.type == "dictionary":
        values = [p.child_by_field_name("value") for p in node.named_children if p.type == "pair"]
        return bool(values) and all(is_pinned(ctx, v, depth + 1) for v in values)
    return False


def _both_branches_pinned(ctx: LintContext, node: Node, depth: int) -> bool:
    """`t if t.is_pinned() else t.pin_memory()`: pinned whichever branch runs (a branch is pinned
    when the condition says so of it)."""
    parts = [c for c in node.named_children if c.type != "comment"]
    if len(parts) != 3:
        return False
    taken, condition, other = parts
    test = strip_parens(condition)
    negated = test.type == "not_operator"
    if negated:
        test = strip_parens(test.child_by_field_name("argument") or test)
    checked = receiver(test) if test.type == "call" and method_name(test) == "is_pinned" else None
    said = text(checked) if checked is not None else None

    def pinned(branch: Node, checked_true: bool) -> bool:
        return (said is not None and checked_true and text(strip_parens(branch)) == said) or is_pinned(
            ctx, branch, depth + 1
        )

    if said is None and not negated and _PIN_FLAG.search(text(test)) and is_pinned(ctx, taken, depth + 1):
        return True  # `cpu.pin_memory() if PIN_MEMORY else cpu`: pinned wherever pinning is possible
    return pinned(taken, not negated) and pinned(other, negated)


# A setting that says whether pinned memory may be used (`PIN_MEMORY`, `self.pin_memory`,
# `is_pin_memory_available()`), and a helper that returns pinned memory
_PIN_FLAG = re.compile(r"pin_memory|pinned|pin\b", re.I)
_PINNED_HELPER = re.compile(r"pinned|^pin_|_pin$", re.I)


def _loop_element_pinned(ctx: LintContext, iterable: Optional[Node], path: tuple[int, ...], depth: int) -> bool:
    """Is the part at `path` of each element of `iterable` pinned? A `DataLoader(...,
    pin_memory=True)`, directly or through a name (in this function or, for `self.loader`, any
    `self.loader = DataLoader(...)` of the module), pins every tensor of its batches."""
    if iterable is None or depth > MAX_DEPTH:
        return False
    iterable = strip_parens(iterable)
    if iterable.type == "call":
        name = dotted_name(callee(iterable)) or ""
        positional, keywords = arguments(iterable)
        if name.split(".")[-1] == "DataLoader":
            return pins(keywords.get("pin_memory"))
        method = method_name(iterable)
        if (method == "values" and not path) or (method == "items" and path and path[0] == 1 and len(path) == 1):
            # `for t, pinned in host.items():` of `host = {t: t.pin_memory() for t in ts}`
            return _dict_values_pinned(ctx, receiver(iterable), depth + 1)
        if name == "enumerate" and positional:
            if not path:
                return False
            return path[0] == 1 and _loop_element_pinned(ctx, positional[0], path[1:], depth + 1)
        return False
    if iterable.type == "identifier":
        binding = _binding(ctx, iterable)
        if binding is None or binding.loop is not None:
            return False
        return _loop_element_pinned(ctx, binding.value, path, depth + 1)
    if iterable.type == "attribute":
        return any(
            _loop_element_pinned(ctx, value, path, depth + 1) for value in ctx.attribute_assignments(text(iterable))
        )
    return False


def pins(value: Optional[Node]) -> bool:
    """`pin_memory=<value>` pins unless it is written False / None / 0."""
    return value is not None and value.type not in ("false", "none") and text(value) != "0"


def module_pins(ctx: LintContext) -> bool:
    """Does the file pin host memory itself: a `DataLoader(..., pin_memory=True)`, a tensor
    allocated with `pin_memory=` anything but False (offloading code pins its buffers, often
    behind a flag that defaults to True), or a `.pin_memory()` call? Its pinned tensors reach the
    copies through parameters, attributes and containers the linter cannot follow. (A
    `DataLoader` whose `pin_memory=` is a variable is no evidence: the same file may build it
    both ways.)"""
    cached = ctx.memo.get("pins-host-memory")
    if cached is None:
        cached = ctx.memo["pins-host-memory"] = pins_within(ctx, 0, len(ctx.source.data))
    return bool(cached)


PINNING_CALLS = frozenset({"DataLoader", "pin_memory", *TORCH_FACTORIES, "empty_like", "zeros_like"})


def pins_within(ctx: LintContext, start: int, end: int) -> bool:
    """`module_pins` of the code in [start, end) (the file pins if any part of it does)."""
    if ctx.source.data.find(b"pin_memory", start, end) == -1:
        return False  # every way of pinning writes `pin_memory`
    for call in ctx.calls_named(PINNING_CALLS, start, end):
        name = (dotted_name(callee(call)) or "").split(".")[-1]
        if method_name(call) == "pin_memory":
            return True
        if name == "DataLoader":
            if is_true(arguments(call)[1].get("pin_memory")):
                return True
        elif pins(arguments(call)[1].get("pin_memory")):
            return True
    return False


_PAGEABLE_DEFAULT = re.compile(rb"\bpin_memory\s*(?::\s*bool\s*)?=\s*(?:False|None|0)\b")


def module_may_page(ctx: LintContext) -> bool:
    """Does the file make batches that may be pageable: a `DataLoader(...)` without
    `pin_memory=` (or with it False), or a `pin_memory` parameter or keyword that defaults to /
    is False (`def create_loader(..., pin_memory: bool = False)`)? Only then is a copy of a tensor
    handed in from elsewhere (a parameter, a loop over a loader built in another file, an
    attribute) reported: most loaders that feed `non_blocking=True` copies pin their batches."""
    cached = getattr(ctx, "_may_page", None)
    if cached is None:
        cached = bool(_PAGEABLE_DEFAULT.search(ctx.source.data))
        for call in ctx.module_calls("DataLoader"):
            if cached:
                break
            if (dotted_name(callee(call)) or "").split(".")[-1] == "DataLoader":
                value = arguments(call)[1].get("pin_memory")
                cached = value is None and not _has_splat(call) or value is not None and not pins(value)
        ctx._may_page = cached
    return cached


def _has_splat(call: Node) -> bool:
    """`DataLoader(ds, **loader_args)`: its `pin_memory=` may be in the dict."""
    args = call.child_by_field_name("arguments")
    return args is not None and any(c.type == "dictionary_splat" for c in args.named_children)


_HOST_SPELLED = re.compile(r"(?:^|_)(?:host|cpu|pinned|pin)(?:$|_)", re.I)
_DEVICE_SPELLED = re.compile(r"(?:^|_)(?:device|gpu|cuda|dev)(?:$|_)", re.I)


def spelled_as(node: Optional[Node], pattern: "re.Pattern[str]") -> bool:
    """Is some part of a name chain (`self.host_io.output_ids`) spelled as `pattern` says?"""
    while node is not None:
        node = strip_parens(node)
        if node.type == "identifier":
            return bool(pattern.search(text(node)))
        if node.type == "attribute":
            if pattern.search(text(node.child_by_field_name("attribute"))):
                return True
            node = node.child_by_field_name("object")
        elif node.type == "subscript":
            key = node.child_by_field_name("subscript")
            if key is not None and key.type == "string" and pattern.search(string_value(key)):
                return True  # `slot["host"]`
            node = node.child_by_field_name("value")
        else:
            return False
    return False


def spelled_host(node: Optional[Node]) -> bool:
    return spelled_as(node, _HOST_SPELLED)


def spelled_device(node: Optional[Node]) -> bool:
    return spelled_as(node, _DEVICE_SPELLED)
