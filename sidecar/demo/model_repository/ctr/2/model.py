"""Demo CTR model v2: a retrained logistic score over four features."""

import numpy as np
import triton_python_backend_utils as pb_utils

WEIGHTS = np.array([0.9, -0.4, 0.35, 0.05], dtype=np.float32)
BIAS = -3.1


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().astype(np.float32)
            score = 1.0 / (1.0 + np.exp(-(x @ WEIGHTS + BIAS)))
            out = pb_utils.Tensor("score", score.reshape(-1, 1).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
