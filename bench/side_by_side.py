#!/usr/bin/python3
"""tracetorch's debugger and transformers' debugger side by side, in one run (docs/performance.md).

Both sides run the same model, weights and input ids: tracetorch_bench writes its model as a
bundle (--export), and the Python side loads that bundle into the reference's upstream Llama
(llama_upstream.py), or for --config moe its Qwen2-MoE (qwen2moe_ref.py, on the fixture
tests/data/qwen2_moe that the bench's moe runs), and traces it with the seed's debugger (hf_debugger_seed.py), which mirrors
transformers' model_addition_debugger_context. The runs interleave: each round runs
tracetorch_bench once (modes a, d, e, f, --repeats R) and then R repeats of the Python modes in a
shuffled order, the two sides taking turns to go first. Each side's samples are pooled over the
rounds; the table gives each side's medians, its ratios to its own plain forward, and C++ over
Python in absolute time. It prints markdown, ready to paste.

  /usr/bin/python3 bench/side_by_side.py [--bench build/bench/tracetorch_bench]
      [--reference DIR] [--config tiny|mid|seed004|moe ...] [--rounds N] [--repeats N] [--batch N] [--seq N]

The reference directory: --reference, else $TRACETORCH_REFERENCE, else ../shared/reference beside
the repository. Skips (exit 0, with a message) where python3-torch or the reference is missing.
"""
import argparse
import json
import mmap
import os
import platform
import random
import statistics
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = [("a", "plain forward"), ("d", "debugger, use_repr=True"), ("e", "debugger, use_repr=False"),
         ("f", "plain again: noise floor")]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", default=os.path.join(ROOT, "build", "bench", "tracetorch_bench"))
    p.add_argument("--reference", default=os.environ.get("TRACETORCH_REFERENCE",
                                                         os.path.join(os.path.dirname(ROOT), "shared", "reference")))
    p.add_argument("--config", nargs="+", default=["tiny"], choices=["tiny", "mid", "seed004", "moe"])
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (each side once per round)")
    p.add_argument("--repeats", type=int, default=3,
                   help="repeats per round and side (five times that for a forward under 50 ms, as the bench does)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=30)
    p.add_argument("--work", default="", help="scratch directory (default: a temporary one, removed)")
    return p.parse_args()


def skip(why):
    print(f"side_by_side: skipped: {why}")
    sys.exit(0)


def load_safetensors(path):
    """{name: tensor} read through mmap (the reference's reader copies the whole file twice)."""
    import torch
    dtypes = {"F32": torch.float32, "I64": torch.int64, "F16": torch.float16, "BF16": torch.bfloat16}
    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = memoryview(data)[8 + n + begin:8 + n + end]
        out[name] = torch.frombuffer(bytearray(raw), dtype=dtypes[info["dtype"]]).reshape(info["shape"])
    return out


class PythonSide:
    """The reference model on the bundle's weights (Llama, or Qwen2-MoE for the moe bundle), and
    the seed's debugger around it."""

    def __init__(self, reference, bundle, work, threads, moe=False, seq=0):
        import torch
        sys.path.insert(0, reference)
        from hf_debugger_seed import model_addition_debugger_context
        self.torch, self.context, self.work = torch, model_addition_debugger_context, work
        torch.set_num_threads(threads)
        torch.manual_seed(0)
        if moe:
            import qwen2moe_ref as ref
            import inspect
            with open(os.path.join(bundle, "config.json")) as f:
                keys = json.load(f)
            accepted = inspect.signature(ref.Qwen2MoeConfig).parameters  # not architectures, model_type, dtype
            config = ref.Qwen2MoeConfig(**{k: v for k, v in keys.items() if k in accepted})
            config.max_position_embeddings = max(config.max_position_embeddings, seq)  # as the bench does
            self.model = ref.Qwen2MoeModel(config).eval()
        else:
            import llama_upstream as ref
            config = ref.LlamaConfig.from_json_file(os.path.join(bundle, "config.json"))
            self.model = ref.LlamaModel(config).eval()
        self.model.load_state_dict(load_safetensors(os.path.join(bundle, "model.safetensors")), strict=False)
        self.ids = load_safetensors(os.path.join(bundle, "input_ids.safetensors"))["input_ids"]
        expected = load_safetensors(os.path.join(bundle, "last_hidden_state.safetensors"))["data"]
        with torch.no_grad():
            got = self.model(input_ids=self.ids).last_hidden_state
        self.max_difference = (got - expected).abs().max().item()
        if not self.max_difference <= 1e-4 * max(1.0, expected.abs().max().item()):
            raise SystemExit(f"side_by_side: the Python model differs from tracetorch_bench's by {self.max_difference}")
        self.calls = 1
        for mode, _ in MODES:
            self.run(mode)  # warm-up
        start = time.perf_counter()
        self.run("a")
        self.calls = int(min(50, max(1, 0.05 / (time.perf_counter() - start))))  # as tracetorch_bench does

    def run(self, mode):
        torch = self.torch
        with torch.no_grad():
            if mode in "af":
                self.model(input_ids=self.ids)
            else:
                use_repr = mode == "d"
                path = os.path.join(self.work, "python_repr" if use_repr else "python_safetensors")
                with self.context(self.model, debug_path=path, do_prune_layers=False, use_repr=use_repr):
                    self.model(input_ids=self.ids)

    def sample(self, mode):
        start = time.perf_counter()
        for _ in range(self.calls):
            self.run(mode)
        return (time.perf_counter() - start) / self.calls


def run_bench(args, config, work, extra):
    command = [args.bench, "--config", config, "--batch", str(args.batch), "--seq", str(args.seq),
               "--disk-mb", "0", "--out", os.path.join(work, "cpp")] + extra
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"side_by_side: {' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def read_samples(path, config):
    samples = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                name, mode, values = line.rstrip("\n").split("\t")
                if name == config:
                    samples.setdefault(mode, []).extend(float(v) for v in values.split())
    return samples


def measure(args, config, work):
    bundle_root = os.path.join(work, "bundle")
    run_bench(args, config, work, ["--export", bundle_root])
    header = run_bench(args, config, work, ["--modes", "a", "--repeats", "1"]).splitlines()[0]
    threads = int(header.split("torch threads ")[1].split()[0])
    python = PythonSide(args.reference, os.path.join(bundle_root, config), work, threads, moe=config == "moe", seq=args.seq)
    samples_file = os.path.join(work, f"samples_{config}.tsv")
    if os.path.exists(samples_file):
        os.remove(samples_file)
    python_samples = {mode: [] for mode, _ in MODES}
    shuffler = random.Random(0)
    python_repeats = args.repeats * 5 if python.calls > 1 else args.repeats
    for round_index in range(args.rounds):
        def cpp_turn():
            run_bench(args, config, work, ["--modes", "adef", "--repeats", str(args.repeats), "--samples", samples_file])

        def python_turn():
            for _ in range(python_repeats):
                order = [mode for mode, _ in MODES]
                shuffler.shuffle(order)
                for mode in order:
                    python_samples[mode].append(python.sample(mode))
        turns = [cpp_turn, python_turn] if round_index % 2 == 0 else [python_turn, cpp_turn]
        for turn in turns:
            turn()
        print(f"[{config}] round {round_index + 1}/{args.rounds} done (load {load_average()})", file=sys.stderr)
    return read_samples(samples_file, config), python_samples, python


def load_average():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def machine():
    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.platform()}"


