"""Demo fraud model: fails any request whose amount (x[0]) is negative, as a real validation error would."""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy().astype(np.float32)
            if (x[:, 0] < 0).any():
                err = pb_utils.TritonError("amount must not be negative")
                responses.append(pb_utils.InferenceResponse(output_tensors=[], error=err))
                continue
            score = 1.0 / (1.0 + np.exp(-(0.002 * x[:, 0] + 0.5 * x[:, 1] - 0.3 * x[:, 2] - 2.0)))
            out = pb_utils.Tensor("score", score.reshape(-1, 1).astype(np.float32))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
