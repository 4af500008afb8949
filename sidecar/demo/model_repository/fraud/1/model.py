"""Demo fraud model: fails any request whose amount (x[0]) is negative.

It raises rather than returning an error response because Triton 2.51 counts an error response from the Python
backend as a success; a raised exception is counted in nv_inference_request_failure{reason="BACKEND"}. The
model has no dynamic batching, so one bad request never fails its neighbours.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().astype(np.float32)
            if (x[:, 0] < 0).any():
                raise pb_utils.TritonModelException("amount must not be negative")
            score = 1.0 / (1.0 + np.exp(-(0.002 * x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] - 2.0)))
            out = pb_utils.Tensor("score", score.reshape(-1, 1).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