def commit():
    try:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def table(config, cpp, python, python_side):
    def med(values):
        return statistics.median(values) if values else float("nan")

    def fmt(seconds):
        return f"{seconds * 1e3:.2f} ms" if seconds < 1 else f"{seconds:.3f} s"
    rows = []
    for mode, label in MODES:
        c, p = med(cpp.get(mode, [])), med(python[mode])
        rows.append(f"| {config} | {label} | {fmt(c)} | {c / med(cpp['a']):.3f} | {fmt(p)} | "
                    f"{p / med(python['a']):.3f} | {c / p:.3f} |")
    note = (f"{len(cpp['a'])} C++ samples a mode, {len(python['a'])} Python samples a mode "
            f"({python_side.calls} calls each); largest difference of the two last hidden states "
            f"{python_side.max_difference:.2e}")
    return rows, note


def main():
    args = parse_args()
    try:
        import torch
    except ImportError:
        skip("python3-torch is missing (apt-get install python3-torch)")
    for name in ("hf_debugger_seed.py", "llama_upstream.py") + (("qwen2moe_ref.py",) if "moe" in args.config else ()):
        if not os.path.exists(os.path.join(args.reference, name)):
            skip(f"{os.path.join(args.reference, name)} is missing (give --reference DIR or TRACETORCH_REFERENCE)")
    if not os.access(args.bench, os.X_OK):
        skip(f"{args.bench} is not built (cmake --build build -j1 --target tracetorch_bench)")
    load_start = load_average()
    with tempfile.TemporaryDirectory(prefix="side_by_side_") as scratch:
        work = args.work or scratch
        os.makedirs(work, exist_ok=True)
        results = [(config, *measure(args, config, work)) for config in args.config]
    print(f"Machine: {machine()}. Commit {commit()}. {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}. "
          f"torch {torch.__version__} (Python side), batch {args.batch} x seq {args.seq}, {args.rounds} rounds of "
          f"--repeats {args.repeats}. Load average {load_start} at start, {load_average()} at end.\n")
    print("| config | mode | C++ (tracetorch) median | C++ ratio to its plain | Python (transformers' debugger) median "
          "| Python ratio to its plain | C++ over Python |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    notes = []
    for config, cpp, python, python_side in results:
        rows, note = table(config, cpp, python, python_side)
        print("\n".join(rows))
        notes.append(f"- {config}: {note}.")
    print("\nThe plain forwards: C++ is plain LibTorch (bench/plain_llama.cpp), Python the reference's upstream Llama; "
          "for moe, no plain LibTorch MoE exists, so C++'s is the annotated port untraced (examples/qwen2_moe) and "
          "Python's the reference's Qwen2-MoE; \"plain again\" is each side's noise floor.")
    print("\n".join(notes))


if __name__ == "__main__":
    main()
