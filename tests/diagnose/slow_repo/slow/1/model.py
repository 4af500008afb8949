import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            time.sleep(0.1)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", x.astype(np.float32))]))
        return out
