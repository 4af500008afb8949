"""Demo CTR model v1: a fixed logistic score over four features."""

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton (the demo's story test computes scores with score())
    pb_utils = None

WEIGHTS = np.array([0.8, -0.5, 0.3, 0.1], dtype=np.float32)
BIAS = -3.0


def score(x):
    return 1.0 / (1.0 + np.exp(-(x @ WEIGHTS + BIAS)))


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().astype(np.float32)
            out = pb_utils.Tensor("score", score(x).reshape(-1, 1).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
