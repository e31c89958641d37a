"""Writes this bundle: tests/data/tiny_llama_upstream's model traced by the upstream-convention
Python reference (../shared/reference/make_upstream_fixture.py) with a left-padded batch, the
call being model(input_ids=ids, attention_mask=mask) with the last sample padded by 3 positions:
  inputs.safetensors    {"input_ids", "attention_mask"} as the call got them
  trace_repr/, trace_st/  the two kinds of trace
  config.json, input_ids.safetensors  copied from tiny_llama_upstream
The weights are tiny_llama_upstream's (model.safetensors, not copied here: the test reads them there).

  /usr/bin/python3 tests/data/tiny_llama_padded/make_tiny_llama_padded.py [REFERENCE_DIR]
REFERENCE_DIR defaults to /work/shared/reference."""
import os
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))
reference = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/reference"
source = os.path.join(here, "..", "tiny_llama_upstream")
subprocess.run([sys.executable, os.path.join(reference, "make_upstream_fixture.py"), here, "--from", source, "--pad", "3"],
               check=True)
os.remove(os.path.join(here, "model.safetensors"))  # a copy of the source bundle's weights
