"""transformers' output-capturing rules, restated in plain torch for make_capture_mirror.py.

Read from upstream's source (utils/output_capturing.py: `capture_outputs`, `OutputRecorder`,
`recursively_install_hooks`, `install_all_output_capturing_hooks`; monkey_patching.py:
`register_patch_mapping`, `_find_replacement_class`, `patch_output_recorders`) and written anew:

- a model class that captures derives from `CapturingModel` (upstream: `PreTrainedModel`) and
  declares its record map as the class attribute `can_record` (upstream: `_can_record_outputs`, a
  class-level dict that the registry holds by reference, so patching it changes every instance);
- each key is asked for by `output_<key>` from the call's keywords, else the config's attribute
  of that name, else False; cross_attentions follows output_attentions;
- a recorder given as a bare class records element 0 for a key containing "hidden_states", else 1;
- hooks are installed once per model instance, the first time it captures anything, and stay;
  they write into the collector of the capture under way (upstream: a context variable), and
  do nothing while none is under way or it did not ask for their key;
- the walk that installs them goes through the children: a child that is itself a capturing model
  installs its own record map's hooks below it (with the path so far as its prefix) and the outer
  record map stops there, the sub-model itself included; every other module is hooked for each
  recorder whose target it is an instance of (isinstance) and, when the recorder has a
  layer_name, whose dotted path (".a.b", with a leading dot) contains it as a substring;
- a hook appends element `index` of a tuple output (skipped when None), a non-tuple output whole;
  for "hidden_states" the first value appended is the first hooked call's first argument;
- hidden_states drops its last value and ends with the output's vision_hidden_states, else its
  last_hidden_state (unless tie_last_hidden_states=False);
- two recorders under "attentions" are split by position: even values attentions, odd ones
  cross_attentions;
- captured fields are set on the output after the forward's own ones, in record-map order, and
  to_tuple() lists the set fields in the order they were set;
- the patch registry: exact names first, then each key in registration order as a Python regex
  (`re.search`; a key that does not compile is skipped); patch_output_recorders replaces, in the
  record map of each capturing model in the model, a bare class or an OutputRecorder's target by
  its replacement; a list of recorders is left as it is (upstream checks only those two forms).
"""
import re

import torch.nn as nn


class Recorder:
    """upstream's OutputRecorder."""

    def __init__(self, target, index=0, layer_name=None):
        self.target, self.index, self.layer_name = target, index, layer_name


class CapturingModel(nn.Module):
    can_record = {}


class Config:
    def __init__(self, **flags):
        self.__dict__.update(flags)


_active_collector = None  # the collector of the capture under way on this (only) thread


def recorders_of(record_map):
    tasks = []
    for key, specs in record_map.items():
        for spec in specs if isinstance(specs, list) else [specs]:
            if not isinstance(spec, Recorder):
                spec = Recorder(spec, 0 if "hidden_states" in key else 1)
            tasks.append((key, spec))
    return tasks


def requested_keys(record_map, kwargs, config):
    def flag(name):
        return kwargs.get(name, getattr(config, name, False))
    wanted = {key: flag("output_" + key) for key in record_map}
    if "cross_attentions" in record_map:
        wanted["cross_attentions"] = flag("output_attentions")
    return [key for key in record_map if wanted[key]]


def make_hook(key, index):
    def hook(_, args, output):
        collected = _active_collector
        if collected is None or key not in collected:
            return
        if key == "hidden_states" and not collected[key]:
            collected[key].append(args[0])
        if not isinstance(output, tuple):
            collected[key].append(output)
        elif output[index] is not None:
            collected[key].append(output[index])
    return hook


def hook_below(module, path, tasks):
    for name, child in module.named_children():
        if isinstance(child, CapturingModel):
            install_hooks(child, f"{path}.{name}")
        else:
            hook_below(child, f"{path}.{name}", tasks)
    for key, spec in tasks:
        if not isinstance(module, spec.target):
            continue
        if spec.layer_name is not None and spec.layer_name not in path:
            continue
        module.register_forward_hook(make_hook(key, spec.index))


def install_hooks(model, prefix=""):
    hook_below(model, prefix, recorders_of(type(model).can_record))
    model.hooks_installed = True


def capture(model, forward, kwargs, tie_last_hidden_states=True, fields=("last_hidden_state",)):
    """Runs forward() (which returns an ordered dict of the forward's own non-None fields) as
    upstream's @capture_outputs, and returns the output with the captured fields set after them.
    `fields` are the output class's declared fields other than the captured ones (upstream's hasattr)."""
    global _active_collector
    record_map = type(model).can_record
    collected = {key: [] for key in requested_keys(record_map, kwargs, model.config)}
    if collected and not getattr(model, "hooks_installed", False):
        install_hooks(model)
    outer, _active_collector = _active_collector, collected
    try:
        outputs = forward()
    finally:
        _active_collector = outer
    for key, values in collected.items():
        if key == "hidden_states" and tie_last_hidden_states:
            tie_field = next((f for f in ("vision_hidden_states", "last_hidden_state") if f in fields), None)
            if tie_field is not None:
                values = values[:-1] + [outputs.get(tie_field)]
        if key == "attentions" and isinstance(record_map[key], list) and len(record_map[key]) == 2:
            outputs["attentions"] = tuple(values[0::2])
            outputs["cross_attentions"] = tuple(values[1::2])
        else:
            outputs[key] = tuple(values)
    return outputs


# ---- the patch registry --------------------------------------------------------------------------

patch_mapping = {}  # key (a class name or a pattern) -> replacement class, in registration order


def find_replacement(class_name):
    if class_name in patch_mapping:
        return patch_mapping[class_name]
    for key, replacement in patch_mapping.items():
        try:
            pattern = re.compile(key)
        except re.error:
            continue
        if pattern.search(class_name):
            return replacement
    return None


def patch_output_recorders(model):
    for module in model.modules():
        record_map = type(module).can_record if isinstance(module, CapturingModel) else None
        if not record_map:
            continue
        for key, recorder in record_map.items():
            if isinstance(recorder, Recorder):
                replacement = find_replacement(recorder.target.__name__)
                if replacement is not None:
                    recorder.target = replacement
            elif isinstance(recorder, type):
                replacement = find_replacement(recorder.__name__)
                if replacement is not None:
                    record_map[key] = replacement
