"""Demo streaming LLM stand-in: streams MAX_TOKENS tokens, the first after a prefill time that grows with the
prompt (``first_token_secs``), each next one GAP_SECS later, then a final empty response.

The delays are scripted (absolute deadlines from the request's arrival in ``execute``, as in the streaming test's
model, so sleep overshoot does not accumulate): when the demo's prompts get longer, time to first token grows and
the goodput check sees it. The demo's stand-in for Triton and its replay read the same functions.
"""

import time

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton (the demo's replay and its accelerated test read the delays)
    pb_utils = None

BASE_SECS = 0.04  # fixed cost of a request before prefill
PREFILL_SECS_PER_TOKEN = 0.002  # 60 prompt tokens: 160 ms to the first token; 240: 520 ms
GAP_SECS = 0.02  # between tokens
MAX_TOKENS = 64


def first_token_secs(prompt_tokens):
    return BASE_SECS + PREFILL_SECS_PER_TOKEN * max(0, int(prompt_tokens))


def token_times(prompt_tokens, max_tokens):
    """Seconds from the request's arrival to each token."""
    first = first_token_secs(prompt_tokens)
    return [first + i * GAP_SECS for i in range(max(0, min(int(max_tokens), MAX_TOKENS)))]


def _scalar(request, name):
    return int(pb_utils.get_input_tensor_by_name(request, name).as_numpy().reshape(-1)[0])


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            start = time.monotonic()
            sender = request.get_response_sender()
            prompt = _scalar(request, "PROMPT_TOKENS")
            for i, at in enumerate(token_times(prompt, _scalar(request, "MAX_TOKENS"))):
                delay = start + at - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                token = pb_utils.Tensor("TOKEN", np.array([prompt + i], dtype=np.int32))
                sender.send(pb_utils.InferenceResponse(output_tensors=[token]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
