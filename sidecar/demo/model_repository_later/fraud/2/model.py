"""Demo fraud model v2: the canary of the demo's last step. Same scores and failures as v1, but slower at P99:
requests with risk above SLOW_RISK_Z standard deviations (about 7%, against v1's 1%) take SLOW_SECS longer.
The canary verdict calls it worse and the actions layer plans (or, with ``sidecar demo --act``, carries out) a
revert to v1.
"""

import time

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton (the demo's story test computes scores with score())
    pb_utils = None


SLOW_RISK_Z = 1.5
SLOW_SECS = 0.3


def delay_secs(x):
    """How much longer this request takes (the demo's stand-in for Triton and its replay read it too)."""
    return SLOW_SECS if (x[:, 2] > SLOW_RISK_Z).any() else 0.0


def score(x):
    return 1.0 / (1.0 + np.exp(-(0.002 * x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] - 2.0)))


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().astype(np.float32)
            if (x[:, 0] < 0).any():
                raise pb_utils.TritonModelException("amount must not be negative")
            delay = delay_secs(x)
            if delay > 0:
                time.sleep(delay)
            out = pb_utils.Tensor("score", score(x).reshape(-1, 1).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
